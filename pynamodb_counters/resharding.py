"""
Creating a parent's shard items, and changing how many shards a counter has without losing a count.

::

    reshard(Post.like_tally, 16)                  # before deploying CounterField(shards=16): create the shards
    reshard(Post.like_tally, 1)                   # after deploying CounterField(): fold shards back into the parent

For each parent, one strongly consistent BatchGetItem of its shard items, then one TransactWriteItems that
creates the missing shard items, moves every count held by a shard beyond the new number into shard 0 (the
parent item), deletes shard items no counter of the model needs any more, and records the number of shards on
the parent. Every shard item it empties is conditioned on the counted-write sequence read, so a write that lands
on it meanwhile cancels the transaction and the parent is read and tried again; the parent item takes the moved
counts with ``ADD``, which commutes with live likes, so a busy parent never has to hold still. No count is lost
or doubled, and the total never changes (a BatchGetItem of the total racing the fold may see it half done: the
items are read one by one). See :doc:`sharding` for the order of steps around a deploy.
"""
from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Type

from .attributes import SEQUENCE, CounterField
from .connection import send
from .exceptions import ConfigurationError, TransactionError
from .relations import ParentKey, counters_of, feeders_of
from .retries import DEFAULT_RETRY_POLICY
from .shards import MAX_SHARDS, SHARD, SHARD_COUNT, check_shardable, sequence_unchanged
from .totals import ShardItems, count_of, parent_keys, read_shards, whole_count
from .transactions import parent_condition, shard_request

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.expressions.update import Action
    from pynamodb.models import Model

__all__ = ["create_shards", "reshard"]


def reshard(counter: CounterField, shards: int, *, parents: Optional[Iterable[Any]] = None,
            key_prefix: Optional[str] = None, max_attempts: int = 5) -> int:
    """Give ``counter`` ``shards`` shards on each parent, keeping every count.

    Growing creates the shard items (run it before deploying the larger ``shards=``, and once more after, for
    parents created in between). Shrinking moves the counts of the dropped shards into the parent item (run it
    after deploying the smaller ``shards=``; until then, reads of the total still find the dropped shards). Running
    it again changes nothing.

    :param parents: parent instances or keys; by default every parent, found with a Scan of the parent's table
      (filtered as an audit's is, see :func:`pynamodb_counters.reconcile.audit`).
    :param key_prefix: with a Scan, only parents whose hash key starts with it.
    :param max_attempts: how often one parent is read and tried again while live writes move it.
    :returns: how many parents were rewritten.
    :raises ConfigurationError: ``shards`` out of range, or a parent model whose hash key is not a string.
    :raises TransactionError: a parent kept changing through ``max_attempts`` attempts (run it again).
    :raises CorruptCounterError: a shard item holds a count that is not a whole number (repair it first, with
      :func:`~pynamodb_counters.reconcile.repair`); nothing is written for that parent.
    """
    if not isinstance(counter, CounterField) or counter.model is None or counter.name is None:
        raise ConfigurationError(f"reshard() needs a CounterField such as Post.like_tally, not {counter!r}")
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
        raise ConfigurationError(f"reshard({counter!r}, {shards!r}): shards is a whole number from 1 to {MAX_SHARDS}")
    model = counter.model
    if shards > 1:
        check_shardable(model, f"reshard({counter!r}, {shards})")
    if parents is not None:
        keys: Iterable[ParentKey] = parent_keys(model, parents, f"reshard({counter!r}, parents=...)")
    else:
        from .reconcile import scan_parents

        keys = (key for key, _ in scan_parents(model, feeders_of(counter), key_prefix))
    targets = {counter.name: shards}
    return sum(_reshape(model, key, targets, max_attempts) for key in keys)


def create_shards(model: Type[Model], parents: Iterable[Any], *, max_attempts: int = 5) -> int:
    """Bring each parent's shard items in line with ``model``'s declared counters: create the missing ones (and
    fold any a smaller ``shards=`` no longer uses into the parent). A parent's ``save()`` calls it the first time;
    it is idempotent.

    :returns: how many parents were rewritten.
    """
    keys = parent_keys(model, parents, f"create_shards({model.__name__}, parents=...)")
    return sum(_reshape(model, key, {}, max_attempts) for key in keys)


def _reshape(model: Type[Model], key: ParentKey, targets: Dict[str, int], max_attempts: int) -> bool:
    """One parent: read its shard items, write the one transaction that reshapes them; again if it moved."""
    counters = counters_of(model)
    wanted = {name: targets.get(name, counter.shards) for name, counter in counters.items()}
    layout = max(wanted.values(), default=1)
    for attempt in range(1, max_attempts + 1):
        if attempt > 1:
            DEFAULT_RETRY_POLICY.sleep(DEFAULT_RETRY_POLICY.delay(attempt - 1))
        items = read_shards(model, [key], layout, consistent_read=True)[key]
        if not items[0]:
            raise model.DoesNotExist(f"{model.__name__} {key!r} does not exist; nothing was written")
        requests = _plan(model, key, items, counters, wanted, layout)
        if not requests:
            return False
        sent = send(model, requests, str(uuid.uuid4()))
        if sent.response is not None:
            return True
        # a straggling write moved a shard being folded since it was read (or the parent is gone): read again
    raise TransactionError(f"{model.__name__} {key!r} kept changing through {max_attempts} attempts to reshard it; "
                           f"nothing was written, run it again")


def _plan(model: Type[Model], key: ParentKey, items: ShardItems, counters: Dict[str, CounterField],
          wanted: Dict[str, int], layout: int) -> List[Dict[str, Any]]:
    """Pure: the transaction that reshapes one parent's shard items, or ``[]`` when they are in shape."""
    requests: List[Dict[str, Any]] = []
    moved = {name: 0 for name in counters}
    for shard, item in enumerate(items[1:], start=1):
        if shard >= layout:  # no counter uses it any more: fold all of it into the parent, delete it
            if item is not None:
                for name, counter in counters.items():
                    moved[name] += whole_count(item, counter, key) or 0
                requests.append({"Delete": shard_request(model, key, shard, condition=sequence_unchanged(item))})
            continue
        if item is None:
            requests.append({"Update": shard_request(model, key, shard, actions=[SHARD.set(shard)])})
            continue
        actions: List[Action] = []
        for name, counter in counters.items():
            value = whole_count(item, counter, key) or 0
            if shard >= wanted[name] and value:
                moved[name] += value
                actions.append(counter.add(-value))
        if actions:
            requests.append({"Update": shard_request(model, key, shard, condition=sequence_unchanged(item),
                                                actions=actions + [SEQUENCE.add(1)])})
    parent_actions: List[Action] = [counters[name].add(value) for name, value in moved.items() if value]
    if parent_actions:
        parent_actions.append(SEQUENCE.add(1))
    if (count_of(items[0], SHARD_COUNT.attr_name) or 1) != layout:
        parent_actions.append(SHARD_COUNT.set(layout))
    if not requests and not parent_actions:
        return []
    condition = parent_condition(model)  # adding moved counts commutes with live writes: no sequence needed
    if parent_actions:
        requests.append({"Update": shard_request(model, key, 0, condition=condition, actions=parent_actions)})
    else:
        requests.append({"ConditionCheck": shard_request(model, key, 0, condition=condition)})
    return requests
