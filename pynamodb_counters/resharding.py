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

from typing import Any, Iterable, Optional

from ._keys import ParentKey
from .declare._attributes import CounterField
from .declare._counted import MAX_SHARDS
from .declare._shards import check_shardable
from .declare._spec import feeders_of
from .exceptions import InvalidArgumentError
from .write._fetches import parent_keys, scan_parents
from .write._shard_items import reshape

__all__ = ["reshard"]


def reshard(counter: CounterField, shards: int, *, parents: Optional[Iterable[Any]] = None,
            key_prefix: Optional[str] = None, max_attempts: int = 5) -> int:
    """Give ``counter`` ``shards`` shards on each parent, keeping every count.

    Growing creates the shard items (run it before deploying the larger ``shards=``, and once more after, for
    parents created in between). Shrinking moves the counts of the dropped shards into the parent item (run it
    after deploying the smaller ``shards=``; until then, reads of the total still find the dropped shards). Running
    it again changes nothing.

    :param parents: parent instances or keys; by default every parent, found with a Scan of the parent's table
      (filtered as an audit's is, see :func:`pynamodb_counters.audit`).
    :param key_prefix: with a Scan, only parents whose hash key starts with it.
    :param max_attempts: how often one parent is read and tried again while live writes move it.
    :returns: how many parents were rewritten.
    :raises InvalidArgumentError: ``counter`` is not a counter, or ``shards`` is not a whole number from 1 to
      :data:`~pynamodb_counters.MAX_SHARDS`.
    :raises ConfigurationError: a parent model whose hash key is not a string.
    :raises TransactionError: a parent kept changing through ``max_attempts`` attempts (run it again).
    :raises ConditionFailedError: a parent's shard key holds another item, not a shard item (a parent whose own
      hash key is ``<pk>#SHARD<k>``); nothing is written for that parent, and that item is never touched.
    :raises CorruptCounterError: a shard item holds a count that is not a whole number (repair it first, with
      :func:`~pynamodb_counters.repair`); nothing is written for that parent.
    """
    if not isinstance(counter, CounterField) or counter.model is None or counter.name is None:
        raise InvalidArgumentError(f"reshard() needs a CounterField such as Post.like_tally, not {counter!r}")
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
        raise InvalidArgumentError(f"reshard({counter!r}, {shards!r}): shards is a whole number from 1 to {MAX_SHARDS}")
    model = counter.model
    if shards > 1:
        check_shardable(model, f"reshard({counter!r}, {shards})")
    if parents is not None:
        keys: Iterable[ParentKey] = parent_keys(model, parents, f"reshard({counter!r}, parents=...)")
    else:
        keys = (key for key, _ in scan_parents(model, feeders_of(counter), key_prefix))
    targets = {counter.name: shards}
    return sum(reshape(model, key, targets, max_attempts) for key in keys)
