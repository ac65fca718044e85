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

A shard key may already hold another item (a parent whose own hash key is ``<pk>#SHARD<k>``): the library never
writes, deletes or counts an item at a shard key that lacks ``_cshard``. Every request that creates or deletes a
shard item is conditioned on :func:`shard_or_absent`, and a refusal on such an item is explained by
:func:`foreign_shard_message`.
"""
from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any, Dict, Optional, Sequence, Tuple, Type

from pynamodb.constants import STRING

from .._keys import key_attributes, key_of, serialize_key
from ..exceptions import ConfigurationError
from ._stored_names import SHARD

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.attributes import Attribute
    from pynamodb.expressions.condition import Condition
    from pynamodb.models import Model


__all__ = ["check_shardable", "choose_shard", "foreign_shard", "foreign_shard_message", "is_shard_item",
           "not_a_shard", "shard_item_message", "shard_key", "shard_or_absent"]

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


def is_shard_item(item: Optional[Dict[str, Any]]) -> bool:
    """Whether a raw item is a shard item (it carries ``_cshard``), as the library created it."""
    return item is not None and SHARD.attr_name in item


def shard_or_absent(model: Type[Model]) -> Condition:
    """The condition on every request that creates or deletes a shard item of ``model``: the key holds nothing, or
    a shard item. Another item stored at that key (no ``_cshard``) refuses it."""
    condition: Condition = key_attributes(model)[0].does_not_exist() | SHARD.exists()
    return condition


def foreign_shard(model: Type[Model], key: Tuple[Any, ...], items: Sequence[Optional[Dict[str, Any]]]
                  ) -> Optional[int]:
    """The shard of the parent ``key`` whose key holds another item, among ``items`` (raw items a refusal
    returned, ``None`` where it returned none), or ``None``. The parent item itself is never one: it is not at a
    shard key."""
    name = key_attributes(model)[0].attr_name
    prefix = f"{key[0]}{_SEPARATOR}"
    for item in items:
        if not item or is_shard_item(item):
            continue
        hash_key = next(iter(item.get(name, {}).values()), "")
        if isinstance(hash_key, str) and hash_key.startswith(prefix) and hash_key[len(prefix):].isdigit():
            return int(hash_key[len(prefix):])
    return None


def foreign_shard_message(model: Type[Model], key: Tuple[Any, ...], shard: int, *, saved: bool = False) -> str:
    """Why a write on shard ``shard`` of the parent ``key`` was refused: another item holds that shard's key.

    :param saved: the refusal follows the parent's ``save()``, whose ``UpdateItem`` has written the parent item.
    """
    where = f"{model.__name__} {key!r}"
    collision = (f"its shard {shard} is the item {shard_key(key, shard)!r}, which holds another item, not a shard "
                 f"item (it has no {SHARD.attr_name}): the parent's hash key plus '{_SEPARATOR}{shard}' is that "
                 f"item's own key, and the library never writes, deletes or counts an item it did not create. Choose "
                 f"parent keys that cannot end in '{_SEPARATOR}<k>', or move that item")
    if not saved:
        return f"{where}: {collision}; nothing was written"
    return (f"{where} itself was saved (its UpdateItem is written), but its shard items were not created: "
            f"{collision}. None of its shard items was written, and until they are, its children counted on shards "
            f"other than 0 are refused: save it again, or run reshard(), once the key is free")


def shard_item_message(model: Type[Model], key: Tuple[Any, ...]) -> str:
    """Why a parent's own save or delete was refused: its key is a shard item of another parent."""
    return (f"{model.__name__} {key!r} is a shard item of another {model.__name__} (its key is that parent's hash "
            f"key plus '{_SEPARATOR}<k>', and it holds {SHARD.attr_name}): saving or deleting a parent there would "
            f"overwrite or delete the counts it holds, and the library never writes over an item it created for "
            f"another parent. Choose parent keys that cannot end in '{_SEPARATOR}<k>'. Nothing was written")
