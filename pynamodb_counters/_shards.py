"""
The layout of sharded counters (a declaration): which items hold a counter's shards, and which shard takes a child.

Pure, no I/O. A counter declared ``CounterField(shards=16)`` is spread over 16 items of the parent's table:

* shard 0 is the parent item itself (so an unsharded counter is the one-shard case, and switching to shards
  moves no count);
* shard ``k >= 1`` is an item whose hash key is the parent's hash key plus ``#SHARD<k>`` and whose range key (if
  the model has one) is the parent's: a different partition key, so a different partition. It carries
  ``SHARD`` (its index), the counter and its own counted-write sequence, nothing else;
* a child always lands on shard ``crc32(child's key) % shards``, so its later delete decrements the shard its
  save incremented.

A parent's shard items exist before any child is counted on them: the parent's ``save()`` creates them (the
parent item records how many in ``_cshards``), as does :func:`pynamodb_counters.reshard` for
parents stored before the counter was sharded.
"""
from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any, Optional, Tuple, Type

from pynamodb.constants import STRING

from ._base import SHARD
from ._compat import key_attributes, key_of, serialize_key
from .exceptions import ConfigurationError

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.attributes import Attribute
    from pynamodb.expressions.condition import Condition
    from pynamodb.models import Model


__all__ = ["check_shardable", "choose_shard", "not_a_shard", "shard_key"]

_SEPARATOR = "#SHARD"


def check_shardable(model: Type[Model], where: object, hash_key: Optional[Attribute[Any]] = None) -> None:
    """Refuse a sharded counter on a model whose hash key cannot carry a shard suffix.

    :param hash_key: the model's hash key attribute, for a model whose class is still being built (PynamoDB does
      not know its keys yet); by default, the model's own.
    :raises ConfigurationError: the hash key is not a string attribute.
    """
    if hash_key is None:
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


def not_a_shard() -> Condition:
    """The condition an item of a parent's table meets when it is not a shard item.

    For your own Scans::

        Post.scan(filter_condition=not_a_shard())
    """
    return SHARD.does_not_exist()
