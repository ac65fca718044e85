"""
The planner: counted saves and deletes (and any other PynamoDB writes) as one TransactWriteItems. Pure, no I/O.

What a plan guarantees, before anything is sent:

* a counted child's Put carries ``attribute_not_exists`` on its key (and the caller's condition) and the
  write id; its Delete carries ``attribute_exists`` and the condition that the attributes deciding its parents
  hold the values its deltas were computed from;
* every parent item gets exactly one action: the deltas of all its counters, from all children, merged into one
  Update (``ADD a :x, b :y``) guarded by the parent's existence, its discriminator and, for each decrement, a
  floor of zero (lifted while a formerly sharded counter awaits its fold), and adding 1 to the parent's
  counted-write sequence (deltas that net to zero are dropped, the sequence still moves);
* a rollup (``create_parent=True``) is created only by first counts (children that start counting in it), with
  every counter it receives, ``0`` included; any other change needs it stored, and one that counts into it again
  after a delete or edit found it gone needs it still absent; in a table shared without a discriminator, it is
  never an item recorded as fed by another model's relations;
* a caller's ``update()`` or ``condition_check()`` on a parent that receives deltas is merged into that Update;
* a sharded counter's delta goes to the child's shard item (the parent item for shard 0), guarded by that item
  being a shard, with no floor (a shard may dip below zero once its counter is resharded; the total stays
  exact); saving a parent with sharded counters creates its shard items, deleting it deletes them;
* a delete sent again without the decrement of a rollup found gone (expired) carries a ConditionCheck that the
  rollup is still absent;
* no item is named twice, and there are at most 100 actions.
"""
from __future__ import annotations

import operator
from functools import reduce
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple, Type

from pynamodb.constants import ALL_OLD
from pynamodb.expressions.condition import Condition

from ._base import EDITED_BY, FED_BY, SEQUENCE, SHARD, SHARD_COUNT, WRITE_ID, declared
from ._compat import discriminator_of, key_attributes, oversized_key, saved_version, version_condition
from ._context import counting_skipped
from ._deltas import Deltas, deltas
from ._operations import Operation
from ._plans import ItemId, Plan, Slot
from ._requests import (
    created_parent_condition,
    deciding,
    item_id,
    key_request,
    parent_condition,
    pending_fold,
    pynamodb_view,
    serialized_key_request,
    within_limit,
)
from ._shards import not_a_shard, shard_key, shard_or_absent
from ._spec import counters_of, foreign_feeds, relations_of, shard_count, spec_of
from ._stored import Stored, as_loaded
from .exceptions import InvalidArgumentError, InvalidTransactionError, ParentKeyError, TransactionTooLargeError
from .relations import Relation

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.expressions.update import Action
    from pynamodb.models import Model

__all__ = ["COUNTED", "MAX_ACTIONS", "count", "plan", "shard_entries"]

MAX_ACTIONS = 100
"""DynamoDB's limit on actions in one TransactWriteItems."""

_SHAPES_HELD = 256
"""How many shapes of counter Update the planner keeps per parent model (:attr:`ModelSpec.requests`)."""

_Entry = Tuple[ItemId, str, Dict[str, Any], Slot]  # an action of a plan: its item, its kind, its request, its slot


def plan(operations: Sequence[Operation], token: str) -> Plan:
    """Build the TransactWriteItems of ``operations``. Pure: reads the models, sends nothing. Each counted
    child's :attr:`~Operation.deltas` are decided here (:func:`count`).

    :raises TransactionTooLargeError: more than 100 actions.
    :raises InvalidTransactionError: an empty transaction, one item named twice, a child counted on itself.
    :raises ParentKeyError: a relation's key function gave an unusable parent key, one too long for DynamoDB, or
      the key of an item another model's relation counts into in the same transaction.
    :raises InvalidArgumentError: a child's own key is too long for DynamoDB.
    """
    entries: List[_Entry] = []
    parents: Dict[ItemId, Slot] = {}
    feeders: Dict[ItemId, Relation] = {}
    merged: Dict[ItemId, Operation] = {}

    for op in operations:  # first pass: which parent items receive deltas
        if op.kind not in COUNTED:
            continue
        found = count(op)
        for first, pairs in ((False, found.removed), (True, found.added), (False, found.changed)):
            for relation, change in pairs:
                where = item_id(change.parent, shard_key(change.key, change.shard) if change.shard else change.key)
                slot = parents.get(where)
                if slot is None:
                    _check_parent_key(relation, change.key, where)
                    slot = parents[where] = Slot("parent", change.parent, change.key, shard=change.shard)
                    feeders[where] = relation
                elif slot.model is not change.parent:
                    slot.model = _one_model(slot, change.parent, relation, feeders[where])
                slot.deltas[change.attribute] = slot.deltas.get(change.attribute, 0) + change.delta
                slot.fed_by.add(relation.feed)
                slot.rollup = slot.rollup and relation.create_parent
                slot.creates = slot.creates and relation.create_parent and first
                if relation.create_parent and first and change.delta >= 0 and slot.defaults is None:
                    slot.defaults = relation.parent_defaults(_new_state(op))
    for op in operations:  # a rollup found gone that a write counts into again must still be absent
        for model, key in op.gone_parents:
            slot = parents.get(item_id(model, key))
            if slot is not None:
                slot.absent = True

    for op in operations:
        where = item_id(op.model, op.key)
        if where in parents and op.kind in ("update", "check") and not op.parent_save \
                and where not in merged:
            merged[where] = op
            continue
        if where in parents:
            raise InvalidTransactionError(_written_and_counted(op, parents[where]))
        entries.append((where,) + _child_or_other(op, token))
        if op.shards and shard_count(op.model) > 1:
            entries.extend(shard_entries(op.model, op.key, op.shards))

    for where, slot in parents.items():
        action, request = _parent_request(slot, merged.get(where), where)
        entries.append((where, action, request, slot))
    entries.extend(_gone_checks(operations, parents))

    seen = set()
    for where, _, _, slot in entries:
        if where in seen:
            raise InvalidTransactionError(f"{slot.model.__name__} {slot.key} appears twice in one transaction; "
                                           f"DynamoDB allows one action per item")
        seen.add(where)
    if len(entries) > MAX_ACTIONS:
        raise TransactionTooLargeError(f"this transaction has {len(entries)} actions; DynamoDB allows "
                                       f"{MAX_ACTIONS}. Nothing was sent")
    if not entries:
        raise InvalidTransactionError("this transaction is empty")
    return Plan(items=[{action: request} for _, action, request, _ in entries],
                slots=[slot for _, _, _, slot in entries], token=token)


COUNTED = ("counted_put", "counted_edit", "counted_update", "counted_delete")
"""The kinds of :class:`~pynamodb_counters._operations.Operation` that move counters."""


def count(op: Operation) -> Deltas:
    """Decide a counted child's :attr:`~Operation.deltas` (:func:`~pynamodb_counters._deltas.deltas`), from the
    stored child it replaces, as PynamoDB loads it (none for a new child), and the child as PynamoDB will load it
    once written (none for a delete).

    :raises ParentKeyError: a key function gave an unusable parent key.
    :raises ChildValueError: a ``when=`` or ``amount=`` function failed or gave an unusable value.
    """
    assert op.instance is not None
    if op.kind == "counted_delete" and op.basis is None:  # an instance built by hand that names its parents
        op.basis = Stored.of_instance(op.instance)
    before = op.basis.view if op.kind != "counted_put" and op.basis is not None else None
    after = None if op.kind == "counted_delete" else _new_state(op)
    op.deltas = deltas(relations_of(op.model), before, after, op.gone_parents)
    return op.deltas


def _new_state(op: Operation) -> Model:
    """A counted child as PynamoDB will load it once the write lands: a counted update's stored result, or the
    instance (as stored) for a save."""
    if op.after is not None:
        return op.after.view
    assert op.instance is not None
    return as_loaded(op.instance)


def _one_model(slot: Slot, model: Type[Model], relation: Relation, other: Relation) -> Type[Model]:
    """The model of one parent item counted into by two relations: the more derived of the two (a subclass's
    counter and its base's on one item of a single-table model).

    :raises ParentKeyError: the two models are unrelated: the key of one's item names the other's.
    """
    if issubclass(model, slot.model):
        return model
    if issubclass(slot.model, model):
        return slot.model
    raise ParentKeyError(
        f"{relation}: the key function gave {slot.key!r}, the key of the {slot.model.__name__} item that {other} "
        f"counts into in this same write: an item belongs to one model, and {model.__name__}'s counters are "
        f"never added to a {slot.model.__name__}. Give {model.__name__}'s items keys of their own (a prefix "
        f"such as 'DAY#'). Nothing was written")


def _check_parent_key(relation: Relation, key: Tuple[Any, ...], where: ItemId) -> None:
    """Refuse a parent key DynamoDB would refuse as too long.

    :raises ParentKeyError: naming the key's part and DynamoDB's limit.
    """
    wrong = oversized_key(where[1:])
    if wrong is not None:
        raise ParentKeyError(f"{relation}: the key function gave a key of {relation.parent_model.__name__} that "
                             f"DynamoDB cannot store: {wrong} ({str(key)[:80]}...). Nothing was written")


def _written_and_counted(op: Operation, slot: Slot) -> str:
    """Why ``op`` cannot be in a transaction that also counts into its own item."""
    where = f"{op.model.__name__} {op.key}"
    if op.kind in COUNTED and any(item_id(change.parent, change.key) == item_id(op.model, op.key)
                                  for change in op.changes):
        return f"{where} is both written and counted as a parent in this transaction (a child counted on itself)"
    return (f"{where} is both written and counted into as a parent in this transaction, and DynamoDB allows one "
            f"action per item: commit the write and the children counted into it in two transactions")


def _child_or_other(op: Operation, token: str) -> Tuple[str, Dict[str, Any], Slot]:
    instance, model, condition = op.instance, op.model, op.condition
    if op.kind in ("counted_put", "counted_edit", "counted_update", "counted_delete"):
        wrong = oversized_key(item_id(model, op.key)[1:])
        if wrong is not None:
            raise InvalidArgumentError(f"{model.__name__} {str(op.key)[:80]}... cannot be stored by DynamoDB: "
                                       f"{wrong}. Nothing was written")
    if op.kind in ("counted_put", "put"):
        assert instance is not None
        if op.kind == "counted_put":
            absent: Condition = key_attributes(model)[0].does_not_exist()
            condition = absent if condition is None else absent & condition
        request = pynamodb_view(instance).get_save_kwargs_from_instance(condition=condition,
                                                         return_values_on_condition_failure=ALL_OLD)
        if op.shards and shard_count(model) > 1:  # its shard items are created in this same transaction
            request["Item"][SHARD_COUNT.attr_name] = {"N": str(shard_count(model))}
        if op.kind == "put":
            return "Put", request, Slot("other", model, op.key, instance)
        request["Item"][WRITE_ID] = {"S": token}
        return "Put", request, Slot("put", model, op.key, instance, counted=op.deltas)
    if op.kind == "counted_edit":
        # an Update, not a Put: the child's own counters (a child that is also a parent) and the library's
        # attributes stay as stored; every other attribute is set as the instance holds it, as save() writes it
        assert instance is not None and op.basis is not None
        condition = _stored_as(model, op.basis, (as_loaded(instance), instance), condition)
        actions = [*op.actions, EDITED_BY.set(token)]
        version = saved_version(instance, actions)  # as save() writes it: the local version plus one
        if version is not None and op.add_version_condition:
            condition &= version
        request = key_request(model, op.key, condition=condition, actions=actions)
        return "Update", request, Slot("edit", model, op.key, instance, counted=op.deltas)
    if op.kind == "counted_update":
        # the caller's actions, conditioned on the stored state their counts were computed from
        assert instance is not None and op.basis is not None and op.after is not None
        condition = _stored_as(model, op.basis, (op.after.view,), condition)
        request = pynamodb_view(instance).get_update_kwargs_from_instance(
            [*op.actions, EDITED_BY.set(token)], condition=condition, return_values_on_condition_failure=ALL_OLD,
            add_version_condition=op.add_version_condition)
        return "Update", request, Slot("edit", model, op.key, instance, counted=op.deltas, stored=op.after.item,
                                       updating=True)
    if op.kind in ("counted_delete", "delete"):
        assert instance is not None
        if op.kind == "counted_delete":
            assert op.basis is not None
            condition = _stored_as(model, op.basis, (instance,), condition)
        if op.shards and counters_of(model):  # only the shard items it deletes with it: none is left behind,
            known = pending_fold(model) & not_a_shard()  # and never another parent's shard item
            condition = known if condition is None else condition & known
        request = pynamodb_view(instance).get_delete_kwargs_from_instance(condition=condition,
                                                           return_values_on_condition_failure=ALL_OLD,
                                                           add_version_condition=op.add_version_condition)
        if op.kind == "delete":
            return "Delete", request, Slot("other", model, op.key, instance)
        return "Delete", request, Slot("delete", model, op.key, instance, counted=op.deltas)
    if op.kind == "update":
        assert instance is not None
        actions = list(op.actions)
        if op.shards and shard_count(model) > 1:
            # created in this same transaction; a larger number recorded (a shrink not yet folded) is kept
            actions.append(SHARD_COUNT.set(SHARD_COUNT | shard_count(model)))
        child = bool(relations_of(model)) and not counting_skipped(model)
        if child:  # an uncounted update of a counted child never creates it (it would not be counted)
            exists: Condition = key_attributes(model)[0].exists()
            condition = exists if condition is None else exists & condition
        if op.parent_save:  # never over another parent's shard item
            condition = not_a_shard() if condition is None else not_a_shard() & condition
        request = pynamodb_view(instance).get_update_kwargs_from_instance(actions, condition=condition,
                                                           return_values_on_condition_failure=ALL_OLD,
                                                           add_version_condition=op.add_version_condition)
        return "Update", request, Slot("other", model, op.key, instance, must_exist=child)
    assert op.condition is not None
    request = key_request(model, op.key, condition=op.condition)
    return "ConditionCheck", request, Slot("other", model, op.key)


def _stored_as(model: Type[Model], basis: Stored, others: Sequence[Model], condition: Optional[Condition]
               ) -> Condition:
    """The condition of a counted edit, update or delete: the child is stored, and the attributes that decide its
    parents (read on the stored child as loaded, or on ``others``: the new state, the instance) hold what
    ``basis`` holds, the stored child its deltas were counted from (as loaded, or learned again from a refusal);
    then the caller's ``condition``."""
    stored: Condition = key_attributes(model)[0].exists()
    states: List[Model] = [basis.view]
    states.extend(other for other in others if all(other is not state for state in states))
    same = basis.unchanged(deciding(model, *states))
    if same is not None:
        stored &= same
    return stored if condition is None else stored & condition


def shard_entries(model: Type[Model], key: Tuple[Any, ...], action: str) -> List[_Entry]:
    """The actions that create (``action="Update"``) or delete (``"Delete"``) a parent's shard items ``1`` and up,
    as plan entries; none for a model without sharded counters. Each is conditioned on its key holding nothing
    or a shard item: another item stored at a shard key refuses the whole transaction."""
    entries = []
    condition = shard_or_absent(model)
    for shard in range(1, shard_count(model)):
        target = shard_key(key, shard)
        where = item_id(model, target)
        kwargs: Dict[str, Any] = {"actions": [SHARD.set(shard)]} if action == "Update" else {}
        request = serialized_key_request(model, where[1], where[2], condition=condition, **kwargs)
        entries.append((where, action, request, Slot("shard", model, key, shard=shard)))
    return entries


def _gone_checks(operations: Sequence[Operation], parents: Dict[ItemId, Slot]) -> List[_Entry]:
    """A ConditionCheck that each rollup found gone (whose decrements are left out) is still absent: created again
    since (by a later first count), it counts the child after all, and the refusal says so."""
    entries: List[_Entry] = []
    for op in operations:
        for model, key in sorted(op.gone_parents, key=repr):
            where = item_id(model, key)
            if where in parents or any(entry[0] == where for entry in entries):
                continue  # another child's count creates it in this same transaction
            absent = key_attributes(model)[0].does_not_exist()
            entries.append((where, "ConditionCheck", key_request(model, key, condition=absent),
                            Slot("gone", model, key)))
    return entries


def _parent_request(slot: Slot, merged: Optional[Operation], where: ItemId) -> Tuple[str, Dict[str, Any]]:
    """A parent's counter Update. Its request depends only on the declarations and the slot's shape (which
    deltas, which feeds, whether it creates its parent, its table, its counters' shards and limits, and, in a
    single-table model, the subclasses declared so far), except for the key, a caller's merged update and a
    created parent's defaults: each shape is built once through PynamoDB and then copied with another key."""
    if merged is not None or (slot.creates and slot.defaults) or slot.absent:
        return "Update", _build_parent_request(slot, merged, where)
    discriminator = discriminator_of(slot.model)  # its guard names the subclasses known: more may be declared
    counters = counters_of(slot.model)
    shape = (slot.model.Meta.table_name,  # PynamoDB follows a table name changed at run time
             bool(slot.shard), tuple(slot.deltas.items()), frozenset(slot.fed_by), slot.creates, slot.rollup,
             shard_count(slot.model), tuple((counters[name].shards, _limit_of(counters[name])) for name in slot.deltas),
             None if discriminator is None else tuple(discriminator.get_registered_subclasses(slot.model)),
             declared())  # the relations declared so far: other models' feeds in the table (foreign_feeds)
    held = spec_of(slot.model).requests
    template = held.get(shape)
    if template is None:
        request = _build_parent_request(slot, None, where)
        if len(held) < _SHAPES_HELD:  # sums bring a shape per amount: keep the first few hundred
            held[shape] = dict(request)
        return "Update", request
    request = dict(template)
    (hash_name, hash_value), *ranged = template["Key"].items()
    key = {hash_name: {next(iter(hash_value)): where[1]}}
    for range_name, range_value in ranged:
        key[range_name] = {next(iter(range_value)): where[2]}
    request["Key"] = key
    return "Update", request


def _limit_of(counter: Any) -> Any:
    """A counter's limit as part of a shape: the number, or the name of the parent's attribute holding it."""
    limit = counter.limit
    return limit if limit is None or isinstance(limit, int) else limit.attr_name


def _build_parent_request(slot: Slot, merged: Optional[Operation], where: ItemId) -> Dict[str, Any]:
    model = slot.model
    attributes = model.get_attributes()
    actions: List[Action] = [SEQUENCE.add(1)]
    # a rollup's first counts create it where absent (found gone, it must still be absent); any other change, or
    # any other parent, must find it stored
    creates = slot.creates and not slot.shard and all(delta >= 0 for delta in slot.deltas.values())
    condition: Any = SHARD.exists() if slot.shard else created_parent_condition(model) if creates \
        else parent_condition(model)
    if slot.absent and creates:
        condition = key_attributes(model)[0].does_not_exist()
    foreign = foreign_feeds(model) if slot.rollup and not slot.shard else {}
    if foreign:  # a rollup never counts into an item that another model's relations count into
        fed_elsewhere: Condition = reduce(operator.or_, (FED_BY.contains(entry) for entry in sorted(foreign)))
        condition = ~fed_elsewhere if condition is None else condition & ~fed_elsewhere
    if creates:
        actions.extend(_created_with(model, slot.defaults or {}))
    fed_by = slot.fed_by
    if fed_by:  # which relations fed each counter changed here: an audit that cannot see one refuses the parent
        actions.append(FED_BY.add(set(fed_by)))
    counters = counters_of(model)
    for name, delta in slot.deltas.items():
        if delta or creates:  # a first count of 0 still creates the counter, as 0
            actions.insert(-1 - bool(fed_by), attributes[name].add(delta))
        if delta < 0 and counters[name].shards == 1:
            # the floor of zero, lifted while the parent records shards its model no longer declares: until
            # reshard() folds them in, the parent item holds only part of a formerly sharded counter
            condition &= (attributes[name] >= -delta) | (SHARD_COUNT > shard_count(model))
        if delta > 0 and counters[name].limited:
            limit = within_limit(counters[name], delta)
            condition = limit if condition is None else condition & limit
    if merged is not None:
        if merged.condition is not None:
            condition = merged.condition if condition is None else condition & merged.condition
        extra = list(merged.actions)
        if merged.instance is not None and merged.add_version_condition:
            version = version_condition(merged.instance, actions=extra)
            if version is not None:
                condition = version if condition is None else condition & version
        actions = extra + actions
    return serialized_key_request(model, where[1], where[2], condition=condition, actions=actions)


def _created_with(model: Type[Model], defaults: Dict[str, Any]) -> List[Action]:
    """The actions that give a parent created by its first count what it starts with, where absent: its
    discriminator (in a polymorphic model) and the relation's ``parent_defaults``."""
    attributes = model.get_attributes()
    actions: List[Action] = []
    discriminator = discriminator_of(model)
    if discriminator is not None:
        actions.append(discriminator.set(discriminator | model))
    for name, value in defaults.items():
        if value is not None:
            actions.append(attributes[name].set(attributes[name] | value))
    return actions
