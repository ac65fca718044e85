"""
The plan: a transaction's writes, each counted write as decided for this attempt (``_deltas.Decision``), as the
actions of one TransactWriteItems (``_actions``). No I/O; it changes nothing it is given, but for the shapes of
parent Update kept on a parent model's spec (``_actions``). Each action is made once, whole: a parent's Update
from the changes gathered for its item first (:class:`_Gathered`), a caller's merged write included.

What a plan guarantees, before anything is sent:

* each counted child has one action: a create-only Put, an edit's or update's Update, a Delete, each conditioned
  on the stored child its deltas were counted from (``_actions``), or for a stream record counted with a marker
  (a child deleted by TTL, or one counted from the stream outside its parent's partition) the create-only Put of
  its marker (``_markers``);
* every parent item gets exactly one Update, all the changes counted into it merged (``ParentUpdate``), and a
  caller's ``update()`` or ``condition_check()`` of that item merged into it; two unrelated models never count
  into one item;
* a write the commit left out (a bulk write's refused child, a stream record counted already) has no action;
* a counter floored by the commit (stream records that would take it below zero) takes no more than its floor;
* a sharded parent's shard items are created with it, or deleted with it; a child that is one brings its own;
* what a write leaves out of a rollup found gone is sent with a check that it is still absent, or, where first
  counts create it again in the same transaction, their Update needs it absent;
* no item is named twice, and there are at most 100 actions.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, AbstractSet, Any, Dict, List, Optional, Sequence, Set, Tuple, Type

from .._keys import ItemId, item_id
from ..declare._shards import shard_key
from ..declare._stored_names import outside_entry
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
from ._deltas import Decision, Parent, feeder_entry_of, parent_defaults
from ._markers import RecordMarker
from ._writes import Write, WriteKind

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.models import Model

    from ..declare._spec import ModelSpec, RelationSpec

__all__ = ["MAX_ACTIONS", "Plan", "plan"]

MAX_ACTIONS = 100
"""DynamoDB's limit on actions in one TransactWriteItems."""


@dataclass(frozen=True)
class Plan:
    """A TransactWriteItems, ready to send: its actions and their requests, built for ``token`` from what each
    write was decided as (``decisions``: one per write, ``None`` for one that counts nothing or that was left
    out)."""

    actions: Tuple[Action, ...]
    items: List[Dict[str, Any]]
    token: str
    decisions: Tuple[Optional[Decision], ...] = field(default=(), compare=False, repr=False)
    children: List[ChildAction] = field(init=False, compare=False, repr=False)
    """The counted children's own actions, in the order of their writes."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "children", [action for action in self.actions if isinstance(action, ChildAction)])


def plan(writes: Sequence[Write], decisions: Sequence[Optional[Decision]], token: str,
         left_out: AbstractSet[int] = frozenset(), floors: Sequence[Tuple[ItemId, str, int]] = ()) -> Plan:
    """The TransactWriteItems of ``writes``, each counted write as its :class:`Decision` says, but for the writes
    at the positions in ``left_out``, each parent item's counter taking no less than its floor in ``floors`` (the
    item, the counter's Python name, the lowest change).

    :raises TransactionTooLargeError: more than 100 actions.
    :raises InvalidTransactionError: an empty transaction, one item named twice, a child counted on itself, a
      parent written in the transaction that counts children into it.
    :raises ParentKeyError: a parent key too long for DynamoDB, or the key of an item another, unrelated model's
      relation counts into in the same transaction.
    :raises InvalidArgumentError: a child's own key is too long for DynamoDB.
    """
    sent = [(index, write, decision) for index, (write, decision) in enumerate(zip(writes, decisions))
            if index not in left_out]
    gathered = _gathered(sent)
    for where, name, floor in floors:
        if where in gathered and gathered[where].deltas.get(name, 0) < floor:
            gathered[where].deltas[name] = floor
    own = [item_of(write.model, write.spec, write.key) for _, write, _ in sent]  # each write's item, once
    merged: Dict[ItemId, Write] = {}  # a caller's update or check of a parent item counted into joins its Update
    for (_, write, _), where in zip(sent, own):
        if where in gathered and where not in merged and write.kind in (WriteKind.OTHER_UPDATE, WriteKind.CHECK):
            merged[where] = write
    parents = {where: gathering.update(merged.get(where)) for where, gathering in gathered.items()}
    actions: List[Action] = []
    for (index, write, decision), where in zip(sent, own):
        update = parents.get(where)
        if update is not None and update.merged is write:
            continue
        if update is not None:
            raise InvalidTransactionError(_written_and_counted(write, decision))
        actions.append(_own_action(index, write, decision, where))
        shards = write.spec.shards
        if shards > 1 and write.with_shards and (write.kind is not WriteKind.SAVE or isinstance(actions[-1], ChildPut)):
            create = write.kind in (WriteKind.SAVE, WriteKind.PARENT_SAVE)
            actions.extend(shard_items(write.model, write.key, create, shards))
    actions.extend(parents.values())
    actions.extend(_rollup_checks([decision for _, _, decision in sent], parents))

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
    return Plan(tuple(actions), [{action.verb: action.request(token)} for action in actions], token,
                tuple(None if index in left_out else decision for index, decision in enumerate(decisions)))


def _own_action(index: int, write: Write, decision: Optional[Decision], where: ItemId) -> Action:
    """A write's action on its own item (``where``): a counted child's Put (a create), Update (an edit or update)
    or Delete, as what it is counted from decides; the caller's write as it is for anything else."""
    if decision is None:
        return Passthrough(write, where)
    if write.kind is WriteKind.DELETE:
        return ChildDelete(index, write, decision, where)
    if write.kind.marked:
        return RecordMarker(index, write, decision, where)
    if write.kind is WriteKind.UPDATE or decision.basis is not None:
        return ChildEdit(index, write, decision, where)
    return ChildPut(index, write, decision, where)


@dataclass
class _Gathered:
    """What the plan gathers for one parent item's Update before making it (:meth:`update`): the changes counted
    into it, merged. Its fields are :class:`~pynamodb_counters.write._actions.ParentUpdate`'s."""

    model: Type[Model]
    key: Tuple[Any, ...]
    shard: int
    where: ItemId
    relation: RelationSpec
    spec: ModelSpec
    deltas: Dict[str, int] = field(default_factory=dict)
    feeders: Set[str] = field(default_factory=set)
    rollup: bool = True
    creates: bool = True
    first: bool = False
    defaults: Optional[Dict[str, Any]] = None
    absent: bool = False

    def update(self, merged: Optional[Write]) -> ParentUpdate:
        """The Update, made once, with ``merged``: a caller's ``update()`` or ``condition_check()`` of the item.

        :raises ParentKeyError: the key is too long for DynamoDB.
        """
        return ParentUpdate(self.model, self.key, self.shard, self.where, self.relation, self.spec,
                            self.deltas, self.feeders, rollup=self.rollup, creates=self.creates and self.first,
                            defaults=self.defaults, absent=self.absent, merged=merged)


def _gathered(sent: Sequence[Tuple[int, Write, Optional[Decision]]]) -> Dict[ItemId, _Gathered]:
    """Every change counted into each parent item, merged, by item."""
    parents: Dict[ItemId, _Gathered] = {}
    gone: Set[Parent] = set()
    for _, write, decision in sent:
        if decision is None:
            continue
        streamed = write.kind is WriteKind.STREAMED
        gone |= decision.gone
        found = decision.deltas
        for first, pairs in ((False, found.removed), (True, found.added), (False, found.changed)):
            for relation, change in pairs:
                where = item_of(change.parent, relation.parent_spec,
                                shard_key(change.key, change.shard) if change.shard else change.key)
                parent = parents.get(where)
                opens = parent is None  # the first change into the item, in stream order for stream records
                if parent is None:
                    parent = parents[where] = _Gathered(change.parent, change.key, change.shard, where, relation,
                                                        relation.parent_spec)
                elif parent.model is not change.parent:
                    parent.model = _one_model(parent, change.parent, relation)
                    if parent.model is change.parent:
                        parent.spec = relation.parent_spec
                parent.deltas[change.attribute] = parent.deltas.get(change.attribute, 0) + change.delta
                entry = feeder_entry_of(relation)
                # a child counted from the stream outside its parent's partition: an audit cannot count it there
                parent.feeders.add(outside_entry(entry) if streamed else entry)
                parent.rollup = parent.rollup and relation.create_parent
                # a rollup's first counts create it; stream records merged in one Update create it where the first
                # of them is a first count (as count_stream's own Update of a parent in the child's partition does):
                # a child added and removed in one batch leaves it at 0, not gone, and a decrement before the first
                # count finds a gone rollup gone (what it counted went with it), whatever the batching
                parent.creates = parent.creates and relation.create_parent and (first or (streamed and not opens))
                parent.first = parent.first or first
                if relation.create_parent and first and change.delta >= 0 and parent.defaults is None:
                    assert decision.loaded is not None  # a first count is a save's or an update's
                    parent.defaults = parent_defaults(relation, decision.loaded)
    for model, key in gone:  # a rollup found gone that a write counts into again must still be absent
        parent = parents.get(item_id(model, key))
        if parent is not None:
            parent.absent = True
    return parents


def _rollup_checks(decisions: Sequence[Optional[Decision]], parents: Dict[ItemId, ParentUpdate]) -> List[Action]:
    """A check that each rollup found gone is still absent, where the transaction does not count into it."""
    checks: List[Action] = []
    seen = set()
    for decision in decisions:
        for model, key in sorted(decision.gone, key=repr) if decision is not None else ():
            where = item_id(model, key)
            if where in parents or where in seen:
                continue  # a first count creates it in this same transaction, or another check covers it
            seen.add(where)
            checks.append(RollupCheck(model, key, where))
    return checks


def _one_model(update: _Gathered, model: Type[Model], relation: RelationSpec) -> Type[Model]:
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


def _written_and_counted(write: Write, decision: Optional[Decision]) -> str:
    """Why ``write`` cannot be in a transaction that also counts into its own item."""
    where = f"{write.model.__name__} {write.key}"
    own = item_id(write.model, write.key)
    if decision is not None and any(item_id(change.parent, change.key) == own for change in decision.deltas.changes):
        return f"{where} is both written and counted as a parent in this transaction (a child counted on itself)"
    return (f"{where} is both written and counted into as a parent in this transaction, and DynamoDB allows one "
            f"action per item: commit the write and the children counted into it in two transactions")
