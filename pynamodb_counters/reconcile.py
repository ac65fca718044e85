"""
Audit counters against their children, and repair the drifted ones while the application keeps writing.

::

    report = audit(Post.like_tally, parents=[("POST#a91f", "META")])   # or a Scan: limit=, key_prefix=, segments=
    for drift in report.drifts:
        print(drift.key, drift.stored, drift.actual)
    repair(report.drifts)

An audit returns data, never logs: one :class:`Drift` per counter that differs from the number of its children
(a stored value that is not a whole number included), one :class:`Unverifiable` per parent fed by a relation
this process has not loaded (every counted write records the relations feeding the counters it changes, see
``_cfeed``), and totals. A repair applies only the difference, and only if
neither the counter nor the parent's counted-write sequence moved since they were observed; otherwise it
recounts that parent and tries again. A like that lands
during a repair is never lost or counted twice, and a parent fed by a relation that is not loaded is refused.

Children are counted by each relation feeding the counter: a strongly consistent ``Select=COUNT`` Query of the
parent's partition for ``counted_by(..., prefix="LIKE#")``, or the caller's ``counted_by(..., children=f)``.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Dict, FrozenSet, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from pynamodb.constants import COUNT
from pynamodb.exceptions import UpdateError

from ._audit_rules import audited, counted_classes, expired, loaded_feeders, sum_stored
from ._base import FED_BY, FEED_SEPARATOR, SEQUENCE, SHARD_COUNT, same_class
from ._compat import ParentKey, key_attributes, normalize_key, serialize_key
from ._conditions import parent_condition, sequence_is
from ._costs import read_units
from ._export_audit import ExportProgress, Location, audit_export, exports_of
from ._items import ShardItems, Stored, count_of, counter_shards, stored_of
from ._reads import read_shards, scan_parents
from ._reports import AuditReport, Drift, Repair, RepairReport, Unverifiable
from ._set_counter import write_total
from ._spec import all_relations, shard_count
from .attributes import CounterField
from .exceptions import ConfigurationError, InvalidArgumentError, TransactionError
from .models import CounterMixin
from .relations import Relation
from .signals import counter_repaired, send_safely

__all__ = ["AuditReport", "Drift", "ExportProgress", "Repair", "RepairReport", "Unverifiable", "audit", "repair"]

Progress = Callable[[int, Optional[int]], None]
DEFAULT_ITEM_BYTES = 200
"""The item size the cost model assumes where the server reports no consumed capacity."""


def audit(target: Union[CounterField, Relation], *, parents: Optional[Iterable[Any]] = None,
          key_prefix: Optional[str] = None, limit: Optional[int] = None, segments: int = 1,
          workers: Optional[int] = None, item_bytes: int = DEFAULT_ITEM_BYTES,
          progress: Optional[Callable[..., None]] = None,
          export: Union[str, os.PathLike[str], Sequence[Union[str, os.PathLike[str]]], None] = None,
          engine: str = "local", spark: Any = None
          ) -> AuditReport:
    """Compare a counter with the number of children on a bounded set of parents, or on every parent of a table
    export.

    :param target: the counter (``Post.like_tally``) or one relation feeding it (``Like.post``); either way every
      relation feeding the counter is counted.
    :param parents: explicit parent keys (hash values or ``(hash, range)`` tuples); a key that names no stored
      parent is reported in :attr:`AuditReport.missing`, not counted. Without it, a Scan of the parent's table
      visits the parents, filtered by the parent model's ``audit_filter()``.
    :param key_prefix: with a Scan, only parents whose hash key starts with it.
    :param limit: with a Scan, stop after this many parents.
    :param segments: with a Scan, a parallel Scan of this many segments, one thread each.
    :param workers: with explicit keys, how many threads count parents at once (default 1); with ``export``, how
      many processes of the local engine read its files (default: this machine's cores), and how many threads
      verify its candidates (default 8).
    :param item_bytes: the item size the cost model assumes where the server reports no capacity.
    :param progress: called as ``progress(done, total)`` after each parent (``total`` is ``None`` for a Scan
      without ``limit``); with ``export``, as ``progress(state)`` with an
      :class:`~pynamodb_counters.ExportProgress` after each data file and each candidate verified.
    :param export: audit every parent of a table export (``ExportTableToPointInTime`` in DynamoDB JSON): the
      location of its ``AWSDynamoDB/<ExportId>/`` prefix (``s3://bucket/prefix/AWSDynamoDB/<ExportId>/``, or a
      local directory), or a list of them when the parent's and the children's tables differ, one export each.
      The export nominates :attr:`AuditReport.candidates`; each is recounted on the live table, and only those
      still drifted are :attr:`AuditReport.drifts`. With ``key_prefix``, only parents whose hash key starts with
      it (and their children).
    :param engine: with ``export``, ``"local"`` (this machine's cores) or ``"spark"`` (a PySpark job).
    :param spark: with ``engine="spark"``, the ``pyspark.sql.SparkSession`` to run it on (EMR, Glue,
      ``local[*]``); the library never creates one.
    :raises ConfigurationError: no relation feeding the counter is loaded, a relation without ``prefix=`` or
      ``children=``, a Scan of a table shared with other models when the parent model has neither a
      discriminator nor an ``audit_filter()``.
    :raises ExportError: with ``export``: an export that cannot be read as DynamoDB writes it, an export of a
      table the audit does not read, a table it reads with no export, a relation counted by a ``children=``
      function (it reads the live table). Nothing is reported.
    :raises InvalidArgumentError: ``segments`` or ``workers`` below 1, a negative ``limit``; with ``export``,
      ``parents``, ``limit`` or ``segments``, an unknown ``engine``, ``spark`` without ``engine="spark"``.
    """
    if export is not None:
        return _audit_export(target, export, key_prefix=key_prefix, limit=limit, parents=parents,
                             segments=segments, workers=workers, item_bytes=item_bytes, progress=progress,
                             engine=engine, spark=spark)
    if engine != "local" or spark is not None:
        raise InvalidArgumentError("engine= and spark= choose how an export is read: pass export= too")
    auditor = _Auditor(target, item_bytes)
    if segments < 1 or (workers is not None and workers < 1) or (limit is not None and limit < 0):
        raise InvalidArgumentError("segments and workers are at least 1, limit at least 0")
    workers = workers or 1
    drifts: List[Drift] = []
    unverifiable: List[Unverifiable] = []
    missing: List[ParentKey] = []
    lock = threading.Lock()
    checked = [0]
    total = None if parents is not None else limit

    def check(observation: _Observation) -> None:
        finding = auditor.check(observation)
        with lock:
            checked[0] += 1
            if isinstance(finding, Drift):
                drifts.append(finding)
            elif finding is not None:
                unverifiable.append(finding)
            if progress is not None:
                progress(checked[0], total)

    if parents is None:
        check_scannable(auditor.model)
    if parents is not None:
        keys = [normalize_key(auditor.model, key, "audit(parents=...)") for key in parents]
        total = len(keys)

        def check_key(key: ParentKey) -> None:
            observation = auditor.observe(key)
            if observation.exists:
                check(observation)
                return
            with lock:  # a key that names no parent (a typo, a deleted parent): reported, not counted
                missing.append(key)
                if progress is not None:
                    progress(checked[0] + len(missing), total)

        with ThreadPoolExecutor(workers) as pool:
            for _ in pool.map(check_key, keys):
                pass  # iterating re-raises a worker's error here
    else:
        budget = _Budget(limit)

        def run_segment(segment: int) -> None:
            for observation in auditor.scan(segment, segments, key_prefix, budget):
                check(observation)

        with ThreadPoolExecutor(segments) as pool:
            for _ in pool.map(run_segment, range(segments)):
                pass
    ordered = tuple(sorted(drifts, key=lambda d: repr(d.key)))  # segments finish in any order
    return AuditReport(auditor.model, auditor.attribute, ordered, checked[0], auditor.units, auditor.estimated,
                       tuple(sorted(unverifiable, key=lambda u: repr(u.key))), tuple(sorted(missing, key=repr)))


def _audit_export(target: Union[CounterField, Relation], export: Union[Location, Sequence[Location]], *,
                  key_prefix: Optional[str], limit: Optional[int], parents: Optional[Iterable[Any]],
                  segments: int, workers: Optional[int], item_bytes: int,
                  progress: Optional[Callable[..., None]], engine: str, spark: Any) -> AuditReport:
    """``audit(export=...)``: the export's candidates, verified on the live table by keys."""
    counter, _ = audited(target)
    locations = exports_of(export)
    if parents is not None or limit is not None or segments != 1:
        raise InvalidArgumentError("an audit from an export reads every parent of the export: parents=, limit= "
                                   "and segments= are for audits of the live table")
    if workers is not None and workers < 1:
        raise InvalidArgumentError("workers is at least 1")

    def verify(keys: List[ParentKey], done: Optional[Progress]) -> AuditReport:
        return audit(counter, parents=keys, workers=min(workers or 8, len(keys)), item_bytes=item_bytes,
                     progress=done)

    return audit_export(counter, locations, verify, engine=engine, spark=spark, workers=workers,
                        key_prefix=key_prefix, progress=progress)


def check_scannable(model: Any) -> None:
    """Refuse a Scan for ``model``'s parents in a table it shares with other models, unless it can tell its items
    from theirs.

    :raises ConfigurationError: the table is shared, and ``model`` has neither a discriminator nor an
      ``audit_filter()``.
    """
    shared_with = _table_sharers(model)
    if shared_with and not _filters_parents(model):
        raise ConfigurationError(
            f"{model.__name__} shares table {model.Meta.table_name} with "
            f"{', '.join(sorted(m.__name__ for m in shared_with))}: a Scan cannot tell its items from theirs. "
            f"Define {model.__name__}.audit_filter() (for example cls.sk == 'META'), give the models a "
            f"discriminator, or pass explicit parents=")


def _table_sharers(model: Any) -> List[Any]:
    """The other models the library knows (parents and children of every relation) stored in ``model``'s table."""
    relations = [r for group in all_relations() for r in group]
    known = {r.child_model for r in relations} | {r.parent_model for r in relations}
    return [m for m in known if m.Meta.table_name == model.Meta.table_name and not issubclass(m, model)
            and not issubclass(model, m) and not same_class(m, model)]


def _filters_parents(model: Any) -> bool:
    """Whether a Scan of ``model``'s table can pick out ``model``'s items: a discriminator, or an overridden
    ``audit_filter()``."""
    overridden = model.audit_filter.__func__ is not CounterMixin.audit_filter.__func__  # type: ignore[attr-defined]
    return overridden or model.audit_filter() is not None


def repair(drifts: Sequence[Drift], *, max_attempts: int = 5, dry_run: bool = False) -> RepairReport:
    """Fix each drifted counter with one conditional UpdateItem that adds the difference.

    The update applies only if the counter still holds the value observed and the parent's counted-write
    sequence has not moved; otherwise the parent is recounted and the repair tried again, up to
    ``max_attempts`` times. Sends :data:`~pynamodb_counters.signals.counter_repaired` for each repaired counter.

    Before writing, each parent is read again (strongly consistent): a parent fed by a relation that is not
    loaded in this process is refused (``status="refused"``), nothing written, whoever built the drift.
    :func:`~pynamodb_counters.set_counter` remains the explicit override.

    :param dry_run: report what would be done (``status="planned"``) and write nothing.
    :raises InvalidArgumentError: ``max_attempts`` is not a whole number of at least 1.
    """
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
        raise InvalidArgumentError(f"repair(max_attempts=...) is at least 1, not {max_attempts!r}")
    auditors: Dict[Tuple[type, str], _Auditor] = {}
    repairs = []
    for drift in drifts:
        if dry_run:
            repairs.append(Repair(drift, "planned", drift.stored, drift.actual, 0))
            continue
        where = (drift.model, drift.attribute)
        if where not in auditors:
            auditors[where] = _Auditor(getattr(drift.model, drift.attribute), DEFAULT_ITEM_BYTES)
        repairs.append(auditors[where].repair(drift, max_attempts))
    return RepairReport(tuple(repairs))


@dataclass(frozen=True)
class _Observation:
    key: ParentKey
    exists: bool
    stored: Optional[Stored]
    sequence: Optional[int]
    fed_by: FrozenSet[str] = frozenset()  # the relations recorded as feeding this counter


class _Budget:
    """A shared count of parents a limited Scan may still visit."""

    def __init__(self, limit: Optional[int]) -> None:
        self.left = limit
        self.lock = threading.Lock()

    def take(self) -> bool:
        if self.left is None:
            return True
        with self.lock:
            if self.left <= 0:
                return False
            self.left -= 1
            return True


class _Auditor:
    """Reads one counter, its parents and their children; all the I/O of audits and repairs."""

    def __init__(self, target: Union[CounterField, Relation], item_bytes: int) -> None:
        counter, self.feeders = audited(target)
        model: Any = counter.model
        self.counter, self.model, self.attribute = counter, model, str(counter.name)
        self.loaded = frozenset(loaded_feeders(counter))
        self.entry = f"{counter.attr_name}{FEED_SEPARATOR}"
        # a rollup's bucket past its TTL is no longer counted into (DynamoDB deletes it within days): not drift;
        # any other parent past its TTL still takes counted writes until it is deleted, and is audited as usual
        self.rollup = any(relation.create_parent for relation in self.feeders)
        self.item_bytes = item_bytes
        self.units = 0.0
        self.estimated = False
        self._lock = threading.Lock()

    # -- reading ---------------------------------------------------------------------------------------------
    def _charge(self, response: Dict[str, Any], estimate_bytes: int) -> None:
        capacity = response.get("ConsumedCapacity")
        if isinstance(capacity, list):
            units = sum(float(c.get("CapacityUnits", 0.0)) for c in capacity) if capacity else None
        else:
            units = float(capacity["CapacityUnits"]) if isinstance(capacity, dict) else None
        with self._lock:
            if units is None:
                self.estimated = True
                units = read_units(estimate_bytes)
            self.units += units

    def observe(self, key: ParentKey) -> _Observation:
        """The parent's counter and sequence, strongly consistent: one GetItem, or, on a sharded counter, one
        BatchGetItem of its shard items, whose counters and sequences are summed."""
        return self._from_items(key, self.read(key))

    def _from_items(self, key: ParentKey, items: ShardItems) -> _Observation:
        if not items[0] or (self.rollup and expired(self.model, items[0])):  # a rollup past its TTL is gone
            return _Observation(key, False, None, None)
        shards = [item for _, item in counter_shards(self.counter, items)]
        counts = [stored_of(item, self.counter.attr_name) for item in shards]
        sequences = [count_of(item, SEQUENCE.attr_name) for item in shards]
        sequence = sum_stored(sequences)
        fed_by = frozenset(entry[len(self.entry):] for item in items
                           for entry in ((item or {}).get(FED_BY.attr_name) or {}).get("SS", ())
                           if entry.startswith(self.entry))
        return _Observation(key, True, sum_stored(counts), None if sequence is None else int(sequence), fed_by)

    def unverifiable(self, observation: _Observation) -> Optional[Unverifiable]:
        """The parent as unverifiable when it records feeders that are not loaded here, else ``None``."""
        unloaded = observation.fed_by - self.loaded
        if not unloaded:
            return None
        return Unverifiable(self.model, observation.key, self.attribute, observation.stored, tuple(sorted(unloaded)))

    def read(self, key: ParentKey, parent: Optional[Dict[str, Any]] = None, known: bool = False) -> ShardItems:
        """The parent's shard items, strongly consistent: the parent item alone (one GetItem) on a model without
        sharded counters and no shards left to fold, else one BatchGetItem. With ``known``, ``parent`` is the
        parent item just read (by a Scan), and is not read again."""
        if shard_count(self.model) == 1:
            if not known:
                hash_key, range_key = serialize_key(self.model, key)
                response = self.model._get_connection().get_item(hash_key, range_key=range_key,
                                                                 consistent_read=True)
                self._charge(response, self.item_bytes)
                parent, known = response.get("Item"), True
            if (count_of(parent, SHARD_COUNT.attr_name) or 1) == 1:
                return [parent]

        def charge(page: Dict[str, Any]) -> None:
            self._charge(page, self.item_bytes * sum(map(len, page.get("Responses", {}).values())))

        return read_shards(self.model, [key], self.counter.shards, consistent_read=True, charge=charge,
                           parents={key: parent} if known else None)[key]

    def scan(self, segment: int, segments: int, key_prefix: Optional[str], budget: _Budget
             ) -> Iterator[_Observation]:
        """The parents in one segment of a strongly consistent Scan."""
        def charge(page: Dict[str, Any], scanned: int) -> None:
            self._charge(page, self.item_bytes * scanned)

        for key, item in scan_parents(self.model, self.feeders, key_prefix, segment, segments, charge):
            if not budget.take():
                return
            yield self._from_items(key, self.read(key, item, known=True))

    def count(self, key: ParentKey) -> int:
        """The children of one parent, across every relation feeding the counter."""
        total = 0
        for relation in self.feeders:
            if relation.children is not None:
                counted = int(relation.children(key))
                self._charge({}, self.item_bytes * counted)  # the caller's reads: the cost model's guess
                total += counted
                continue
            total += self._count_prefix(relation, key)
        return total

    def _count_prefix(self, relation: Relation, key: ParentKey) -> int:
        child = relation.child_model
        child_hash, range_attribute = key_attributes(child)[0], key_attributes(child)[-1]
        assert relation.prefix is not None
        hash_value = child_hash.serialize(key[0])
        connection = child._get_connection()
        counted = counted_classes(child)
        count, start = 0, None
        while True:  # a conditional or sum counter reads its children; a plain count only counts them
            page = connection.query(hash_value, range_key_condition=range_attribute.startswith(relation.prefix),
                                    filter_condition=counted, consistent_read=True,
                                    select=None if relation.conditional else COUNT, exclusive_start_key=start,
                                    return_consumed_capacity="TOTAL")
            self._charge(page, self.item_bytes * int(page.get("ScannedCount", 0)))
            if relation.conditional:
                for item in page.get("Items", []):
                    stored = child.from_raw_data(item)
                    count += relation.amount(stored) if relation.applies(stored) else 0
            else:
                count += int(page.get("Count", 0))
            start = page.get("LastEvaluatedKey")
            if not start:
                return count

    def check(self, observation: _Observation, rounds: int = 3) -> Union[Drift, Unverifiable, None]:
        """The drift of one observed parent, ``None``, or :class:`Unverifiable` when it records a feeder that is
        not loaded (its children are then not counted at all).

        A parent whose counter looks wrong is observed again; if its sequence moved while the children were
        counted, it is recounted (at most ``rounds`` times). The drift always pairs the count with the
        observation made *before* it, so when the parent never held still, the drift's sequence is already stale
        and a repair recounts instead of applying it.
        """
        for _ in range(rounds):
            before = observation
            refused = self.unverifiable(before)
            if refused is not None:
                return refused
            actual = self.count(before.key)
            if before.stored == actual:
                return None
            observation = self.observe(before.key)
            if not observation.exists:
                return None  # deleted meanwhile: nothing to repair
            if (observation.sequence, observation.stored) == (before.sequence, before.stored):
                break
        return Drift(self.model, before.key, self.attribute, before.stored, actual, before.sequence)

    # -- writing ---------------------------------------------------------------------------------------------
    def repair(self, drift: Drift, max_attempts: int) -> Repair:
        """Apply one drift's difference conditionally, recounting when live writes moved the parent, and refusing
        a parent fed by relations that are not loaded. Each attempt reads the parent first: the drift may come
        from an older audit, or another process."""
        stored, sequence, actual = drift.stored, drift.sequence, drift.actual
        stale = False  # whether the last attempt's condition failed: count again
        for attempt in range(1, max_attempts + 1):
            seen = self.observe(drift.key)
            if not seen.exists:
                return Repair(drift, "failed", stored, actual, attempt, "the parent no longer exists")
            refused = self.unverifiable(seen)
            if refused is not None:
                return Repair(drift, "refused", seen.stored, actual, attempt, refused.reason)
            if stale or (seen.stored, seen.sequence) != (stored, sequence):  # moved since observed: count again
                fresh = self.check(seen)
                if fresh is None:
                    return Repair(drift, "exact", seen.stored, int(seen.stored or 0), attempt)
                if isinstance(fresh, Unverifiable):
                    return Repair(drift, "refused", fresh.stored, actual, attempt, fresh.reason)
                stored, sequence, actual = fresh.stored, fresh.sequence, fresh.actual
            stale = True
            if self._apply(drift.key, stored, sequence, actual):
                send_safely(counter_repaired, self.model, key=drift.key, attribute=self.attribute, before=stored,
                            after=actual, drift=drift)
                return Repair(drift, "repaired", stored, actual, attempt)
        return Repair(drift, "failed", stored, actual, max_attempts,
                      f"the parent kept changing through {max_attempts} attempts; run the repair again")

    def _apply(self, key: ParentKey, stored: Optional[Stored], sequence: Optional[int], actual: int) -> bool:
        """Set the counter to ``actual`` if it still holds ``stored`` at ``sequence``; ``False`` when the parent
        moved (or a transaction writing it right now conflicted). An unsharded counter takes one conditional
        UpdateItem adding the difference; a sharded one, a TransactWriteItems conditioned on every shard."""
        items = self.read(key) if shard_count(self.model) > 1 else []
        if len(counter_shards(self.counter, items)) > 1:  # counts on several items: condition them all
            seen = self._from_items(key, items)
            return seen.exists and (seen.stored, seen.sequence) == (stored, sequence) and \
                write_total(self.counter, key, items, actual)
        condition = parent_condition(self.model)
        condition &= sequence_is(sequence)
        condition &= self.counter.does_not_exist() if stored is None else self.counter == stored
        change = self.counter.add(actual - stored) if isinstance(stored, int) else self.counter.set(actual)
        hash_key, range_key = serialize_key(self.model, key)
        try:
            self.model._get_connection().update_item(hash_key, range_key=range_key,
                                                     actions=[change, SEQUENCE.add(1)], condition=condition)
        except UpdateError as error:
            if error.cause_response_code not in ("ConditionalCheckFailedException", "TransactionConflictException"):
                raise TransactionError(f"DynamoDB rejected the repair of {key!r}: {error}", error) from error
            return False
        return True

