"""
Bringing a parent's shard items in line with its counters: read them, write the one transaction that reshapes
them (``reshape_requests``), and read again if a live write moved one meanwhile.

The I/O under :func:`pynamodb_counters.reshard`, a parent's first ``save()`` and the commit pipeline's recovery of
a parent stored before its counter was sharded.
"""
from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Optional, Tuple, Type

from pynamodb.expressions.operand import Path

from .._keys import ParentKey
from ..declare._shards import foreign_shard, foreign_shard_message
from ..declare._spec import counters_of
from ..declare._stored_names import SEQUENCE, SHARD_COUNT, STREAM_MARK
from ..exceptions import ConditionFailedError, TransactionError
from ..transport._calls import Steps
from ..transport._sync import run
from ._actions import ShardItem
from ._conditions import parent_condition, shard_request, shard_unchanged
from ._fetches import parent_keys, shards_read
from ._items import ShardItems, count_of, whole_count
from ._send import DEFAULT_RETRY_POLICY, transact

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.expressions.update import Action
    from pynamodb.models import Model

    from ..declare._attributes import CounterField

__all__ = ["create_shards", "reshape", "reshape_requests", "reshaped", "shards_created"]


def create_shards(model: Type[Model], parents: Iterable[Any], *, max_attempts: int = 5,
                  saved: bool = False) -> int:
    """:func:`shards_created`, sent by the sync driver."""
    return run(shards_created(model, parents, max_attempts=max_attempts, saved=saved))


def shards_created(model: Type[Model], parents: Iterable[Any], *, max_attempts: int = 5,
                   saved: bool = False) -> Steps[int]:
    """Bring each parent's shard items in line with ``model``'s declared counters: create the missing ones (and
    fold any a smaller ``shards=`` no longer uses into the parent). A parent's ``save()`` calls it the first time;
    it is idempotent.

    :param saved: the parent's ``save()`` has just written the parent item (a refusal says so).
    :returns: how many parents were rewritten.
    :raises ConditionFailedError: a shard's key holds another item (not a shard item); none of that parent's
      shard items was written.
    :raises DoesNotExist: the model's own, for a parent that does not exist.
    :raises TransactionError: a parent kept changing through ``max_attempts`` attempts.
    """
    keys = parent_keys(model, parents, f"create_shards({model.__name__}, parents=...)")
    rewritten = 0
    for key in keys:
        rewritten += (yield from reshaped(model, key, {}, max_attempts, saved))
    return rewritten


def reshape(model: Type[Model], key: ParentKey, targets: Dict[str, int], max_attempts: int,
            saved: bool = False) -> bool:
    """:func:`reshaped`, sent by the sync driver."""
    return run(reshaped(model, key, targets, max_attempts, saved))


def reshaped(model: Type[Model], key: ParentKey, targets: Dict[str, int], max_attempts: int,
             saved: bool = False) -> Steps[bool]:
    """One parent: read its shard items, write the one transaction that gives each counter its ``targets``
    number of shards (its declared number where ``targets`` names none); again if it moved.

    :param saved: the parent's ``save()`` has just written the parent item (a refusal says so).
    :returns: whether anything was written.
    :raises DoesNotExist: the model's own, for a parent that does not exist.
    :raises ConditionFailedError: a shard's key holds another item (not a shard item); nothing was written.
    :raises TransactionError: the parent kept changing through ``max_attempts`` attempts.
    """
    counters = counters_of(model)
    wanted = {name: targets.get(name, counter.shards) for name, counter in counters.items()}
    layout = max(wanted.values(), default=1)
    for attempt in range(1, max_attempts + 1):
        if attempt > 1:
            yield DEFAULT_RETRY_POLICY.wait(attempt - 1)
        items = (yield from shards_read(model, [key], layout, consistent_read=True))[key]
        if not items[0]:
            raise model.DoesNotExist(f"{model.__name__} {key!r} does not exist; nothing was written")
        requests = reshape_requests(model, key, items, counters, wanted, layout)
        if not requests:
            return False
        sent = yield from transact(model, requests, str(uuid.uuid4()))
        if sent.response is not None:
            return True
        reasons = sent.cancellation_reasons or []
        shard = foreign_shard(model, key, [reason.get("Item") for reason in reasons])
        if shard is not None:  # another item holds a shard's key: refused for good, nothing was written
            raise ConditionFailedError(foreign_shard_message(model, key, shard, saved=saved), sent.error,
                                       model=model, key=key, cancellation_reasons=reasons)
        # a straggling write moved a shard being folded since it was read (or the parent is gone): read again
    raise TransactionError(f"{model.__name__} {key!r} kept changing through {max_attempts} attempts to reshard it; "
                           f"nothing was written, run it again")


def reshape_requests(model: Type[Model], key: ParentKey, items: ShardItems, counters: Dict[str, CounterField],
                     wanted: Dict[str, int], layout: int) -> List[Dict[str, Any]]:
    """The transaction that reshapes one parent's shard items to ``layout`` slots, each counter to its ``wanted``
    number of shards, or ``[]`` when they are in shape: it creates the missing shard items, moves every count held
    by a shard beyond its counter's number into the parent item (with ``ADD``, which commutes with live writes),
    deletes the shard items no counter needs any more, and records the number on the parent. Every shard item it
    creates is conditioned on its key holding nothing or a shard item (never another item stored there), every
    one it empties on being the shard item read in ``items``, with the same counted-write sequence."""
    requests: List[Dict[str, Any]] = []
    moved = {name: 0 for name in counters}
    latest = _latest_marks(items)
    for shard, item in enumerate(items[1:], start=1):
        if shard >= layout:  # no counter uses it any more: fold all of it into the parent, delete it
            if item is not None:
                for name, counter in counters.items():
                    moved[name] += whole_count(item, counter, key) or 0
                requests.append({"Delete": shard_request(model, key, shard, condition=shard_unchanged(item))})
            continue
        if item is None:  # created as a parent's save creates it in a transaction: never over another item
            created = ShardItem(model, key, shard, create=True, marks=latest)
            requests.append({created.verb: created.request("")})
            continue
        actions: List[Action] = []
        for name, counter in counters.items():
            value = whole_count(item, counter, key) or 0
            if shard >= wanted[name] and value:
                moved[name] += value
                actions.append(counter.add(-value))
        actions.extend(Path([name]).set(mark) for name, mark in _behind(item, latest))
        if actions:
            requests.append({"Update": shard_request(model, key, shard, condition=shard_unchanged(item),
                                                     actions=actions + [SEQUENCE.add(1)])})
    parent_actions: List[Action] = [counters[name].add(value) for name, value in moved.items() if value]
    condition = parent_condition(model)  # adding moved counts commutes with live writes: no sequence needed
    for name, mark in _behind(items[0], latest):  # a mark is set only where it is still the one read
        parent_actions.append(Path([name]).set(mark))
        stored = _mark(items[0], name)
        condition &= Path([name]).does_not_exist() if stored is None else Path([name]) == stored
    if parent_actions:
        parent_actions.append(SEQUENCE.add(1))
    if (count_of(items[0], SHARD_COUNT.attr_name) or 1) != layout:
        parent_actions.append(SHARD_COUNT.set(layout))
    if not requests and not parent_actions:
        return []
    if parent_actions:
        requests.append({"Update": shard_request(model, key, 0, condition=condition, actions=parent_actions)})
    else:
        requests.append({"ConditionCheck": shard_request(model, key, 0, condition=condition)})
    return requests


def _latest_marks(items: ShardItems) -> Dict[str, str]:
    """The latest stream mark of each relation on any of a parent's items (``_cstream:<feeder entry>``). The
    handler counts a partition's records in order, and is caught up while a counter is resharded: every record up
    to it was counted, whichever item it went to. So every item of the new layout starts from it."""
    latest: Dict[str, str] = {}
    for item in items:
        for name, value in (item or {}).items():
            mark = value.get("S") if name.startswith(MARKS) and isinstance(value, dict) else None
            if isinstance(mark, str) and mark > latest.get(name, ""):
                latest[name] = mark
    return latest


def _behind(item: Optional[Dict[str, Any]], latest: Mapping[str, str]) -> List[Tuple[str, str]]:
    """The marks in ``latest`` that ``item`` does not hold, by name, with the latest."""
    return [(name, mark) for name, mark in sorted(latest.items()) if _mark(item, name) != mark]


def _mark(item: Optional[Dict[str, Any]], name: str) -> Optional[str]:
    value = ((item or {}).get(name) or {}).get("S")
    return value if isinstance(value, str) else None


MARKS = f"{STREAM_MARK}:"
"""What starts the name of every stream mark (``declare._stored_names.stream_mark_name``)."""
