"""
The plan: a transaction's writes, each counted write with what it is counted from in this attempt, as the
actions of one TransactWriteItems (``_actions``). No I/O; it changes nothing it is given, but for the shapes of
parent Update kept on a parent model's spec (``_actions``).

What a plan guarantees, before anything is sent:

* each counted child has one action: a create-only Put, an edit's or update's Update, a Delete, each conditioned
  on the stored child its deltas were counted from (``_actions``), or for a child deleted by TTL the create-only
  Put of its stream record's marker (``_expiries``);
* every parent item gets exactly one Update, all the changes counted into it merged (``ParentUpdate``), and a
  caller's ``update()`` or ``condition_check()`` of that item merged into it; two unrelated models never count
  into one item;
* a sharded parent's shard items are created with it, or deleted with it; a child that is one brings its own;
* what a write leaves out of a rollup found gone is sent with a check that it is still absent, or, where first
  counts create it again in the same transaction, their Update needs it absent;
* no item is named twice, and there are at most 100 actions.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple, Type

from .._compat import ItemId, item_id
from ..declare._shards import shard_key
from ..exceptions import InvalidTransactionError, ParentKeyError, TransactionTooLargeError
from ._actions import (
    Action,
    ChildAction,
    ChildDelete,
    ChildEdit,
    ChildPut,
    ParentUpdate,
    Passthrough,
    RollupCheck,
    item_of,
    shard_items,
)
from ._deltas import Counting, feed_of, parent_defaults
from ._expiries import ExpiryMarker
from ._stored import as_loaded
from ._writes import Write, WriteKind

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.models import Model

    from ..declare._spec import RelationSpec

__all__ = ["MAX_ACTIONS", "Plan", "plan"]

MAX_ACTIONS = 100
"""DynamoDB's limit on actions in one TransactWriteItems."""


@dataclass(frozen=True)
class Plan:
    """A TransactWriteItems, ready to send: its actions and their requests, built for ``token``."""

    actions: Tuple[Action, ...]
    items: List[Dict[str, Any]]
    token: str
    children: List[ChildAction] = field(init=False, compare=False, repr=False)
    """The counted children's own actions, in the order of their writes."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "children", [action for action in self.actions if isinstance(action, ChildAction)])


def plan(writes: Sequence[Write], countings: Sequence[Optional[Counting]], token: str) -> Plan:
    """The TransactWriteItems of ``writes``, each counted write counted as its :class:`Counting` (its deltas
    decided already) says.

    :raises TransactionTooLargeError: more than 100 actions.
    :raises InvalidTransactionError: an empty transaction, one item named twice, a child counted on itself, a
      parent written in the transaction that counts children into it.
    :raises ParentKeyError: a parent key too long for DynamoDB, or the key of an item another, unrelated model's
      relation counts into in the same transaction.
    :raises InvalidArgumentError: a child's own key is too long for DynamoDB.
    """
    parents = _parent_updates(writes, countings)
    actions: List[Action] = []
    for index, (write, counting) in enumerate(zip(writes, countings)):
        where = item_of(write.model, write.spec, write.key)
        update = parents.get(where)
        if update is not None and write.kind in (WriteKind.OTHER_UPDATE, WriteKind.CHECK) and update.merged is None:
            update.merged = write
            continue
        if update is not None:
            raise InvalidTransactionError(_written_and_counted(write, counting))
        actions.append(_own_action(index, write, counting, where))
        shards = write.spec.shards
        if shards > 1 and write.with_shards and (write.kind is not WriteKind.SAVE or isinstance(actions[-1], ChildPut)):
            create = write.kind in (WriteKind.SAVE, WriteKind.PARENT_SAVE)
            actions.extend(shard_items(write.model, write.key, create, shards))
    actions.extend(parents.values())
    actions.extend(_rollup_checks(countings, parents))

    seen = set()
    for action in actions:
        if action.where in seen:
            raise InvalidTransactionError(f"{action.label} appears twice in one transaction; DynamoDB allows one "
                                          f"action per item")
        seen.add(action.where)
    if len(actions) > MAX_ACTIONS:
        raise TransactionTooLargeError(f"this transaction has {len(actions)} actions; DynamoDB allows "
                                       f"{MAX_ACTIONS}. Nothing was sent")
    if not actions:
        raise InvalidTransactionError("this transaction is empty")
    return Plan(tuple(actions), [{action.verb: action.request(token)} for action in actions], token)


def _own_action(index: int, write: Write, counting: Optional[Counting], where: ItemId) -> Action:
    """A write's action on its own item (``where``): a counted child's Put (a create), Update (an edit or update)
    or Delete, as what it is counted from decides; the caller's write as it is for anything else."""
    if counting is None:
        return Passthrough(write, where)
    if write.kind is WriteKind.DELETE:
        return ChildDelete(index, write, counting, where)
    if write.kind is WriteKind.EXPIRY:
        return ExpiryMarker(index, write, counting, where)
    if write.kind is WriteKind.UPDATE or counting.basis is not None:
        return ChildEdit(index, write, counting, where)
    return ChildPut(index, write, counting, where)


def _parent_updates(writes: Sequence[Write], countings: Sequence[Optional[Counting]]
                    ) -> Dict[ItemId, ParentUpdate]:
    """One Update per parent item counted into, every change into it merged."""
    parents: Dict[ItemId, ParentUpdate] = {}
    for write, counting in zip(writes, countings):
        if counting is None:
            continue
        found = counting.deltas
        for first, pairs in ((False, found.removed), (True, found.added), (False, found.changed)):
            for relation, change in pairs:
                where = item_of(change.parent, relation.parent_spec,
                                shard_key(change.key, change.shard) if change.shard else change.key)
                update = parents.get(where)
                if update is None:
                    update = parents[where] = ParentUpdate(change.parent, change.key, change.shard, where, relation,
                                                           relation.parent_spec)
                elif update.model is not change.parent:
                    update.model = _one_model(update, change.parent, relation)
                    if update.model is change.parent:
                        update.spec = relation.parent_spec
                update.deltas[change.attribute] = update.deltas.get(change.attribute, 0) + change.delta
                update.fed_by.add(feed_of(relation))
                update.rollup = update.rollup and relation.create_parent
                update.creates = update.creates and relation.create_parent and first
                if relation.create_parent and first and change.delta >= 0 and update.defaults is None:
                    update.defaults = parent_defaults(relation, _stored_state(write, counting))
    for counting in countings:  # a rollup found gone that a write counts into again must still be absent
        for model, key in counting.gone if counting is not None else ():
            update = parents.get(item_id(model, key))
            if update is not None:
                update.absent = True
    return parents


def _stored_state(write: Write, counting: Counting) -> Model:
    """The child a first count's ``parent_defaults`` read: as PynamoDB will load it once written."""
    if counting.loaded is not None:
        return counting.loaded
    assert write.instance is not None
    return as_loaded(write.instance, write.spec)


def _rollup_checks(countings: Sequence[Optional[Counting]], parents: Dict[ItemId, ParentUpdate]) -> List[Action]:
    """A check that each rollup found gone is still absent, where the transaction does not count into it."""
    checks: List[Action] = []
    seen = set()
    for counting in countings:
        for model, key in sorted(counting.gone, key=repr) if counting is not None else ():
            where = item_id(model, key)
            if where in parents or where in seen:
                continue  # a first count creates it in this same transaction, or another check covers it
            seen.add(where)
            checks.append(RollupCheck(model, key, where))
    return checks


def _one_model(update: ParentUpdate, model: Type[Model], relation: RelationSpec) -> Type[Model]:
    """The model of one parent item counted into by two relations: the more derived of the two (a subclass's
    counter and its base's on one item of a single-table model).

    :raises ParentKeyError: the two models are unrelated: the key of one's item names the other's.
    """
    if issubclass(model, update.model):
        return model
    if issubclass(update.model, model):
        return update.model
    raise ParentKeyError(
        f"{relation}: the key function gave {update.key!r}, the key of the {update.model.__name__} item that "
        f"{update.relation} counts into in this same write: an item belongs to one model, and {model.__name__}'s "
        f"counters are never added to a {update.model.__name__}. Give {model.__name__}'s items keys of their own "
        f"(a prefix such as 'DAY#'). Nothing was written")


def _written_and_counted(write: Write, counting: Optional[Counting]) -> str:
    """Why ``write`` cannot be in a transaction that also counts into its own item."""
    where = f"{write.model.__name__} {write.key}"
    own = item_id(write.model, write.key)
    if counting is not None and any(item_id(change.parent, change.key) == own for change in counting.deltas.changes):
        return f"{where} is both written and counted as a parent in this transaction (a child counted on itself)"
    return (f"{where} is both written and counted into as a parent in this transaction, and DynamoDB allows one "
            f"action per item: commit the write and the children counted into it in two transactions")
