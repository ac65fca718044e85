"""
What a counted child's write changes: :func:`deltas`, the one function that decides it, for a create, an edit
(a move included), an update and a delete alike, and :func:`decide`, which gives it the two states to compare
for one write (:class:`CountedFrom`: what the write is counted from in an attempt) and returns what it decided
(:class:`Decision`). No I/O, but not pure: :func:`deltas` runs the user's functions (each relation's key,
``when=`` and ``amount=``), once per state, from the relations as compiled (``declare._spec.RelationSpec``), and
records what they read where a condition needs it. Nothing is written: the records are frozen. What each write
of a transaction is counted from in an attempt (:class:`Attempt`) is the commit's unit of work's
(``_commit.UnitOfWork``): it alone replaces it between attempts, with what a recovery returns.

It compares, relation by relation, the stored child as PynamoDB loads it (``before``: ``None`` for a new child)
with the child as PynamoDB will load it once written (``after``: ``None`` for a delete):

* a relation the child starts counting for is **added** (a first count: the only change that may create a
  rollup);
* one it stops counting for is **removed**; a move to another parent is both;
* one whose parent stays and whose amount changes is **changed** by the difference (nothing when it is zero);
* what would be removed from, or changed in, a rollup found gone (expired) is **gone**: not sent, reported. A
  gone rollup stays gone for the children it counted; only a first count creates it again.

A stream record is compared so too, its old image with its new one (:func:`record_deltas`); where the child is
stored outside a parent's partition (:func:`by_partition`), those changes are counted with a marker of the record
(``_markers``), and a parent found missing is gone for them, first counts included (but a rollup's, which create
it).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import (
    TYPE_CHECKING,
    AbstractSet,
    Any,
    Dict,
    FrozenSet,
    List,
    Optional,
    Sequence,
    Set,
    Tuple,
    Type,
)

from .._keys import ItemId, key_of, serialize_key
from .._write_results import CounterChange
from ..declare._counting_rule import call_failed
from ..declare._expiry_rules import STREAM
from ..declare._relations import check_parent_defaults
from ..exceptions import ChildValueError, CounterError, ParentKeyError
from ._stored import Recorder, Stored, as_loaded, deciding_attributes, stored_of
from ._writes import Write, WriteKind, bypass_of, model_spec

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.models import Model

    from ..declare._spec import RelationSpec

__all__ = ["NONE", "Attempt", "CountedFrom", "Decision", "Deltas", "counted_from", "decide", "deltas",
           "feeder_entry_of", "names_parents", "parent_defaults"]

Counted = Tuple["RelationSpec", CounterChange]
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


def deltas(relations: Sequence[RelationSpec], before: Optional[Model], after: Optional[Model],
           gone: AbstractSet[Parent] = frozenset(), read: Optional[Set[str]] = None) -> Deltas:
    """The changes of a write from ``before`` to ``after`` (PynamoDB's loaded views; ``None`` for absent), the
    parents in ``gone`` being rollups found gone. Each relation's functions run once on each state.

    :param read: where given, the functions run on a :class:`~pynamodb_counters.write._stored.Recorder` of each
      state, which adds to it the names they read (and each relation's declared ``reads``): what decides the
      counts of either state, which a condition on the stored child must cover.
    :raises ParentKeyError: a key function gave an unusable parent key.
    :raises ChildValueError: a ``when=`` or ``amount=`` function failed or gave an unusable value.
    """
    removed: List[Counted] = []
    added: List[Counted] = []
    changed: List[Counted] = []
    lost: List[CounterChange] = []
    old = new = None
    reading_before = reading_after = None
    if read is not None:
        reading_before = None if before is None else Recorder(before, read)
        reading_after = None if after is None else Recorder(after, read)
    for relation in relations:
        if read is not None:
            read.update(relation.reads)
        if before is not None:
            old = change_of(relation, before, -1, reading_before)
        if after is not None:
            new = change_of(relation, after, 1, reading_after)
        if old is not None and new is not None and old.key == new.key and old.shard == new.shard:
            difference = old.delta + new.delta
            if difference:
                change = replace(new, delta=difference)
                if (change.parent, change.key) in gone:
                    lost.append(change)
                else:
                    changed.append((relation, change))
            continue
        if old is not None:
            if (old.parent, old.key) in gone:
                lost.append(old)
            else:
                removed.append((relation, old))
        if new is not None:
            added.append((relation, new))
    if not (removed or added or changed or lost):
        return NONE
    return Deltas(tuple(removed), tuple(added), tuple(changed), tuple(lost))


def record_deltas(before: Optional[Model], after: Optional[Model], gone: AbstractSet[Parent] = frozenset()
                  ) -> Deltas:
    """The changes a stream record makes in the relations counted from the stream (``counting="stream"``): from
    the child in its old image to the child in its new one (``None`` where absent), as :func:`deltas` makes them;
    a child of another class now (a polymorphic model's) is removed as the old and added as the new. What goes into
    a parent in ``gone`` (found missing) is gone, first counts included, but where they create it (a rollup's).

    :raises ParentKeyError: a key function gave an unusable parent key.
    :raises ChildValueError: a ``when=`` or ``amount=`` function failed or gave an unusable value.
    """
    if before is not None and after is not None and type(before) is not type(after):  # another class now
        old = deltas(model_spec(type(before)).stream_counting, before, None, gone)
        new = deltas(model_spec(type(after)).stream_counting, None, after, gone)
        found = Deltas(old.removed, new.added, (), old.gone)
    else:
        child = after if after is not None else before
        assert child is not None
        found = deltas(model_spec(type(child)).stream_counting, before, after, gone)
    if not gone:
        return found
    lost = tuple((relation, change) for relation, change in found.added
                 if (change.parent, change.key) in gone and not relation.create_parent)
    if not lost:
        return found
    return Deltas(found.removed, tuple(pair for pair in found.added if pair not in lost), found.changed,
                  found.gone + tuple(change for _, change in lost))


def by_partition(found: Deltas, child: Model) -> Tuple[Deltas, Deltas]:
    """``found`` split in two: the changes into parents in ``child``'s partition (their hash key is the child's),
    and the changes into parents outside it.

    :raises ParentKeyError: a parent key the parent model cannot hold.
    """
    own = serialize_key(type(child), key_of(child))[0]

    def inside(change: CounterChange) -> bool:
        return bool(serialize_key(change.parent, change.key)[0] == own)

    def part(keep: bool) -> Deltas:
        def kept(pairs: Tuple[Counted, ...]) -> Tuple[Counted, ...]:
            return tuple(pair for pair in pairs if inside(pair[1]) is keep)

        return Deltas(kept(found.removed), kept(found.added), kept(found.changed),
                      tuple(change for change in found.gone if inside(change) is keep))

    return part(True), part(False)


def change_of(relation: RelationSpec, child: Model, sign: int, reader: Optional[Any] = None
              ) -> Optional[CounterChange]:
    """The change that adding (``sign=+1``) or removing (``-1``) ``child`` makes through ``relation``, ``None``
    where its ``when=`` says it does not count: the relation's counting rule
    (``declare._counting_rule.CountingRule.change``), its functions run on ``reader`` (a recorder of ``child``)
    where given, else on ``child``.

    :raises ParentKeyError: the key function failed, or gave the wrong shape or a missing value.
    :raises ChildValueError: ``when=`` or ``amount=`` failed or gave something else than a bool or an int.
    """
    return relation.rule.change(child, sign, reader)


def feeder_entry_of(relation: RelationSpec) -> str:
    """The entry a counted write through ``relation`` records in its parent's feeder set: as compiled, unless a
    model's table was renamed since (PynamoDB follows a ``Meta.table_name`` changed at run time), then as the
    declaration gives it now."""
    child = relation.relation.declared_on
    if relation.tables == (relation.parent_model.Meta.table_name, child.Meta.table_name):  # type: ignore
        return relation.feeder_entry
    return relation.relation.feeder_entry


def parent_defaults(relation: RelationSpec, child: Model) -> Dict[str, Any]:
    """The attributes, by Python name, that a parent created by ``child``'s count starts with (set only where
    absent): ``parent_defaults=(child)``, or none.

    :raises ChildValueError: the function failed, or returned something other than a dict of the parent's
      attributes.
    """
    function = relation.parent_defaults
    if function is None:
        return {}
    try:
        defaults: Dict[str, Any] = function(child)
    except Exception as error:  # a user function: any failure means the child cannot be counted
        raise call_failed(relation, "parent_defaults", child, error) from error
    check_parent_defaults(relation, defaults)
    return defaults


@dataclass(frozen=True)
class CountedFrom:
    """What one counted write is counted from in an attempt: the commit's own record of it, never the caller's
    request (:class:`~pynamodb_counters.write._writes.Write`). Frozen: a recovery that learns otherwise returns
    another (``dataclasses.replace``), and the commit's unit of work takes it for the next attempt.

    :ivar basis: the stored child it counts from (as loaded, read, or learned from a refusal); ``None``: a save
      is a create, and a delete or an update does not know it yet.
    :ivar gone: the rollups (parent model, key) found gone: what the child counted in them is not sent.
    :ivar recreated: an edit whose child was deleted since it was loaded, sent as a create.
    :ivar marked: it counts a stream record with its marker (a child DynamoDB deleted by TTL, or one counted from
      the stream outside its parent's partition): a parent found gone is left out, as a gone rollup.
    """

    basis: Optional[Stored] = None
    gone: FrozenSet[Parent] = frozenset()
    recreated: bool = False
    marked: bool = False


@dataclass(frozen=True)
class Decision:
    """What :func:`decide` found for one counted write in one attempt.

    :ivar counting: what it was counted from.
    :ivar basis: the stored child its deltas compare with: the counting's, else, where none is known (a plan made
      before the commit reads the stored child, or a delete of an instance that names its parents), the instance
      as it would be stored; ``None`` for a create.
    :ivar after: a counted update's stored child once written (:attr:`basis` with the known actions applied).
    :ivar loaded: the child as PynamoDB will load it once written (``None`` for a delete or an expiry; a stream
      record's new image, ``None`` for a ``REMOVE``): what a
      save's or update's condition and a created parent's defaults read, never built twice.
    :ivar deltas: its changes.
    :ivar decided_by: the non-key attributes that decided them, as the relations' functions read them on the
      states compared (and declared with ``reads=``): what the child's own action is conditioned on (the stored
      child still holds what the basis holds for each). ``None`` where no condition needs them (a create).
    """

    counting: CountedFrom
    basis: Optional[Stored]
    after: Optional[Stored] = None
    loaded: Optional[Model] = None
    deltas: Deltas = NONE
    decided_by: Optional[Tuple[str, ...]] = None

    @property
    def gone(self) -> FrozenSet[Parent]:
        """The rollups found gone that it leaves out (its counting's)."""
        return self.counting.gone


@dataclass(frozen=True)
class Attempt:
    """What an attempt of a commit counts from: the state of the commit's unit of work (``_commit.UnitOfWork``), frozen,
    replaced whole by what the recoveries return.

    :ivar countings: what each write is counted from (``None`` for one that counts nothing), by its position.
    :ivar left_out: the writes left out (not sent again), by position, each with the error that left it out.
    :ivar floors: the lowest change each counter of a parent item may take (its item, the counter's Python name,
      minus what it held), where stream records would take it below zero: the rest is left out.
    """

    countings: Tuple[Optional[CountedFrom], ...]
    left_out: Tuple[Tuple[int, CounterError], ...] = ()
    floors: Tuple[Tuple[ItemId, str, int], ...] = ()

    @property
    def out(self) -> FrozenSet[int]:
        """The positions of the writes left out."""
        return frozenset(position for position, _ in self.left_out)

    def learned(self, changes: Dict[int, Dict[str, Any]]) -> Optional[Attempt]:
        """This attempt with the countings at the positions in ``changes`` replaced (each with its fields changed
        as given); ``None`` when there is nothing to change: a recovery that learned nothing does not apply."""
        if not changes:
            return None
        countings = list(self.countings)
        for position, fields in changes.items():
            counting = countings[position]
            assert counting is not None
            countings[position] = replace(counting, **fields)
        return replace(self, countings=tuple(countings))


def counted_from(write: Write) -> Optional[CountedFrom]:
    """A counted write's record, starting from what its instance remembers being stored as (loaded, or last
    saved as); ``None`` for a write that counts nothing."""
    if not write.kind.counted:
        return None
    assert write.instance is not None
    return CountedFrom(basis=stored_of(write.instance, write.key), marked=write.kind.marked)


def decide(write: Write, counting: CountedFrom) -> Decision:
    """Decide ``write``'s changes for this attempt, from ``counting``: a save compares its
    basis (none for a create) with the instance as it will be stored, an update its basis with the basis and its
    known actions applied, a delete (or an expiry, in the relations counting its expiries) its basis with nothing,
    a stream record counted outside its parent's partition its images, those changes alone (:func:`by_partition`).
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
    relations = spec.counting
    if write.kind is WriteKind.STREAMED:  # from its record's images: whatever decides the counts, no condition
        before, after = write.images
        found = by_partition(record_deltas(before, after, counting.gone), write.instance)[1]
        return Decision(counting, basis, None, after, found)
    if write.kind is WriteKind.EXPIRY:  # taken off from the stream's image, in the relations counting it there
        assert basis is not None
        relations = tuple(relation for relation in relations if relation.expiries == STREAM)
    elif write.kind is WriteKind.DELETE:
        if basis is None:
            basis = Stored.of_instance(write.instance, spec)
    elif write.kind is WriteKind.UPDATE:
        if basis is None:  # a plan shown before the commit reads the stored child: the instance's own
            basis = Stored.of_instance(write.instance, spec)
        updated = basis.updated(write.known)
        after = updated.view
    else:
        after = as_loaded(write.instance, spec)
    before = basis.view if basis is not None else None
    if before is None or write.kind is WriteKind.EXPIRY:  # a create's Put is conditioned on no stored child, an
        # expiry's marker on no marker: whatever decides the counts
        return Decision(counting, basis, updated, after, deltas(relations, before, after, counting.gone))
    read: Set[str] = set()
    try:
        found = deltas(relations, before, after, counting.gone, read)
    finally:
        decided_by = deciding_attributes(write.model, read)
        for name in sorted(write.unknown.intersection(decided_by)):
            raise bypass_of(write.model, name)  # keys are refused before
    return Decision(counting, basis, updated, after, found, decided_by)


def names_parents(model: Type[Model], instance: Model, sign: int) -> bool:
    """Whether ``instance`` can name the parents of each of its relations (an instance built from its key alone
    cannot)."""
    try:
        for relation in model_spec(model).counting:
            change_of(relation, instance, sign)
    except (ParentKeyError, ChildValueError):
        return False
    return True
