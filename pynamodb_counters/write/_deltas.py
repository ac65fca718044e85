"""
What a counted child's write changes: :func:`deltas`, the one function that decides it, for a create, an edit
(a move included), an update and a delete alike, and :func:`decide`, which gives it the two states to compare
for one write (:class:`Counting`: what the write is counted from in an attempt) and returns what it decided
(:class:`Decision`). No I/O, and nothing written: both are frozen, and only the commit's unit of work
(``_commit.Work``) replaces a write's :class:`Counting` between attempts.

It compares, relation by relation, the stored child as PynamoDB loads it (``before``: ``None`` for a new child)
with the child as PynamoDB will load it once written (``after``: ``None`` for a delete):

* a relation the child starts counting for is **added** (a first count: the only change that may create a
  rollup);
* one it stops counting for is **removed**; a move to another parent is both;
* one whose parent stays and whose amount changes is **changed** by the difference (nothing when it is zero);
* what would be removed from, or changed in, a rollup found gone (expired) is **gone**: not sent, reported. A
  gone rollup stays gone for the children it counted; only a first count creates it again.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, AbstractSet, Any, FrozenSet, List, Optional, Sequence, Tuple, Type

from .._results import CounterChange
from ..declare._expiry_rules import STREAM
from ..declare._spec import relations_of
from ..exceptions import ChildValueError, ParentKeyError
from ._stored import Stored, as_loaded, deciding, stored_of
from ._writes import Write, WriteKind, bypass_of

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.models import Model

    from ..declare._relations import Relation

__all__ = ["NONE", "Counting", "Decision", "Deltas", "counting_of", "decide", "deltas", "names_parents"]

Counted = Tuple["Relation", CounterChange]
"""One counter change with the relation that makes it."""

Parent = Tuple[Type[Any], Tuple[Any, ...]]
"""A parent item: its model and key."""


@dataclass(frozen=True)
class Deltas:
    """The counter changes of one counted child's write, each with its relation, by kind."""

    removed: Tuple[Counted, ...] = ()
    added: Tuple[Counted, ...] = ()
    changed: Tuple[Counted, ...] = ()
    gone: Tuple[CounterChange, ...] = ()
    counted: Tuple[Counted, ...] = field(init=False, compare=False, repr=False)
    """Every change sent: the removed, then the added, then the changed (made with the deltas: the commit's
    result and signals read them)."""
    changes: Tuple[CounterChange, ...] = field(init=False, compare=False, repr=False)
    """:attr:`counted` without the relations."""

    def __post_init__(self) -> None:
        counted = self.removed + self.added + self.changed
        object.__setattr__(self, "counted", counted)
        object.__setattr__(self, "changes", tuple([change for _, change in counted]))

    def of(self, kind: str) -> Tuple[CounterChange, ...]:
        """The changes of one kind (``"removed"``, ``"added"`` or ``"changed"``) without their relations."""
        pairs: Tuple[Counted, ...] = getattr(self, kind)
        return tuple(change for _, change in pairs)


NONE = Deltas()
"""A write that changes no counter."""


def deltas(relations: Sequence[Relation], before: Optional[Model], after: Optional[Model],
           gone: AbstractSet[Parent] = frozenset()) -> Deltas:
    """The changes of a write from ``before`` to ``after`` (PynamoDB's loaded views; ``None`` for absent), the
    parents in ``gone`` being rollups found gone.

    :raises ParentKeyError: a key function gave an unusable parent key.
    :raises ChildValueError: a ``when=`` or ``amount=`` function failed or gave an unusable value.
    """
    removed: List[Counted] = []
    added: List[Counted] = []
    changed: List[Counted] = []
    lost: List[CounterChange] = []
    for relation in relations:
        old = relation.changes(before, -1) if before is not None else []
        new = relation.changes(after, 1) if after is not None else []
        if old and new and (old[0].key, old[0].shard) == (new[0].key, new[0].shard):
            difference = old[0].delta + new[0].delta
            if difference:
                change = replace(new[0], delta=difference)
                if (change.parent, change.key) in gone:
                    lost.append(change)
                else:
                    changed.append((relation, change))
            continue
        for change in old:
            if (change.parent, change.key) in gone:
                lost.append(change)
            else:
                removed.append((relation, change))
        for change in new:
            added.append((relation, change))
    if not (removed or added or changed or lost):
        return NONE
    return Deltas(tuple(removed), tuple(added), tuple(changed), tuple(lost))


@dataclass(frozen=True)
class Counting:
    """What one counted write is counted from in an attempt: the commit's own record of it, never the caller's
    request (:class:`~pynamodb_counters.write._writes.Write`). Frozen: a recovery that learns otherwise returns
    another (``dataclasses.replace``), and the commit's unit of work takes it for the next attempt.

    :ivar basis: the stored child it counts from (as loaded, read, or learned from a refusal); ``None``: a save
      is a create, and a delete or an update does not know it yet.
    :ivar gone: the rollups (parent model, key) found gone: what the child counted in them is not sent.
    :ivar recreated: an edit whose child was deleted since it was loaded, sent as a create.
    :ivar expiry: it counts a child DynamoDB deleted by TTL: a parent found gone is left out, as a gone rollup.
    """

    basis: Optional[Stored] = None
    gone: FrozenSet[Parent] = frozenset()
    recreated: bool = False
    expiry: bool = False


@dataclass(frozen=True)
class Decision:
    """What :func:`decide` found for one counted write in one attempt.

    :ivar counting: what it was counted from.
    :ivar basis: the stored child its deltas compare with: the counting's, else, where none is known (a plan made
      before the commit reads the stored child, or a delete of an instance that names its parents), the instance
      as it would be stored; ``None`` for a create.
    :ivar after: a counted update's stored child once written (:attr:`basis` with the known actions applied).
    :ivar loaded: the child as PynamoDB will load it once written (``None`` for a delete or an expiry): what a
      save's or update's condition and a created parent's defaults read, never built twice.
    :ivar deltas: its changes.
    """

    counting: Counting
    basis: Optional[Stored]
    after: Optional[Stored] = None
    loaded: Optional[Model] = None
    deltas: Deltas = NONE

    @property
    def gone(self) -> FrozenSet[Parent]:
        """The rollups found gone that it leaves out (its counting's)."""
        return self.counting.gone


def counting_of(write: Write) -> Optional[Counting]:
    """A counted write's record, starting from what its instance remembers being stored as (loaded, or last
    saved as); ``None`` for a write that counts nothing."""
    if not write.kind.counted:
        return None
    assert write.instance is not None
    return Counting(basis=stored_of(write.instance, write.key), expiry=write.kind is WriteKind.EXPIRY)


def decide(write: Write, counting: Counting) -> Decision:
    """Decide ``write``'s changes for this attempt, from ``counting``: a save compares its
    basis (none for a create) with the instance as it will be stored, an update its basis with the basis and its
    known actions applied, a delete (or an expiry, in the relations counting its expiries) its basis with nothing.
    Where no basis is known (the commit reads the stored child first where it must), it is the instance as it would
    be stored: a delete of an instance built by hand that names its parents, or a plan shown before anything is
    read.

    :raises CountingBypassError: an update action whose result is not known before sending, on what decides the
      stored child's counts.
    :raises ParentKeyError: a key function gave an unusable parent key.
    :raises ChildValueError: a ``when=`` or ``amount=`` function failed or gave an unusable value.
    """
    assert write.instance is not None
    basis = counting.basis
    updated: Optional[Stored] = None
    after: Optional[Model] = None
    spec = write.spec
    relations = spec.relations
    if write.kind is WriteKind.EXPIRY:  # taken off from the stream's image, in the relations counting it there
        assert basis is not None
        relations = tuple(relation for relation in relations if relation.expiries == STREAM)
    elif write.kind is WriteKind.DELETE:
        if basis is None:
            basis = Stored.of_instance(write.instance)
    elif write.kind is WriteKind.UPDATE:
        if basis is None:  # a plan shown before the commit reads the stored child: the instance's own
            basis = Stored.of_instance(write.instance)
        updated = basis.updated(write.known)
        decided_by = deciding(write.model, basis.view, updated.view, spec=spec)
        for name in sorted(write.unknown.intersection(decided_by)):
            raise bypass_of(write.model, name)  # keys are refused before
        after = updated.view
    else:
        after = as_loaded(write.instance, spec)
    before = basis.view if basis is not None else None
    return Decision(counting, basis, updated, after, deltas(relations, before, after, counting.gone))


def names_parents(model: Type[Model], instance: Model, sign: int) -> bool:
    """Whether ``instance`` can name the parents of each of its relations (an instance built from its key alone
    cannot)."""
    try:
        for relation in relations_of(model):
            relation.changes(instance, sign)
    except (ParentKeyError, ChildValueError):
        return False
    return True
