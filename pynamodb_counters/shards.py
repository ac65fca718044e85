"""
The layout of sharded counters: which items hold a counter's shards, and which shard takes a child.

Pure, no I/O. A counter declared ``CounterField(shards=16)`` is spread over 16 items of the parent's table:

* shard 0 is the parent item itself (so an unsharded counter is the one-shard case, and switching to shards
  moves no count);
* shard ``k >= 1`` is an item whose hash key is the parent's hash key plus ``#SHARD<k>`` and whose range key (if
  the model has one) is the parent's: a different partition key, so a different partition. It carries
  :data:`SHARD` (its index), the counter and its own counted-write sequence, nothing else;
* a child always lands on shard ``crc32(child's key) % shards``, so its later delete decrements the shard its
  save incremented.

A parent's shard items exist before any child is counted on them: the parent's ``save()`` creates them (the
parent item records how many in :data:`SHARD_COUNT`), as does :func:`pynamodb_counters.resharding.reshard` for
parents stored before the counter was sharded.
"""
from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple, Type

from pynamodb.attributes import Attribute, NumberAttribute
from pynamodb.constants import STRING

from .attributes import counters_of
from .compat import key_attributes, key_of, serialize_key
from .exceptions import ConfigurationError

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.expressions.condition import Condition
    from pynamodb.models import Model


__all__ = ["MAX_SHARDS", "SHARD", "SHARD_COUNT", "check_shardable", "choose_shard", "not_a_shard",
           "sequence_unchanged", "shard_count", "shard_key"]

MAX_SHARDS = 100
"""The most shards a counter may have: one BatchGetItem (at most 100 keys) reads them all, and one transaction
(at most 100 actions) creates them with their parent."""

SHARD: Attribute[float] = NumberAttribute(attr_name="_cshard")
"""Marks a shard item and holds its index (``1`` and up). Scans of a parent model's table skip these items with
:func:`not_a_shard`."""

SHARD_COUNT: Attribute[float] = NumberAttribute(attr_name="_cshards")
"""On a parent item: how many shards (the parent included) have been created for it."""

_SEPARATOR = "#SHARD"


def shard_count(model: Type[Model]) -> int:
    """How many shard slots ``model``'s items need: the largest ``shards`` of its counters (``1`` when none is
    sharded)."""
    return max((counter.shards for counter in counters_of(model).values()), default=1)


def check_shardable(model: Type[Model], where: object) -> None:
    """Refuse a sharded counter on a model whose hash key cannot carry a shard suffix.

    :raises ConfigurationError: the hash key is not a string attribute.
    """
    hash_key = key_attributes(model)[0]
    if hash_key.attr_type != STRING:
        raise ConfigurationError(f"{where}: a sharded counter needs a string hash key, to build its shard items' "
                                 f"keys ({model.__name__}.{hash_key.attr_name} is a {type(hash_key).__name__})")


def shard_key(key: Tuple[Any, ...], shard: int) -> Tuple[Any, ...]:
    """The key of shard ``shard`` of the parent ``key``: the key itself for shard 0."""
    if shard == 0:
        return key
    return (f"{key[0]}{_SEPARATOR}{shard}",) + tuple(key[1:])


def choose_shard(child: Model, shards: int) -> int:
    """The shard that counts ``child``: ``crc32`` of its serialized key, modulo ``shards``. Stable across
    processes and Python versions (unlike ``hash()``), so a child's delete finds the shard its save used."""
    if shards == 1:
        return 0
    parts = [part if isinstance(part, (bytes, bytearray)) else str(part).encode()
             for part in serialize_key(type(child), key_of(child)) if part is not None]
    return zlib.crc32(b"\x1f".join(parts)) % shards


def pending_fold(model: Type[Model], recorded: int) -> Condition:
    """The condition on deleting a parent: it records no more shards than ``model`` declares, so that deleting its
    declared shard items with it leaves none behind (``recorded`` is what ``model`` declares)."""
    condition: Condition = SHARD_COUNT.does_not_exist() | (SHARD_COUNT <= recorded)
    return condition


def pending_fold_message(where: str, recorded: Any, declared: int) -> str:
    """Why a parent that still records more shards than its model declares cannot be deleted yet."""
    return (f"{where} has {recorded} shards recorded, more than its counters now declare ({declared}): fold them "
            f"in with pynamodb_counters.resharding.reshard() before deleting it, or its extra shard items would be "
            f"left behind; nothing was written")


def sequence_unchanged(item: Optional[Dict[str, Any]]) -> Condition:
    """The condition that an item's counted-write sequence still holds what ``item`` (as read) holds."""
    from .attributes import SEQUENCE

    raw = ((item or {}).get(SEQUENCE.attr_name) or {}).get("N")
    return SEQUENCE.does_not_exist() if raw is None else SEQUENCE == int(raw)


def not_a_shard() -> Condition:
    """The condition an item of a parent's table meets when it is not a shard item.

    For your own Scans::

        Post.scan(filter_condition=not_a_shard())
    """
    return SHARD.does_not_exist()
