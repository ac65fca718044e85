"""
The conditions every write of the library builds on (counted writes, repairs, reshards), pure, no I/O: a
parent's existence and class, a counter's limit, the counted-write sequence, a shard item still as read, the fold
of shards a parent still records.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple, Type

from pynamodb.expressions.condition import Condition

from .._keys import discriminator_of, key_attributes, key_request
from ..declare._attributes import CounterField
from ..declare._shards import shard_key
from ..declare._spec import shard_count
from ..declare._stored_names import SEQUENCE, SHARD, SHARD_COUNT
from ..exceptions import InvalidTransactionError
from ._items import count_of

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.models import Model

__all__ = ["created_parent_condition", "discriminator_condition", "parent_condition", "pending_fold",
           "pending_fold_message", "sequence_is", "sequence_unchanged", "shard_request", "shard_unchanged",
           "within_limit"]

def shard_request(model: Type[Model], key: Tuple[Any, ...], shard: int, **kwargs: Any) -> Dict[str, Any]:
    """A transaction action's request on shard ``shard`` of the parent ``key`` (the parent item for ``0``)."""
    return key_request(model, shard_key(key, shard), **kwargs)


def parent_condition(model: Type[Model]) -> Condition:
    """The condition that a parent item exists and, in a polymorphic model, holds ``model``."""
    condition: Condition = key_attributes(model)[0].exists()
    discriminator = discriminator_condition(model)
    return condition if discriminator is None else condition & discriminator


def created_parent_condition(model: Type[Model]) -> Optional[Condition]:
    """What a parent created by its first count (a rollup) is guarded by: nothing in a model of its own; in a
    single-table (polymorphic) model, that the item is absent or holds ``model``, never another class's item."""
    attribute = discriminator_of(model)
    discriminator = discriminator_condition(model)
    if attribute is None or discriminator is None:
        return None
    absent: Condition = attribute.does_not_exist()
    guard: Condition = absent | discriminator
    return guard


def discriminator_condition(model: Type[Model]) -> Optional[Condition]:
    """In a single-table (polymorphic) model, the condition that an item holds ``model`` or a subclass."""
    attribute = discriminator_of(model)
    classes = attribute.get_registered_subclasses(model) if attribute is not None else []
    return attribute.is_in(*classes) if attribute is not None and classes else None


def within_limit(counter: CounterField, delta: int) -> Condition:
    """The condition that adding ``delta`` (at least 1) keeps ``counter`` within its limit, as stored: for a whole
    number limit ``L``, the counter holds at most ``L - delta``; for a limit held by the parent's attribute ``A``,
    the counter is below ``A`` (a parent without ``A`` has no limit). A condition cannot add, so a per-item limit
    takes one increment per transaction.

    :raises InvalidTransactionError: ``delta`` above 1 on a counter whose limit is an attribute.
    """
    limit = counter.limit
    if isinstance(limit, int):
        room: Condition = counter <= limit - delta
        return counter.does_not_exist() | room if limit >= delta else room
    assert limit is not None
    if delta > 1:
        raise InvalidTransactionError(
            f"{counter!r} has a limit held by {limit.attr_name}: one transaction may add at most 1 to it (a DynamoDB "
            f"condition compares, it cannot add), and this one adds {delta}. Send the children in separate "
            f"transactions (bulk writes do). Nothing was sent")
    below: Condition = limit.does_not_exist() | (counter < limit) | (counter.does_not_exist() & (limit >= 1))
    return below


def sequence_unchanged(item: Optional[Dict[str, Any]]) -> Condition:
    """The condition that an item's counted-write sequence still holds what ``item`` (as read) holds."""
    return sequence_is(count_of(item, SEQUENCE.attr_name))


def shard_unchanged(item: Optional[Dict[str, Any]]) -> Condition:
    """The condition that a shard item is still the one read as ``item``: a shard item (never another item stored
    at its key since), with the same counted-write sequence."""
    condition: Condition = SHARD.exists() & sequence_unchanged(item)
    return condition


def sequence_is(sequence: Optional[int]) -> Condition:
    """The condition that an item's counted-write sequence holds ``sequence`` (``None``: it has none)."""
    condition: Condition = SEQUENCE.does_not_exist() if sequence is None else SEQUENCE == sequence
    return condition


def pending_fold(model: Type[Model]) -> Condition:
    """The condition on deleting a parent: it records no more shards than ``model`` declares, so that deleting its
    declared shard items with it leaves none behind."""
    condition: Condition = SHARD_COUNT.does_not_exist() | (SHARD_COUNT <= shard_count(model))
    return condition


def pending_fold_message(where: str, recorded: Any, declared: int) -> str:
    """Why a parent that still records more shards than its model declares cannot be deleted yet."""
    return (f"{where} has {recorded} shards recorded, more than its counters now declare ({declared}): fold them "
            f"in with pynamodb_counters.resharding.reshard() before deleting it, or its extra shard items would be "
            f"left behind; nothing was written")
