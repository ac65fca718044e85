"""
Reading counters: a parent's shard items in one BatchGetItem, summed.

::

    Post.like_tally.total(post)                 # one parent: an int
    Post.like_tally.totals([key_a, key_b])      # many parents: {key: int}

These are the explicit reads of a sharded counter (``post.like_tally`` holds only the parent item's share). On an
unsharded counter they read the parent item alone, like ``Post.get()`` would.
"""
from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Tuple, Type, Union

from pynamodb.constants import KEYS, RESPONSES, UNPROCESSED_KEYS

from .compat import key_attributes, key_of, serialize_key
from .exceptions import CorruptCounterError, TransactionError
from .relations import ParentKey, normalize_key
from .retries import DEFAULT_RETRY_POLICY
from .shards import SHARD_COUNT, shard_count, shard_key

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.models import Model

    from .attributes import CounterField

__all__ = ["ShardItems", "Stored", "count_of", "counter_shards", "parent_keys", "read_shards", "read_totals",
           "stored_of", "whole_count"]

BATCH_KEYS = 100
"""DynamoDB's limit on keys in one BatchGetItem."""

ShardItems = List[Optional[Dict[str, Any]]]
"""One parent's shard items as DynamoDB returned them, by shard index (``None`` where an item is absent)."""

Stored = Union[int, Decimal]
"""A counter as DynamoDB holds it: an ``int``, or a :class:`~decimal.Decimal` for a number that is not whole."""


def read_totals(counter: CounterField, parents: Iterable[Any], *, consistent_read: bool = False,
                missing_ok: bool = False) -> Dict[ParentKey, int]:
    """Each parent's total of ``counter``: its shard items read with BatchGetItem and summed.

    :param parents: model instances, hash key values or ``(hash, range)`` tuples.
    :param missing_ok: leave out parents that do not exist, rather than raise.
    :raises DoesNotExist: the parent model's own ``DoesNotExist``, for a parent that does not exist.
    """
    assert counter.model is not None
    model = counter.model
    keys = parent_keys(model, parents, f"{counter!r}.total()")
    found = read_shards(model, keys, counter.shards, consistent_read=consistent_read)
    totals: Dict[ParentKey, int] = {}
    for key in keys:
        items = found[key]
        if not items[0]:
            if missing_ok:
                continue
            raise model.DoesNotExist(f"{model.__name__} {key!r} does not exist")
        totals[key] = sum(whole_count(item, counter, key) or 0 for item in items)
    return totals


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


def count_of(item: Optional[Dict[str, Any]], attr_name: str) -> Optional[int]:
    """A number attribute of a raw item, or ``None`` when the item or the attribute is absent."""
    raw = ((item or {}).get(attr_name) or {}).get("N")
    return int(raw) if raw is not None else None


def stored_of(item: Optional[Dict[str, Any]], attr_name: str) -> Optional[Stored]:
    """A counter of a raw item exactly as stored: an ``int``, a :class:`~decimal.Decimal` when it is not a whole
    number, ``None`` when the item or the attribute is absent."""
    raw = ((item or {}).get(attr_name) or {}).get("N")
    if raw is None:
        return None
    number = Decimal(raw)
    return int(number) if number == number.to_integral_value() else number


def whole_count(item: Optional[Dict[str, Any]], counter: CounterField, key: ParentKey) -> Optional[int]:
    """``counter`` in a raw item of the parent ``key`` (or one of its shard items), ``None`` when absent.

    :raises CorruptCounterError: the item holds a number that is not whole, naming the parent and the counter.
    """
    value = stored_of(item, counter.attr_name)
    if isinstance(value, Decimal):
        assert counter.model is not None
        raise CorruptCounterError.of(counter.model, key, str(counter.name), value)
    return value


def counter_shards(counter: CounterField, items: ShardItems) -> List[Tuple[int, Optional[Dict[str, Any]]]]:
    """The shard items (index, item) that hold or may receive ``counter``'s counts: the parent item, the counter's
    own shards (present or not), and any further shard item still holding a count of it (left by a reduced
    ``shards=`` not yet collapsed)."""
    return [(shard, item) for shard, item in enumerate(items)
            if shard < counter.shards or count_of(item, counter.attr_name) is not None]


def read_shards(model: Type[Model], keys: List[ParentKey], shards: int, *, consistent_read: bool = False,
                charge: Optional[Callable[[Dict[str, Any]], None]] = None,
                parents: Optional[Dict[ParentKey, Optional[Dict[str, Any]]]] = None) -> Dict[ParentKey, ShardItems]:
    """Every shard item of each parent, by shard index: shards ``0 .. shards - 1`` (at least as many as the
    model's largest ``shards=``: its counters share their shard items), and any further shards a parent item
    records in :data:`~pynamodb_counters.shards.SHARD_COUNT` (left by a counter whose shards were reduced but not
    yet folded in, see :func:`~pynamodb_counters.resharding.reshard`: a second BatchGetItem reads them).

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
    _fetch(model, [(key, shard) for key in keys for shard in range(first, shards)], found, consistent_read, charge)
    extra: List[Tuple[ParentKey, int]] = []
    for key, items in found.items():
        created = count_of(items[0], SHARD_COUNT.attr_name) or 1
        if created > shards:
            items.extend([None] * (created - shards))
            extra.extend((key, shard) for shard in range(shards, created))
    if extra:
        _fetch(model, extra, found, consistent_read, charge)
    return found


def _fetch(model: Type[Model], wanted: List[Tuple[ParentKey, int]], found: Dict[ParentKey, ShardItems],
           consistent_read: bool, charge: Optional[Callable[[Dict[str, Any]], None]]) -> None:
    """BatchGetItem of ``wanted`` (parent key, shard) pairs, 100 at a time, filing each item in ``found``."""
    attributes = key_attributes(model)
    by_key: Dict[Tuple[Any, ...], Tuple[ParentKey, int]] = {}
    requests: List[Dict[str, Any]] = []
    for key, shard in wanted:
        serialized = serialize_key(model, shard_key(key, shard))
        by_key[serialized] = (key, shard)
        requests.append({attribute.attr_name: value for attribute, value in zip(attributes, serialized)})
    connection = model._get_connection()
    table = model.Meta.table_name

    def serialized_key(item: Dict[str, Any]) -> Tuple[Any, ...]:
        values = tuple(item[a.attr_name][a.attr_type] for a in attributes)
        return values if len(values) == 2 else values + (None,)

    for start in range(0, len(requests), BATCH_KEYS):
        pending = requests[start:start + BATCH_KEYS]
        for attempt in range(1, DEFAULT_RETRY_POLICY.max_attempts + 1):
            response = connection.batch_get_item(pending,  # type: ignore[arg-type]  # PynamoDB: key dicts
                                                 consistent_read=consistent_read or None,
                                                 return_consumed_capacity="TOTAL")
            if charge is not None:
                charge(response)
            for item in response.get(RESPONSES, {}).get(table, []):
                key, shard = by_key[serialized_key(item)]
                found[key][shard] = item
            unprocessed = response.get(UNPROCESSED_KEYS, {}).get(table, {}).get(KEYS, [])
            pending = [{a.attr_name: value for a, value in zip(attributes, serialized_key(raw))}
                       for raw in unprocessed]
            if not pending:
                break
            DEFAULT_RETRY_POLICY.sleep(DEFAULT_RETRY_POLICY.delay(attempt))
        if pending:
            raise TransactionError(f"BatchGetItem left {len(pending)} keys of {table} unprocessed through "
                                   f"{DEFAULT_RETRY_POLICY.max_attempts} attempts (throttled)")
