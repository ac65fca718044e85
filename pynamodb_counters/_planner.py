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
* a caller's ``update()`` or ``condition_check()`` on a parent that receives deltas is merged into that Update;
* a sharded counter's delta goes to the child's shard item (the parent item for shard 0), guarded by that item
  being a shard, with no floor (a shard may dip below zero once its counter is resharded; the total stays
  exact); saving a parent with sharded counters creates its shard items, deleting it deletes them;
* a delete sent again without the decrement of a rollup found gone (expired) carries a ConditionCheck that the
  rollup is still absent;
* no item is named twice, and there are at most 100 actions.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple, Type

from pynamodb.constants import ALL_OLD
from pynamodb.expressions.condition import Condition

from ._base import FED_BY, SEQUENCE, SHARD, SHARD_COUNT, WRITE_ID, WRITTEN_BY
from ._compat import discriminator_of, key_attributes, saved_version, version_condition
from ._operations import Operation
from ._plans import ItemId, Plan, Slot
from ._requests import (
    created_parent_condition,
    item_id,
    key_request,
    parent_condition,
    pending_fold,
    pynamodb_view,
    serialized_key_request,
    unchanged,
    within_limit,
)
from ._results import CounterChange
from ._shards import shard_key, shard_or_absent
from ._spec import counters_of, relations_of, shard_count, spec_of
from .exceptions import InvalidTransactionError, TransactionTooLargeError
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
    child's :attr:`~Operation.changes` are computed here, from its :attr:`~Operation.counted_state`.

    :raises TransactionTooLargeError: more than 100 actions.
    :raises InvalidTransactionError: an empty transaction, one item named twice, a child counted on itself.
    :raises ParentKeyError: a relation's key function gave an unusable parent key.
    """
    entries: List[_Entry] = []
    parents: Dict[ItemId, Slot] = {}
    merged: Dict[ItemId, Operation] = {}

    for op in operations:  # first pass: which parent items receive deltas
        if op.kind in COUNTED:
            for relation, change in count(op):
                where = item_id(change.parent, shard_key(change.key, change.shard) if change.shard else change.key)
                slot = parents.setdefault(where, Slot("parent", change.parent, change.key, shard=change.shard))
                slot.deltas[change.attribute] = slot.deltas.get(change.attribute, 0) + change.delta
                slot.fed_by.add(relation.feed)
                slot.creates = slot.creates and relation.create_parent
                if relation.create_parent and change.delta > 0 and slot.defaults is None:
                    state = op.after if op.after is not None else op.instance
                    assert state is not None
                    slot.defaults = relation.parent_defaults(state)

    for op in operations:
        where = item_id(op.model, op.key)
        if where in parents and op.kind in ("update", "check") and not op.parent_save \
                and where not in merged:
            merged[where] = op
            continue
        if where in parents:
            raise InvalidTransactionError(
                f"{op.model.__name__} {op.key} is both written and counted as a parent in this transaction"
                + (" (a child counted on itself)" if op.kind.startswith("counted") else ""))
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


def count(op: Operation) -> List[Tuple[Relation, CounterChange]]:
    """The counter changes of a counted child's operation, each with its relation, and the operation's
    :attr:`~Operation.changes`, :attr:`~Operation.removed`, :attr:`~Operation.added` and
    :attr:`~Operation.changed` set from them.

    A new child adds what it counts for, a deleted one removes what its stored state counts for. An edit
    compares, relation by relation, its stored state with its new state: a relation it starts counting for is
    added, one it stops counting for is removed, a move to another parent is both, and a change of amount on the
    same parent is one change of the difference (none when the difference is zero).

    :raises ParentKeyError: a key function gave an unusable parent key.
    :raises ChildValueError: a ``when=`` or ``amount=`` function failed or gave an unusable value.
    """
    assert op.instance is not None
    if op.kind == "counted_put":  # a new child: what it counts for, added
        pairs = [(relation, change) for relation in relations_of(op.model)
                 for change in relation.changes(op.instance, 1)]
        op.counted, op.removed, op.changed = pairs, (), ()
        op.added = op.changes = tuple(change for _, change in pairs)
        return pairs
    removed: List[Tuple[Relation, CounterChange]] = []
    added: List[Tuple[Relation, CounterChange]] = []
    changed: List[Tuple[Relation, CounterChange]] = []
    for relation in relations_of(op.model):
        edit = op.kind in ("counted_edit", "counted_update")
        before = relation.changes(op.basis, -1) if edit and op.basis is not None else []
        if op.kind == "counted_delete":
            state = op.counted_state
            assert state is not None
            removed.extend((relation, change) for change in relation.changes(state, -1))
            continue
        after = relation.changes(op.after if op.after is not None else op.instance, 1)
        if before and after and (before[0].key, before[0].shard) == (after[0].key, after[0].shard):
            delta = before[0].delta + after[0].delta
            if delta:
                changed.append((relation, replace(after[0], delta=delta)))
            continue
        removed.extend((relation, change) for change in before)
        added.extend((relation, change) for change in after)
    # rollups found gone (expired): their decrements are not sent, and are reported
    op.gone = tuple(change for _, change in removed if (change.parent, change.key) in op.gone_parents)
    if op.gone:
        removed = [(relation, change) for relation, change in removed
                   if (change.parent, change.key) not in op.gone_parents]
    op.removed = tuple(change for _, change in removed)
    op.added = tuple(change for _, change in added)
    op.changed = tuple(change for _, change in changed)
    op.changes = op.removed + op.added + op.changed
    op.counted = removed + added + changed
    return op.counted


def _child_or_other(op: Operation, token: str) -> Tuple[str, Dict[str, Any], Slot]:
    instance, model, condition = op.instance, op.model, op.condition
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
        return "Put", request, Slot("put", model, op.key, instance, changes=op.changes, added=op.added)
    if op.kind == "counted_edit":
        # an Update, not a Put: the child's own counters (a child that is also a parent) and the library's
        # attributes stay as stored; every other attribute is set as the instance holds it, as save() writes it
        assert instance is not None and op.basis is not None
        condition = _stored_as(model, op.basis, instance, condition)
        actions = [*op.actions, WRITTEN_BY.set(token)]
        version = saved_version(instance, actions)  # as save() writes it: the local version plus one
        if version is not None and op.add_version_condition:
            condition &= version
        request = key_request(model, op.key, condition=condition, actions=actions)
        return "Update", request, Slot("edit", model, op.key, instance, changes=op.changes, removed=op.removed,
                                       added=op.added, changed=op.changed, gone=op.gone)
    if op.kind == "counted_update":
        # the caller's actions, conditioned on the stored state their counts were computed from
        assert instance is not None and op.basis is not None and op.after is not None
        condition = _stored_as(model, op.basis, op.after, condition)
        request = pynamodb_view(instance).get_update_kwargs_from_instance(
            [*op.actions, WRITTEN_BY.set(token)], condition=condition, return_values_on_condition_failure=ALL_OLD,
            add_version_condition=op.add_version_condition)
        return "Update", request, Slot("edit", model, op.key, instance, changes=op.changes, removed=op.removed,
                                       added=op.added, changed=op.changed, state=op.after, gone=op.gone)
    if op.kind in ("counted_delete", "delete"):
        assert instance is not None
        if op.kind == "counted_delete":
            assert op.counted_state is not None
            condition = _stored_as(model, op.counted_state, instance, condition)
        if op.shards and counters_of(model):  # only the shard items it deletes with it: none is left behind
            known = pending_fold(model)
            condition = known if condition is None else condition & known
        request = pynamodb_view(instance).get_delete_kwargs_from_instance(condition=condition,
                                                           return_values_on_condition_failure=ALL_OLD,
                                                           add_version_condition=op.add_version_condition)
        if op.kind == "delete":
            return "Delete", request, Slot("other", model, op.key, instance)
        return "Delete", request, Slot("delete", model, op.key, instance, changes=op.changes, removed=op.removed,
                                       gone=op.gone)
    if op.kind == "update":
        assert instance is not None
        actions = list(op.actions)
        if op.shards and shard_count(model) > 1:
            # created in this same transaction; a larger number recorded (a shrink not yet folded) is kept
            actions.append(SHARD_COUNT.set(SHARD_COUNT | shard_count(model)))
        request = pynamodb_view(instance).get_update_kwargs_from_instance(actions, condition=condition,
                                                           return_values_on_condition_failure=ALL_OLD,
                                                           add_version_condition=op.add_version_condition)
        return "Update", request, Slot("other", model, op.key, instance)
    assert op.condition is not None
    request = key_request(model, op.key, condition=op.condition)
    return "ConditionCheck", request, Slot("other", model, op.key)


def _stored_as(model: Type[Model], state: Model, other: Model, condition: Optional[Condition]) -> Condition:
    """The condition of a counted edit, update or delete: the child is stored, and the attributes that decide its
    parents (read on ``state`` or ``other``) hold the values of ``state``, the stored state its deltas were
    counted from (as loaded, or learned again from a refusal); then the caller's ``condition``."""
    stored: Condition = key_attributes(model)[0].exists()
    same = unchanged(model, state, other)
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
    if merged is not None or (slot.creates and slot.defaults):
        return "Update", _build_parent_request(slot, merged, where)
    discriminator = discriminator_of(slot.model)  # its guard names the subclasses known: more may be declared
    counters = counters_of(slot.model)
    shape = (slot.model.Meta.table_name,  # PynamoDB follows a table name changed at run time
             bool(slot.shard), tuple(slot.deltas.items()), frozenset(slot.fed_by), slot.creates,
             shard_count(slot.model), tuple((counters[name].shards, _limit_of(counters[name])) for name in slot.deltas),
             None if discriminator is None else tuple(discriminator.get_registered_subclasses(slot.model)))
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
    # a rollup's increment creates its parent where absent; a decrement, or any other parent, must find it stored
    creates = slot.creates and not slot.shard and all(delta >= 0 for delta in slot.deltas.values())
    condition: Any = SHARD.exists() if slot.shard else created_parent_condition(model) if creates \
        else parent_condition(model)
    if creates:
        actions.extend(_created_with(model, slot.defaults or {}))
    fed_by = slot.fed_by
    if fed_by:  # which relations fed each counter changed here: an audit that cannot see one refuses the parent
        actions.append(FED_BY.add(set(fed_by)))
    counters = counters_of(model)
    for name, delta in slot.deltas.items():
        if delta:
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
