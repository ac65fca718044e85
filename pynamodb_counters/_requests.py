"""
The requests of counted writes, pure, no I/O: the conditions and actions that guard children and parents, the
guards that refuse a write bypassing counting, and the whole requests of repairs and reshards.

Everything that writes (the planner, repairs, reshards) builds its conditions here; ``_planner`` assembles
them into a transaction.
"""
from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any, Dict, FrozenSet, List, Optional, Sequence, Tuple, Type

from pynamodb.constants import ALL_OLD, KEY
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.operand import Path

from ._base import SEQUENCE, SHARD, SHARD_COUNT, CountedBase
from ._compat import ParentKey, discriminator_of, key_attributes, serialize_key
from ._context import counting_skipped
from ._items import ShardItems, count_of, counter_shards, stored_of, whole_count
from ._plans import ItemId
from ._shards import shard_key, shard_or_absent
from ._spec import counters_of, relations_of, shard_count
from .attributes import CounterField, loaded_counters
from .exceptions import CountingBypassError, InvalidArgumentError, InvalidTransactionError

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.expressions.update import Action
    from pynamodb.models import Model

__all__ = ["action_paths", "bypass_of", "check_condition", "check_counters_unchanged", "created_parent_condition",
           "check_child_key", "deciding", "discriminator_condition", "guard_update", "item_id", "key_request",
           "parent_condition", "parent_save_actions", "pending_fold", "pending_fold_message", "pynamodb_view",
           "reshape_requests", "sequence_is", "sequence_unchanged", "serialized_key_request", "shard_request",
           "shard_unchanged", "total_requests", "within_limit"]


def item_id(model: Type[Model], key: Tuple[Any, ...]) -> ItemId:
    """The identity of an item within a transaction: its table and serialized key."""
    hash_key, range_key = serialize_key(model, key)
    return (model.Meta.table_name, hash_key, range_key)


def key_request(model: Type[Model], key: Tuple[Any, ...], **kwargs: Any) -> Dict[str, Any]:
    """A transaction action's request on the item ``key`` of ``model``, built by its PynamoDB connection."""
    hash_key, range_key = serialize_key(model, key)
    return serialized_key_request(model, hash_key, range_key, **kwargs)


def serialized_key_request(model: Type[Model], hash_key: Any, range_key: Any, **kwargs: Any) -> Dict[str, Any]:
    """:func:`key_request` of a key already serialized; a refusal returns the item (``ALL_OLD``)."""
    request: Dict[str, Any] = model._get_connection().get_operation_kwargs(
        hash_key, range_key=range_key, key=KEY, return_values_on_condition_failure=ALL_OLD, **kwargs)
    return request


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


def deciding(model: Type[Model], *states: Model) -> List[str]:
    """The non-key attributes that decide a counted child's parents, in any of ``states``."""
    keys = {model._hash_keyname, model._range_keyname}
    names = {name for state in states for relation in relations_of(model) for name in relation.read_attributes(state)}
    return sorted(names - keys)


def parent_save_actions(instance: Model) -> List[Action]:
    """The Update actions that save a parent without touching its counters: SET (or REMOVE, for ``None``) every
    other non-key attribute, and start each counter at ``0`` only where it does not exist yet."""
    instance.serialize(null_check=True)  # the same null checks as PynamoDB's save()
    model = type(instance)
    counters = counters_of(model)
    skip = {model._hash_keyname, model._range_keyname, model._version_attribute_name}
    actions: List[Action] = []
    for name, attribute in model.get_attributes().items():
        if name in skip:
            continue
        if name in counters:
            actions.append(attribute.set(attribute | 0))
            continue
        value = getattr(instance, name)
        actions.append(attribute.remove() if value is None else attribute.set(value))
    return actions


def guard_update(instance: Model, actions: Sequence[Action], *, counted: bool = False) -> FrozenSet[str]:
    """Refuse ``update()`` actions that would bypass counting: on counters, on a counted child's key attributes,
    and, unless the update is ``counted`` (its counts moved in the same transaction), on the attributes its
    relations read.

    :returns: the attributes (Python names) its relations read that the actions touch.
    :raises CountingBypassError: naming the attribute and the way around it.
    """
    model = type(instance)
    if counting_skipped(model):
        return frozenset()
    attributes = model.get_attributes()
    protected: Dict[str, str] = {attributes[name].attr_name: f"{model.__name__}.{name} is a counter"
                                 for name in counters_of(model)}
    decides: Dict[str, str] = {}
    relations = relations_of(model)
    if relations:
        for name in filter(None, (model._hash_keyname, model._range_keyname)):
            protected[attributes[name].attr_name] = f"{model.__name__}.{name} is part of a counted child's key"
        for relation in relations:
            for name in relation.read_attributes(instance):
                decides.setdefault(attributes[name].attr_name, name)
    touched = set()
    for path in action_paths(actions):
        if path in protected:
            raise CountingBypassError(f"{protected[path]}: update() cannot change it without bypassing counting. "
                                      f"Use set_counter() to repair a counter, or wrap a deliberate migration in "
                                      f"skip_counting()")
        if path in decides:
            if not counted:
                raise bypass_of(model, decides[path])
            touched.add(decides[path])
    return frozenset(touched)


def bypass_of(model: Type[Model], name: str) -> CountingBypassError:
    """The refusal of an ``update()`` action on ``name``, an attribute that decides what a counted child counts
    for, where its counts cannot move with it."""
    return CountingBypassError(
        f"{model.__name__}.{name} decides what the child counts for: update() cannot change it here without "
        f"bypassing counting. Load the child, change the attribute and save() it (one transaction that moves its "
        f"counts with it), set it to a plain value with update() (SET to a value or REMOVE: the library knows the "
        f"result and moves the counts), or wrap a deliberate migration in skip_counting()")


def action_paths(actions: Sequence[Action]) -> List[str]:
    """The top-level attribute names (as stored) that ``actions`` write, in order."""
    paths = []
    for action in actions:
        for value in action.values:
            path = getattr(value, "path", None)
            if path and isinstance(value, Path):
                paths.append(path[0].split("[")[0])
                break
    return paths


def check_child_key(instance: Model) -> None:
    """Refuse a counted child whose own key is incomplete: it is written, and found again, by its key.

    :raises InvalidArgumentError: naming the key attribute that holds ``None``.
    """
    model = type(instance)
    for name in (model._hash_keyname, model._range_keyname):
        if name and getattr(instance, name) is None:
            raise InvalidArgumentError(f"{model.__name__}.{name}, part of its key, is None: a counted child is "
                                       f"written and counted by its key, so set it first. Nothing was written")


def check_condition(condition: Any) -> None:
    """Refuse a ``condition`` that is not a PynamoDB condition (``None`` is no condition).

    :raises TypeError: naming what a condition looks like.
    """
    if condition is not None and not isinstance(condition, Condition):
        raise InvalidArgumentError(f"condition must be a PynamoDB condition such as Like.liked_at.exists(), not "
                        f"{condition!r}")


def pynamodb_view(instance: Model) -> Any:
    """``instance`` as PynamoDB sees it, past :class:`~pynamodb_counters.CounterMixin`: the mixin refuses its
    request helpers to other callers (PynamoDB's ``TransactWrite``), which would bypass counting."""
    return super(CountedBase, instance) if isinstance(instance, CountedBase) else instance


def check_counters_unchanged(instance: Any) -> None:
    """Refuse to save an instance whose counters were set by hand.

    :raises CountingBypassError: a counter differs from the value last loaded into this instance (or from
      ``0`` on a new instance).
    """
    counters = counters_of(type(instance))
    if not counters:
        return
    loaded = loaded_counters(instance)
    for name in counters:
        value = instance.attribute_values.get(name)
        if value is not None and value != loaded.get(name, 0):
            raise CountingBypassError(
                f"{type(instance).__name__}.{name} was set by hand to {value!r}; counters change only through "
                f"counted writes. Use pynamodb_counters.set_counter() to repair one, or skip_counting() for a "
                f"migration. Nothing was written"
            )


def total_requests(counter: CounterField, key: ParentKey, items: ShardItems, value: int) -> List[Dict[str, Any]]:
    """The transaction that makes a sharded counter's total ``value``: the parent item's share set to ``value``
    minus the other shards' counts as read in ``items``, conditioned on the counted-write sequence of every shard
    item that holds or may receive the counter's counts (and on absent shards staying absent). A shard holding a
    number that is not whole is set to ``0`` in the same transaction."""
    model = counter.model
    assert model is not None
    requests: List[Dict[str, Any]] = []
    others = 0
    for shard, item in counter_shards(counter, items)[1:]:
        count = stored_of(item, counter.attr_name)
        condition = SHARD.does_not_exist() if item is None else shard_unchanged(item)
        if isinstance(count, Decimal):  # not a whole number (written by hand): this shard starts again at 0
            requests.append({"Update": shard_request(model, key, shard, condition=condition,
                                                     actions=[counter.set(0), SEQUENCE.add(1)])})
            continue
        others += count or 0
        requests.append({"ConditionCheck": shard_request(model, key, shard, condition=condition)})
    condition = parent_condition(model) & sequence_unchanged(items[0])
    requests.append({"Update": shard_request(model, key, 0, condition=condition,
                                             actions=[counter.set(value - others), SEQUENCE.add(1)])})
    return requests


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
    for shard, item in enumerate(items[1:], start=1):
        if shard >= layout:  # no counter uses it any more: fold all of it into the parent, delete it
            if item is not None:
                for name, counter in counters.items():
                    moved[name] += whole_count(item, counter, key) or 0
                requests.append({"Delete": shard_request(model, key, shard, condition=shard_unchanged(item))})
            continue
        if item is None:
            requests.append({"Update": shard_request(model, key, shard, condition=shard_or_absent(model),
                                                     actions=[SHARD.set(shard)])})
            continue
        actions: List[Action] = []
        for name, counter in counters.items():
            value = whole_count(item, counter, key) or 0
            if shard >= wanted[name] and value:
                moved[name] += value
                actions.append(counter.add(-value))
        if actions:
            requests.append({"Update": shard_request(model, key, shard, condition=shard_unchanged(item),
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
