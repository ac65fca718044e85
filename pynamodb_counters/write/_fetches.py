"""
The reads of counters and children: each parent's shard items in BatchGetItem requests, a stored child in one
GetItem, a model's parents in a Scan.

::

    Post.like_tally.total(post)                 # one parent: an int
    Post.like_tally.totals([key_a, key_b])      # many parents: {key: int}

These are the explicit reads of a sharded counter (``post.like_tally`` holds only the parent item's share). On an
unsharded counter they read the parent item alone, like ``Post.get()`` would.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Type

from pynamodb.constants import (
    BATCH_GET_ITEM,
    BINARY,
    CONSISTENT_READ,
    GET_ITEM,
    ITEM,
    KEYS,
    REQUEST_ITEMS,
    RESPONSES,
    RETURN_CONSUMED_CAPACITY,
    TOTAL,
    UNPROCESSED_KEYS,
)
from pynamodb.expressions.operand import Path

from .._keys import ParentKey, key_attributes, key_of, serialize_key
from ..declare._counting_rule import normalize_key
from ..declare._shards import is_shard_item, not_a_shard, shard_key
from ..declare._spec import shard_count
from ..declare._stored_names import MARKER, SHARD_COUNT
from ..exceptions import MissingChildError, TransactionError
from ..signals import missing_rejected, send_safely
from ..transport._calls import Call, Steps
from ..transport._pynamodb import asked, tables_known
from ..transport._resend import DEFAULT_RETRY_POLICY
from ..transport._sync import run
from ._items import ShardItems, count_of, whole_count
from ._stored import Stored

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.models import Model

    from ..declare._attributes import CounterField
    from ..declare._relations import Relation

__all__ = ["child_read", "parent_keys", "read_shards", "read_totals", "scan_parents", "shards_read", "stored_child",
           "stored_item", "totals"]

BATCH_KEYS = 100
"""DynamoDB's limit on keys in one BatchGetItem."""


def read_totals(counter: CounterField, parents: Iterable[Any], *, consistent_read: bool = False,
                missing_ok: bool = False) -> Dict[ParentKey, int]:
    """:func:`totals`, sent by the sync driver."""
    return run(totals(counter, parents, consistent_read=consistent_read, missing_ok=missing_ok))


def totals(counter: CounterField, parents: Iterable[Any], *, consistent_read: bool = False,
           missing_ok: bool = False) -> Steps[Dict[ParentKey, int]]:
    """Each parent's total of ``counter``: its shard items read with BatchGetItem and summed.

    :param parents: model instances, hash key values or ``(hash, range)`` tuples.
    :param missing_ok: leave out parents that do not exist, rather than raise.
    :raises DoesNotExist: the parent model's own ``DoesNotExist``, for a parent that does not exist.
    """
    assert counter.model is not None
    model = counter.model
    keys = parent_keys(model, parents, f"{counter!r}.total()")
    found = yield from shards_read(model, keys, counter.shards, consistent_read=consistent_read)
    counted: Dict[ParentKey, int] = {}
    for key in keys:
        items = found[key]
        if not items[0]:
            if missing_ok:
                continue
            raise model.DoesNotExist(f"{model.__name__} {key!r} does not exist")
        counted[key] = sum(whole_count(item, counter, key) or 0 for item in items)
    return counted


def parent_keys(model: Type[Model], parents: Iterable[Any], where: str) -> List[ParentKey]:
    """``parents`` (instances of ``model``, hash key values or key tuples) as key tuples, in order, once each."""
    keys: Dict[ParentKey, None] = {}
    for parent in parents:
        if isinstance(parent, model):
            key = key_of(parent)
        else:
            key = normalize_key(model, parent, where)
        keys[key] = None
    return list(keys)


def read_shards(model: Type[Model], keys: List[ParentKey], shards: int, *, consistent_read: bool = False,
                charge: Optional[Callable[[Dict[str, Any]], None]] = None,
                parents: Optional[Dict[ParentKey, Optional[Dict[str, Any]]]] = None) -> Dict[ParentKey, ShardItems]:
    """:func:`shards_read`, sent by the sync driver."""
    return run(shards_read(model, keys, shards, consistent_read=consistent_read, charge=charge, parents=parents))


def shards_read(model: Type[Model], keys: List[ParentKey], shards: int, *, consistent_read: bool = False,
                charge: Optional[Callable[[Dict[str, Any]], None]] = None,
                parents: Optional[Dict[ParentKey, Optional[Dict[str, Any]]]] = None
                ) -> Steps[Dict[ParentKey, ShardItems]]:
    """Every shard item of each parent, by shard index: shards ``0 .. shards - 1`` (at least as many as the
    model's largest ``shards=``: its counters share their shard items), and any further shards a parent item
    records in ``_cshards`` (left by a counter whose shards were reduced but not
    yet folded in, see :func:`~pynamodb_counters.reshard`: a second BatchGetItem reads them). An item at a shard
    key that is not a shard item (no ``_cshard``: another item whose own key it is) is left out, as absent.

    :param charge: called with each BatchGetItem response, to account for its consumed capacity.
    :param parents: the parent items (shard 0), when they were just read: they are not read again.
    """
    shards = max(shards, shard_count(model))
    found: Dict[ParentKey, ShardItems] = {key: [None] * shards for key in keys}
    first = 0
    if parents is not None:
        first = 1
        for key in keys:
            found[key][0] = parents[key]
    yield from _fetch(model, [(key, shard) for key in keys for shard in range(first, shards)], found, consistent_read,
                      charge)
    extra: List[Tuple[ParentKey, int]] = []
    for key, items in found.items():
        created = count_of(items[0], SHARD_COUNT.attr_name) or 1
        if created > shards:
            items.extend([None] * (created - shards))
            extra.extend((key, shard) for shard in range(shards, created))
    if extra:
        yield from _fetch(model, extra, found, consistent_read, charge)
    return found


def _fetch(model: Type[Model], wanted: List[Tuple[ParentKey, int]], found: Dict[ParentKey, ShardItems],
           consistent_read: bool, charge: Optional[Callable[[Dict[str, Any]], None]]) -> Steps[None]:
    """BatchGetItem of ``wanted`` (parent key, shard) pairs, 100 at a time, filing each item in ``found`` (but for
    an item at a shard key that is not a shard item); keys left unprocessed (throttled) are asked again after the
    default retry policy's backoff, within its attempts."""
    attributes = key_attributes(model)
    # one item may be wanted twice: a parent whose own key is another parent's shard key (never a shard of it)
    by_key: Dict[Tuple[Any, ...], List[Tuple[ParentKey, int]]] = {}
    requested: Dict[Tuple[Any, ...], Dict[str, Any]] = {}
    table = model.Meta.table_name
    yield from tables_known([model])
    connection = model._get_connection().connection
    for key, shard in wanted:
        serialized = serialize_key(model, shard_key(key, shard))
        found_as = _padded(tuple(_as_returned(a.attr_type, value) for a, value in zip(attributes, serialized)))
        if found_as not in requested:
            requested[found_as] = connection.get_item_attribute_map(
                table, {attribute.attr_name: value for attribute, value in zip(attributes, serialized)})[ITEM]
        by_key.setdefault(found_as, []).append((key, shard))
    requests = list(requested.values())

    def serialized_key(item: Dict[str, Any]) -> Tuple[Any, ...]:
        return _padded(tuple(_as_returned(a.attr_type, item[a.attr_name][a.attr_type]) for a in attributes))

    read: Dict[str, Any] = {CONSISTENT_READ: True} if consistent_read else {}
    for start in range(0, len(requests), BATCH_KEYS):
        pending = requests[start:start + BATCH_KEYS]
        for attempt in range(1, DEFAULT_RETRY_POLICY.max_attempts + 1):
            response = yield from asked(Call(model, BATCH_GET_ITEM, {
                REQUEST_ITEMS: {table: {**read, KEYS: pending}}, RETURN_CONSUMED_CAPACITY: TOTAL}))
            if charge is not None:
                charge(response)
            for item in response.get(RESPONSES, {}).get(table, []):
                for key, shard in by_key[serialized_key(item)]:
                    if shard == 0 or is_shard_item(item):  # another item at a shard key is not one: never counted
                        found[key][shard] = item
            pending = response.get(UNPROCESSED_KEYS, {}).get(table, {}).get(KEYS, [])
            if not pending:
                break
            yield DEFAULT_RETRY_POLICY.wait(attempt)
        if pending:
            raise TransactionError(f"BatchGetItem left {len(pending)} keys of {table} unprocessed through "
                                   f"{DEFAULT_RETRY_POLICY.max_attempts} attempts (throttled)")


def _padded(values: Tuple[Any, ...]) -> Tuple[Any, ...]:
    """A key's values as ``(hash, range)``, the range ``None`` for a model without one."""
    return values if len(values) == 2 else values + (None,)


def _as_returned(attr_type: str, value: Any) -> Any:
    """A key value, serialized for a request or returned by one, in one form: PynamoDB 5 serializes a binary value
    as its base64 text and returns it as that text in bytes (PynamoDB 6: the bytes themselves, both ways)."""
    return value.encode("ascii") if attr_type == BINARY and isinstance(value, str) else value


def stored_child(model: Type[Model], instance: Model) -> Stored:
    """:func:`child_read`, sent by the sync driver."""
    return run(child_read(model, instance))


def child_read(model: Type[Model], instance: Model) -> Steps[Stored]:
    """The stored child with ``instance``'s key, read strongly consistently, for a delete of an instance that
    cannot name its parents (built from its key alone) or an update of an instance never loaded.

    :raises MissingChildError: there is none (``missing_rejected`` is sent).
    """
    item = yield from stored_item(model, key_of(instance))
    if not item:
        error = MissingChildError(f"{model.__name__} {key_of(instance)!r} does not exist; no counter was "
                                  f"decremented", model=model, key=key_of(instance))
        send_safely(missing_rejected, model, instance=instance, error=error)
        raise error
    return Stored(model, item)


def stored_item(model: Type[Model], key: Tuple[Any, ...]) -> Steps[Optional[Dict[str, Any]]]:
    """The item of ``model`` at ``key`` as stored (one strongly consistent GetItem), ``None`` where there is none.

    :raises GetError: PynamoDB's, as its ``get_item()`` raises it.
    """
    yield from tables_known([model])
    hash_key, range_key = serialize_key(model, key)
    request = model._get_connection().get_operation_kwargs(hash_key, range_key=range_key, consistent_read=True)
    response = yield from asked(Call(model, GET_ITEM, request))
    item: Optional[Dict[str, Any]] = response.get("Item")
    return item or None


def scan_parents(model: Any, feeders: Sequence[Relation], key_prefix: Optional[str] = None, segment: int = 0,
                 segments: int = 1, charge: Optional[Callable[[Dict[str, Any], int], None]] = None
                 ) -> Iterator[Tuple[ParentKey, Dict[str, Any]]]:
    """The parents of ``model`` (key and raw item) in one segment of a strongly consistent Scan of its table:
    items that pass its ``audit_filter()``, are neither shard items nor expiry markers (the library's own), are not
    children stored beside it under a relation's ``prefix=``, and (with ``key_prefix``) have a hash key starting
    with it.

    :param charge: called with each page and how many items it scanned, to account for capacity.
    """
    attributes = key_attributes(model)
    condition = model.audit_filter()
    for relation in feeders:  # children stored beside their parents are never parents
        child = relation.child_model
        if relation.prefix and child.Meta.table_name == model.Meta.table_name and len(attributes) > 1:
            not_child = ~attributes[-1].startswith(relation.prefix)
            condition = not_child if condition is None else condition & not_child
    if key_prefix is not None:
        by_prefix = attributes[0].startswith(key_prefix)
        condition = by_prefix if condition is None else condition & by_prefix
    ours = not_a_shard() & Path(MARKER).does_not_exist()  # the library's own items are never parents
    condition = ours if condition is None else condition & ours
    connection = model._get_connection()
    start: Optional[Dict[str, Any]] = None
    while True:
        page = connection.scan(filter_condition=condition, segment=segment if segments > 1 else None,
                               total_segments=segments if segments > 1 else None, exclusive_start_key=start,
                               consistent_read=True, return_consumed_capacity="TOTAL")
        if charge is not None:
            charge(page, int(page.get("ScannedCount", 1) or 1))
        for item in page.get("Items", []):
            yield tuple(a.deserialize(a.get_value(item[a.attr_name])) for a in attributes), item
        start = page.get("LastEvaluatedKey")
        if not start:
            return
