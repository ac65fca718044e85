"""
Children written by anyone, counted from the table's stream: :func:`count_stream`.

Each ``INSERT``, ``MODIFY`` and ``REMOVE`` record of a child of a relation declared ``counting="stream"`` is
counted as the library's own save, edit (a move included) or delete would count it: :func:`~pynamodb_counters.
write._deltas.deltas` compares the old image with the new, as PynamoDB loads them. The changes of a batch are
gathered per parent item (a shard item for a sharded counter), in stream order, and each parent item gets one
UpdateItem: every counter's changes added up, ``_cseq`` and the feeder records as a counted write's update, and
the **mark** of the records it counts (``_cstream:<child table>``: the last one's sequence number), on the
condition that the stored mark is older than the first of them.

Why that is exact: the children counted into a parent are stored in its partition (their hash key is the
parent's), and DynamoDB Streams gives the records of one partition key in order, each with a greater sequence
number than the one before, across a shard and its child shards too. A parent's mark therefore says which of its
records were counted: a batch delivered again, a record repeated, a redelivery from the record named, a batch
bisected, a crash between the update and Lambda's checkpoint, or concurrent batches of other partition keys all
find it, and the records it holds are left out (the update is sent again for the rest, its condition then being
that the mark is still the one found). It is one attribute per child table on each parent item, never more.

Where the update's condition fails for another reason: a parent that does not exist (not a rollup its first
count creates) leaves its changes out, said in the result; a decrement below zero takes off what the counter
holds (it had drifted) and says what it left out. Neither blocks the stream.

A change into a parent outside the child's partition cannot be ordered by a mark: the parent's other records are
of other partition keys, in other shards, in no order with it. Such changes are counted with a marker of their
record instead (``_markers``, as ``count_expiries`` counts an expiry): the record's marker, create-only, and the
parents' changes, merged per parent item, in one TransactWriteItems, never setting nor checking a mark. A move
between a parent in the partition and one outside counts each part its own way. A child model whose table cannot
hold a marker that expires (no ``TTLAttribute``, or a hash key that is not a string) stops the batch at the
record, nothing written for it.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Sequence,
    Set,
    Tuple,
    Type,
    Union,
)

from pynamodb.exceptions import PynamoDBException

from .._costs import item_bytes, write_units
from .._keys import ItemId, item_id, key_of
from .._write_results import CounterChange
from ..declare._expiry_rules import MARKER, STREAM, check_record_markers
from ..declare._shards import shard_key
from ..declare._spec import RelationSpec, check_told_apart, spec_of
from ..declare._stored_names import PROBE, stream_mark_name
from ..exceptions import (
    ChildValueError,
    ConfigurationError,
    CounterError,
    CounterUnderflowError,
    InvalidArgumentError,
    ParentKeyError,
    ParentNotFoundError,
)
from ..signals import child_added, child_changed, child_removed, send_safely
from ..write._actions import CHECK_FAILED, Cancellation, ParentUpdate, StreamMark, item_of
from ..write._commit import policy_of
from ..write._deltas import NONE, Deltas, by_partition, feeder_entry_of, parent_defaults, record_deltas
from ..write._markers import streamed_write
from ..write._send import RetryPolicy, send_update
from ._expiries import count_expiries
from ._markers import Marked, MarkedOutcome, commit_marked, marked
from ._records import check_named, check_tables, load, models_of, padded, records_of, table_of
from ._results import ExpiryResult, Skipped, SkipReason, StreamResult

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.models import Model

__all__ = ["count_stream", "record_changes"]

logger = logging.getLogger("pynamodb_counters.streams")

_IMAGES = {"INSERT": ("NewImage",), "MODIFY": ("OldImage", "NewImage"), "REMOVE": ("OldImage",)}
"""The images each kind of record needs to be counted."""

_KINDS = ("removed", "added", "changed")


@dataclass(frozen=True)
class _Record:
    """One record to count: its identity, its child (as written, or as deleted), its changes into parents in the
    child's partition (counted by their marks) and, where it has changes into parents outside it, their marked
    write."""

    event: str
    sequence: str
    mark: str
    child: Any
    found: Deltas
    outside: Optional[Marked] = None


Entry = Tuple[_Record, RelationSpec, CounterChange, str]
"""One change a record makes in a parent item: the record, the relation, the change and its kind."""


@dataclass
class _Target:
    """Every change the records of a batch make in one parent item, in stream order."""

    model: Type[Any]
    key: Tuple[Any, ...]
    shard: int
    where: ItemId
    counted: List[Entry] = field(default_factory=list)


def count_stream(event: Union[Mapping[str, Any], Sequence[Mapping[str, Any]]], models: Iterable[Type[Model]], *,
                 table: Optional[str] = None, retry: Optional[RetryPolicy] = None) -> StreamResult:
    """Count the children of ``models`` from stream records, exactly once, whoever wrote them: every relation
    declared ``counting="stream"``, and the deletions by TTL of relations declared ``expiries="stream"``
    (:func:`count_expiries`), so that one Lambda serves a table.

    :param event: a Lambda event of a DynamoDB stream (``{"Records": [...]}``), or its records (as ``GetRecords``
      returns them), in stream order. The stream's view type is ``NEW_AND_OLD_IMAGES``.
    :param models: the child models to count (a polymorphic model's subclasses are found from the images).
    :param table: the records' table, where they do not name it (``GetRecords``'s have no ``eventSourceARN``);
      needed only when ``models`` are in several tables.
    :param retry: the retry policy of each update (else the first model's ``Meta.counter_retry``).
    :returns: :class:`StreamResult`, Lambda's partial batch response (``ReportBatchItemFailures``): on a failure,
      Lambda delivers again from the first record not applied, and what was counted of it and of the records
      after it is not counted again. A record counting into a parent outside the child's partition is counted
      with a marker of its own; where the child's model cannot hold one that expires (no ``TTLAttribute``, or a
      hash key that is not a string), the batch stops at that record with a
      :exc:`~pynamodb_counters.exceptions.ConfigurationError` as its error, nothing written for it.
    :raises InvalidArgumentError: ``event`` is not a stream event, ``models`` are not children counted from the
      stream (or whose expiries are), or records that name no table are given without ``table=`` for models in
      several tables. Nothing was written.
    :raises ConfigurationError: a model of ``models`` whose items nothing tells from another model's of its table
      (given with it, or loaded: see "Which model an item is" on the "Counting from the stream" page), or a record
      of a table of ``models`` without the images it needs (the stream's view type is ``KEYS_ONLY``, ``NEW_IMAGE``
      or ``OLD_IMAGE``). Nothing was written.
    """
    records = records_of(event, "count_stream")
    given = _models(models)
    check_named(records, given, table, "count_stream")
    check_tables(records, given, table, "count_stream")
    streamed = tuple(model for model in given if spec_of(model).streamed)
    expiring = tuple(model for model in given
                     if any(relation.expiries == STREAM for relation in spec_of(model).relations))
    found, skipped, stop = _classify(records, streamed, table)
    if expiring:
        expiries: Optional[ExpiryResult] = count_expiries(records, expiring, table=table, retry=retry)
    else:
        expiries = None
    policy = policy_of(given, retry)
    position = _positions(records, lambda record: str(record["eventID"]))
    by_sequence = _positions(records, lambda record: str(record["dynamodb"].get("SequenceNumber", "")))
    outcome = _Outcome()
    for target in _targets(found):
        try:
            _count_into(target, policy, outcome)
        except (CounterError, PynamoDBException) as refused:
            first = target.counted[0][0]
            if stop is None or position[first.event] < position[stop[0]]:
                stop = (first.event, first.sequence, refused)
    done = commit_marked([record.outside for record in found if record.outside is not None], retry)
    _counted_with_markers(done, outcome)
    if done.stop is not None and (stop is None or position[done.stop[0]] < position[stop[0]]):
        stop = done.stop
    counted = [record.event for record in found if record.event in outcome.applied]
    for record in found:
        if record.event in outcome.applied or (stop is not None and
                                               position[record.event] >= position[stop[0]]):
            continue
        reason = SkipReason.COUNTED_ALREADY if record.event in outcome.seen else SkipReason.PARENT_MISSING
        skipped.append(Skipped(record.event, record.sequence, reason))
    if expiries is not None:  # what count_expiries took off is not skipped
        skipped = [record for record in skipped if record.event not in expiries.counted]
    failure_at, error = (None, None) if stop is None else (stop[1], stop[2])
    if expiries is not None and expiries.error is not None:
        expiry_failure = expiries["batchItemFailures"][0]["itemIdentifier"]
        if failure_at is None or by_sequence.get(expiry_failure, len(records)) < \
                by_sequence.get(failure_at, len(records)):
            failure_at, error = expiry_failure, expiries.error
    result = StreamResult(failure_at, counted, skipped, outcome.changes, outcome.missing, outcome.floored,
                          outcome.updates, outcome.write_units, outcome.consumed_capacity, expiries, error)
    if error is not None:
        logger.error("count_stream: stream record %s and the records after it were not applied: %s", failure_at,
                     error)
    _signal(found, outcome, result)
    return result


def _models(models: Iterable[Type[Model]]) -> Tuple[Type[Model], ...]:
    """``models``, checked.

    :raises InvalidArgumentError: not children counted from the stream, nor whose expiries are.
    """
    given = models_of(models, "count_stream", "Like")
    for model in given:
        spec = spec_of(model) if isinstance(model, type) else None
        if spec is None or not (spec.streamed or any(relation.expiries == STREAM for relation in spec.relations)):
            raise InvalidArgumentError(f"count_stream(models=...): {model!r} is not a child counted from the stream "
                                       f"(a model with a relation declared counted_by(..., counting='stream'), or "
                                       f"expiries='stream'). Nothing was written")
    check_told_apart(given, "count_stream")
    return given


def _classify(records: Sequence[Mapping[str, Any]], models: Tuple[Type[Model], ...], table: Optional[str]
              ) -> Tuple[List[_Record], List[Skipped], Optional[Tuple[str, str, BaseException]]]:
    """The records to count, in stream order, each once; the records skipped; and the first record whose changes
    cannot be computed (a ``key=``, ``when=`` or ``amount=`` that fails on its images), where the batch stops.

    :raises ConfigurationError: a record of a table of ``models`` without the images it needs.
    """
    tables = {model.Meta.table_name for model in models}
    found: List[_Record] = []
    skipped: List[Skipped] = []
    seen: Set[str] = set()
    stop: Optional[Tuple[str, str, BaseException]] = None
    for record in records:
        change = record["dynamodb"]
        event, sequence = str(record["eventID"]), str(change.get("SequenceNumber", ""))
        named = table_of(record, table)
        if not models or named is not None and named not in tables:
            skipped.append(Skipped(event, sequence, SkipReason.UNKNOWN))
            continue
        _check_images(record, named or next(iter(tables)))
        if stop is not None:
            continue  # its images are checked, so that nothing is written where one lacks them
        try:
            counted = _record(record, models, named)
        except (ParentKeyError, ChildValueError, ConfigurationError) as error:
            stop = (event, sequence, error)
            continue
        if isinstance(counted, Skipped):
            skipped.append(counted)
        elif counted.event in seen:
            skipped.append(Skipped(event, sequence, SkipReason.REPEATED))
        else:
            seen.add(counted.event)
            found.append(counted)
    return found, skipped, stop


def _check_images(record: Mapping[str, Any], table: str) -> None:
    """Refuse a record without the images its kind needs.

    :raises ConfigurationError: naming the stream's view type and what it must be.
    """
    change = record["dynamodb"]
    view = change.get("StreamViewType")
    wanted = _IMAGES.get(str(record.get("eventName")), ())
    if (view is not None and view != "NEW_AND_OLD_IMAGES") or any(image not in change for image in wanted):
        kind = str(record.get("eventName"))
        article = "an" if kind[:1] in "AEIOU" else "a"
        missing = " and ".join(wanted) or "its images"
        shown = view or "KEYS_ONLY, NEW_IMAGE or OLD_IMAGE"
        raise ConfigurationError(f"stream record {record['eventID']} of {table} is {article} {kind} without "
                                 f"{missing}: the stream's view type is {shown}. A relation counted from the stream "
                                 f"compares the old image with the new: set the view type to NEW_AND_OLD_IMAGES "
                                 f"(see the 'Counting from the stream' page). Nothing was written")


def _record(record: Mapping[str, Any], models: Tuple[Type[Model], ...], named: Optional[str]
            ) -> Union[_Record, Skipped]:
    """What ``record`` counts, or why it is skipped.

    :raises ParentKeyError: a key function gave an unusable parent key.
    :raises ChildValueError: a ``when=`` or ``amount=`` function failed or gave an unusable value.
    :raises ConfigurationError: it counts into a parent outside the child's partition, and the child's table cannot
      hold a marker that expires.
    """
    compared = _compared(record, models, named)
    if isinstance(compared, Skipped):
        return compared
    event, sequence, child = compared.event, compared.sequence, compared.child
    if not compared.outside.counted:
        return _Record(event, sequence, padded(sequence), child, compared.inside)
    relation, change = compared.outside.counted[0]
    check_record_markers(type(child), f"{relation} ({type(child).__name__} {key_of(child)!r} counts into "
                                      f"{relation.parent_model.__name__} {change.key!r})")
    write = streamed_write(compared.before, compared.after, event)
    return _Record(event, sequence, padded(sequence), child, compared.inside,
                   marked(event, sequence, write, compared.outside.changes))


@dataclass(frozen=True)
class _Compared:
    """A record's child in its old image and its new one (``None`` where absent), and its changes: into parents
    in the child's partition (``inside``) and outside it."""

    event: str
    sequence: str
    before: Optional[Model]
    after: Optional[Model]
    child: Model
    inside: Deltas
    outside: Deltas


def _compared(record: Mapping[str, Any], models: Tuple[Type[Model], ...], named: Optional[str]
              ) -> Union[_Compared, Skipped]:
    """``record``'s images loaded and compared, or why it is skipped.

    :raises ParentKeyError: a key function gave an unusable parent key.
    :raises ChildValueError: a ``when=`` or ``amount=`` function failed or gave an unusable value.
    """
    change = record["dynamodb"]
    event, sequence = str(record["eventID"]), str(change.get("SequenceNumber", ""))
    kind = str(record.get("eventName"))
    old = change.get("OldImage") if kind in ("MODIFY", "REMOVE") else None
    new = change.get("NewImage") if kind in ("INSERT", "MODIFY") else None
    if any(image is not None and MARKER in image for image in (old, new)):
        return Skipped(event, sequence, SkipReason.A_MARKER)
    if any(image is not None and PROBE in image for image in (old, new)):
        return Skipped(event, sequence, SkipReason.A_PROBE)
    before = load(old, models, named) if old is not None else None
    after = load(new, models, named) if new is not None else None
    if before is None and after is None:
        return Skipped(event, sequence, SkipReason.UNKNOWN)
    found = record_deltas(before, after)
    if found is NONE or not found.counted:
        return Skipped(event, sequence, SkipReason.NOT_STREAMED)
    child = after if after is not None else before
    assert child is not None
    inside, outside = by_partition(found, child)
    return _Compared(event, sequence, before, after, child, inside, outside)


def record_changes(record: Mapping[str, Any], models: Tuple[Type[Model], ...], table: Optional[str]
                   ) -> Tuple[Tuple[RelationSpec, CounterChange], ...]:
    """The counter changes :func:`count_stream` counts for ``record`` (a stream record of ``table``) into parents
    in the child's partition, by their marks, each with its relation: every relation of ``models`` declared
    ``counting="stream"``, compared from its images; none for a record it skips. An audit reads them to tell what
    the records still waiting for the handler will change (it makes no marked write for the changes outside the
    partition).

    :raises ParentKeyError: a key function gave an unusable parent key.
    :raises ChildValueError: a ``when=`` or ``amount=`` function failed or gave an unusable value.
    :raises AmbiguousItemError: an image fits two of ``models``.
    """
    compared = _compared(record, models, table)
    return () if isinstance(compared, Skipped) else compared.inside.counted


def _targets(found: Sequence[_Record]) -> List[_Target]:
    """Every parent item the records change, with its changes in stream order."""
    targets: Dict[ItemId, _Target] = {}
    for record in found:
        for kind in _KINDS:
            for relation, change in getattr(record.found, kind):
                model = relation.parent_model
                where = item_of(model, relation.parent_spec, shard_key(change.key, change.shard))
                target = targets.get(where)
                if target is None:
                    target = targets[where] = _Target(model, change.key, change.shard, where)
                target.counted.append((record, relation, change, kind))
    return list(targets.values())


@dataclass
class _Outcome:
    """What the updates of one call did."""

    applied: Dict[str, List[Tuple[str, CounterChange]]] = field(default_factory=dict)
    seen: Set[str] = field(default_factory=set)
    changes: List[CounterChange] = field(default_factory=list)
    missing: List[CounterChange] = field(default_factory=list)
    floored: List[CounterChange] = field(default_factory=list)
    updates: int = 0
    write_units: float = 0.0
    consumed_capacity: List[Mapping[str, Any]] = field(default_factory=list)


def _count_into(target: _Target, policy: Optional[RetryPolicy], outcome: _Outcome) -> None:
    """Send the update of one parent item: the changes of the records its marks do not hold yet, each counter's
    added up. A failed condition is read from the item it returns: records a relation's mark holds already are left
    out and the rest sent again; a parent that does not exist leaves its changes out, but a rollup's first counts,
    which create it again (what came before them in the batch went with it); a decrement below zero takes off what
    the counter holds.

    :raises CounterError: an update DynamoDB refused otherwise, or whose retries ran out.
    """
    pending = list(target.counted)
    stored: Dict[str, str] = {}  # a relation's mark found stored, where the update counts the records after it
    floors: Dict[str, int] = {}
    gone = False  # a rollup found gone: created again by its first counts, and still absent
    spec = pending[0][1].parent_spec
    for _ in range(len(pending) + len(spec.counters) + 4):  # each round leaves out a record or floors a counter
        if not pending:
            return
        update = _update(target, pending, stored, floors, gone)
        sent = send_update(target.model, update.request(""), policy=policy)
        outcome.updates += 1
        if sent.response is not None:
            _applied(target, pending, update, floors, sent.response, outcome)
            return
        item = sent.refused or {}
        outcome.write_units += write_units(item_bytes(item))  # a failed condition consumes its write units too
        found = _marks_found(item, pending)
        ahead = {name: mark for name, mark in found.items() if mark >= _first(pending, name)}
        if ahead:
            kept = [entry for entry in pending if entry[0].mark > ahead.get(_mark_of(entry), "")]
            held = {entry[0].event for entry in kept}
            outcome.seen.update(entry[0].event for entry in pending if entry[0].event not in held)
            pending = kept
            stored.update(ahead)
            continue
        if gone and item:  # created again meanwhile, by another batch's first count: counted into as it is
            gone, floors = False, {}
            continue
        error = update.condition_error(Cancellation(CHECK_FAILED, item or None, (), None))
        if isinstance(error, ParentNotFoundError):
            first = next((n for n, entry in enumerate(pending) if entry[3] == "added"), None) \
                if update.rollup and not gone else None
            outcome.missing.extend(_summed(entry[2] for entry in pending[:first]))
            if first is None:
                return
            pending, gone = pending[first:], True
            floors = {entry[2].attribute: 0 for entry in pending}  # a rollup created again holds nothing before
            continue
        if isinstance(error, CounterUnderflowError) and error.attribute is not None:
            held_count = error.stored if isinstance(error.stored, int) and error.stored > 0 else 0
            floors[error.attribute] = -held_count
            stored.update(found)
            continue
        raise error
    raise CounterError(f"count_stream: the update of {target.model.__name__} {target.key!r} kept being refused; "
                       f"nothing was counted into it")


def _mark_of(entry: Entry) -> str:
    """The name of the mark of the relation an entry counts through."""
    return stream_mark_name(feeder_entry_of(entry[1]))


def _first(pending: Sequence[Entry], name: str) -> str:
    """The first record ``pending`` counts through the relation of the mark ``name``."""
    return next(entry[0].mark for entry in pending if _mark_of(entry) == name)


def _marks_found(item: Mapping[str, Any], pending: Sequence[Entry]) -> Dict[str, str]:
    """The marks stored on ``item`` (a refused update's) of the relations ``pending`` counts through."""
    found: Dict[str, str] = {}
    for name in dict.fromkeys(_mark_of(entry) for entry in pending):
        value = (item.get(name) or {}).get("S")
        if value is not None:
            found[name] = str(value)
    return found


def _update(target: _Target, pending: Sequence[Entry], stored: Mapping[str, str], floors: Mapping[str, int],
            gone: bool) -> ParentUpdate:
    """The update of ``target`` counting ``pending``, its counters floored as ``floors`` says, each relation's mark
    set to its last record, on the condition that it holds ``stored`` (or no record of the update yet). A rollup
    is created by the update whose first change is a first count (none before it is taken off a rollup that may
    be gone), and, ``gone``, only while it is still absent."""
    relation = pending[0][1]
    totals: Dict[str, int] = {}
    feeders: Set[str] = set()
    rollup = all(entry[1].create_parent for entry in pending)
    creates = rollup and pending[0][3] == "added"
    defaults = parent_defaults(relation, pending[0][0].child) if creates else None
    marks: Dict[str, List[str]] = {}
    for record, counting, change, _ in pending:
        totals[change.attribute] = totals.get(change.attribute, 0) + change.delta
        entry = feeder_entry_of(counting)
        feeders.add(entry)
        marks.setdefault(stream_mark_name(entry), []).append(record.mark)
    for name, floor in floors.items():
        if totals.get(name, 0) < floor:
            totals[name] = floor
    return ParentUpdate(target.model, target.key, target.shard, target.where, relation, relation.parent_spec, totals,
                        feeders, rollup=rollup, creates=creates, defaults=defaults, absent=gone and creates,
                        marks=tuple(StreamMark(name, held[0], held[-1], stored.get(name))
                                    for name, held in marks.items()))


def _applied(target: _Target, pending: Sequence[Entry],
             update: ParentUpdate, floors: Mapping[str, int], response: Mapping[str, Any], outcome: _Outcome) -> None:
    """Record what an update applied: its records' changes, what floors left out, and its cost."""
    _merged((entry[2] for entry in pending), update, outcome)
    for record, _, change, kind in pending:
        outcome.applied.setdefault(record.event, []).append((kind, change))
    outcome.write_units += write_units(item_bytes(response.get("Attributes") or {}))
    if response.get("ConsumedCapacity"):
        outcome.consumed_capacity.append(response["ConsumedCapacity"])


def _counted_with_markers(done: MarkedOutcome, outcome: _Outcome) -> None:
    """Record what the transactions of the records counted with markers did: the records found counted already,
    each record's changes applied and left out (a parent missing), each parent item's merged changes and floors,
    and their cost by the library's cost model (a transactional write: twice the units of each item written; a
    parent's Update, whose item a transaction does not return, as an item of its key alone, 2 units up to 1 KB)."""
    outcome.seen.update(record.event for record in done.found)
    for chunk, committed in done.committed:
        for record, decision in zip(chunk, committed.plan.decisions):
            if decision is None:  # left out: counted already
                continue
            applied = [(kind, change) for kind in _KINDS for change in decision.deltas.of(kind)]
            if applied:  # else every parent it counts into is missing
                outcome.applied.setdefault(record.event, []).extend(applied)
            outcome.missing.extend(decision.deltas.gone)
        into: Dict[ItemId, List[CounterChange]] = {}
        for change in committed.result.changes:
            into.setdefault(item_id(change.parent, shard_key(change.key, change.shard)), []).append(change)
        for action, item in zip(committed.plan.actions, committed.plan.items):
            if isinstance(action, ParentUpdate):
                outcome.updates += 1
                _merged(into.get(action.where, ()), action, outcome)
            request = next(iter(item.values()))
            outcome.write_units += write_units(item_bytes(request.get("Item") or request["Key"]), transactional=True)
        outcome.consumed_capacity.extend(committed.result.consumed_capacity)


def _merged(changes: Iterable[CounterChange], update: ParentUpdate, outcome: _Outcome) -> None:
    """Record the changes one update applied to its parent item: ``changes`` added up per counter, as far as the
    update's floors let them (the rest floored)."""
    for change in _summed(changes):
        sent = update.deltas.get(change.attribute, change.delta)
        if sent != change.delta:
            outcome.floored.append(replace(change, delta=change.delta - sent))
        if sent:
            outcome.changes.append(replace(change, delta=sent))


def _summed(changes: Iterable[CounterChange]) -> List[CounterChange]:
    """``changes`` of one parent item, one per counter, added up."""
    totals: Dict[str, CounterChange] = {}
    for change in changes:
        held = totals.get(change.attribute)
        totals[change.attribute] = change if held is None else replace(held, delta=held.delta + change.delta)
    return list(totals.values())


def _signal(found: Sequence[_Record], outcome: _Outcome, result: StreamResult) -> None:
    """``child_removed``, ``child_added`` and ``child_changed`` for each record counted, with its changes
    applied."""
    if not (child_removed.receivers or child_added.receivers or child_changed.receivers):
        return
    for record in found:
        applied = outcome.applied.get(record.event)
        if not applied:
            continue
        for signal, kind in ((child_removed, "removed"), (child_added, "added"), (child_changed, "changed")):
            changes = tuple(change for made, change in applied if made == kind)
            if changes:
                send_safely(signal, type(record.child), instance=record.child, changes=changes,
                            consumed_capacity=(), result=result)


def _positions(records: Sequence[Mapping[str, Any]], field: Callable[[Mapping[str, Any]], str]) -> Dict[str, int]:
    """Where each record first appears in the batch, by ``field`` (its ``eventID`` or its sequence number)."""
    found: Dict[str, int] = {}
    for index, record in enumerate(records):
        found.setdefault(field(record), index)
    return found
