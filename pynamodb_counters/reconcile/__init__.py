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
parent's partition for ``counted_by(..., prefix="LIKE#")``, or the caller's ``counted_by(..., children=f)``. A
counter fed from the stream (``counting="stream"``) is compared with its children as they were at the last record
the handler counted into it: the count is bracketed by a probe item in the parent's partition, and the changes of
the records after the mark, up to the probe's removal in the child table's stream, are taken off it
(``_stream_proof``; the "Counting from the stream" page).
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from .._keys import ParentKey
from ..declare._attributes import CounterField
from ..declare._counted import same_class
from ..declare._counting_rule import normalize_key
from ..declare._relations import Relation
from ..declare._spec import all_relations
from ..exceptions import ConfigurationError, InvalidArgumentError
from ..models import CounterMixin
from ._audit_rules import audited
from ._auditor import Auditor, Budget, Observation
from ._reports import AuditReport, Drift, Repair, RepairReport, Unverifiable
from .export._audit import ExportProgress, Location, audit_export, exports_of

__all__ = ["AuditReport", "Drift", "ExportProgress", "Repair", "RepairReport", "Unverifiable", "audit", "repair"]

Progress = Callable[[int, Optional[int]], None]
DEFAULT_ITEM_BYTES = 200
"""The item size the cost model assumes where the server reports no consumed capacity."""
CHUNK = 100
"""How many parents an audit counts before it reads them all again, in one BatchGetItem, to prove each held still
around its count."""


def audit(target: Union[CounterField, Relation], *, parents: Optional[Iterable[Any]] = None,
          key_prefix: Optional[str] = None, limit: Optional[int] = None, segments: int = 1,
          workers: Optional[int] = None, item_bytes: int = DEFAULT_ITEM_BYTES,
          progress: Optional[Callable[..., None]] = None,
          export: Union[str, os.PathLike[str], Sequence[Union[str, os.PathLike[str]]], None] = None,
          engine: str = "local", spark: Any = None, export_of_copy: bool = False
          ) -> AuditReport:
    """Compare a counter with the number of children on a bounded set of parents, or on every parent of a table
    export.

    A counter fed from the stream is compared with its children at the last record the handler counted into it
    (records still waiting are never drift): each count writes and deletes a probe item in the parent's
    partition of the child table, and the child table's stream is read up to it ("Counting from the stream",
    "Audits and repairs").

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
      it (and their children). Each export must be of the live table its models read: the same name, account and
      region, and the same ``TableId`` where its ``manifest-summary.json`` carries one (one ``DescribeTable`` a
      table, which costs no read units).
    :param engine: with ``export``, ``"local"`` (this machine's cores) or ``"spark"`` (a PySpark job).
    :param spark: with ``engine="spark"``, the ``pyspark.sql.SparkSession`` to run it on (EMR, Glue,
      ``local[*]``); the library never creates one.
    :param export_of_copy: with ``export``, audit the live table from the export of a copy of it, on purpose: a
      table of the same name in another account or region, or restored under its name (another ``TableId``).
      Their accounts, regions and table ids are not compared (nor is ``DescribeTable`` called); the names still
      are, and the candidates are verified on the live table as always.
    :raises ConfigurationError: no relation feeding the counter is loaded, a relation without ``prefix=`` or
      ``children=``, a Scan of a table shared with other models when the parent model has neither a
      discriminator nor an ``audit_filter()``, a counter fed from the stream of a table without a stream (the
      message says how to enable it).
    :raises ExportError: with ``export``: an export that cannot be read as DynamoDB writes it (a data file listed
      twice in its manifest included), an export of a table the audit does not read, a table it reads with no
      export, an export whose account, region or table id is not the live table's (the message names which,
      with both values; unless ``export_of_copy``), a live table that cannot be described, a relation counted by
      a ``children=`` function (it reads the live table), for a counter fed from the stream an export 24 hours
      old or more. Nothing is reported.
    :raises TransactionError: the stream of a child table feeding a counter from the stream cannot be read, or a
      probe could not be deleted (its key is named).
    :raises InvalidArgumentError: ``segments`` or ``workers`` below 1, a negative ``limit``; with ``export``,
      ``parents``, ``limit`` or ``segments``, an unknown ``engine``, ``spark`` without ``engine="spark"``;
      without ``export``, ``engine``, ``spark`` or ``export_of_copy``.
    """
    if export is not None:
        return _audit_export(target, export, key_prefix=key_prefix, limit=limit, parents=parents,
                             segments=segments, workers=workers, item_bytes=item_bytes, progress=progress,
                             engine=engine, spark=spark, export_of_copy=export_of_copy)
    if engine != "local" or spark is not None:
        raise InvalidArgumentError("engine= and spark= choose how an export is read: pass export= too")
    if export_of_copy:
        raise InvalidArgumentError("export_of_copy= says an export is of a copy of the live table: pass export= too")
    auditor = Auditor(target, item_bytes)
    if segments < 1 or (workers is not None and workers < 1) or (limit is not None and limit < 0):
        raise InvalidArgumentError("segments and workers are at least 1, limit at least 0")
    workers = workers or 1
    drifts: List[Drift] = []
    unverifiable: List[Unverifiable] = []
    missing: List[ParentKey] = []
    lock = threading.Lock()
    checked = [0]
    total = None if parents is not None else limit

    def check(observations: List[Observation]) -> None:
        findings = auditor.check_all(observations)
        with lock:
            for finding in findings:
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

        def check_keys(chunk: List[ParentKey]) -> None:
            observed = auditor.observe_all(chunk)
            gone = [key for key in chunk if not observed[key].exists]
            if gone:
                with lock:  # a key that names no parent (a typo, a deleted parent): reported, not counted
                    missing.extend(gone)
                    if progress is not None:
                        progress(checked[0] + len(missing), total)
            check([observed[key] for key in chunk if observed[key].exists])

        size = max(1, min(CHUNK, -(-len(keys) // workers)))  # every worker busy, 100 keys a BatchGetItem at most
        with ThreadPoolExecutor(workers) as pool:
            for _ in pool.map(check_keys, [keys[n:n + size] for n in range(0, len(keys), size)]):
                pass  # iterating re-raises a worker's error here
    else:
        budget = Budget(limit)

        def run_segment(segment: int) -> None:
            chunk: List[Observation] = []
            for observation in auditor.scan(segment, segments, key_prefix, budget):
                chunk.append(observation)
                if len(chunk) == CHUNK:
                    check(chunk)
                    chunk = []
            if chunk:
                check(chunk)

        with ThreadPoolExecutor(segments) as pool:
            for _ in pool.map(run_segment, range(segments)):
                pass
    ordered = tuple(sorted(drifts, key=lambda d: repr(d.key)))  # segments finish in any order
    return AuditReport(auditor.model, auditor.attribute, ordered, checked[0], auditor.units, auditor.estimated,
                       tuple(sorted(unverifiable, key=lambda u: repr(u.key))), tuple(sorted(missing, key=repr)))


def _audit_export(target: Union[CounterField, Relation], export: Union[Location, Sequence[Location]], *,
                  key_prefix: Optional[str], limit: Optional[int], parents: Optional[Iterable[Any]],
                  segments: int, workers: Optional[int], item_bytes: int,
                  progress: Optional[Callable[..., None]], engine: str, spark: Any,
                  export_of_copy: bool) -> AuditReport:
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
                        key_prefix=key_prefix, progress=progress, export_of_copy=export_of_copy)


def _drifts_of(drifts: Any) -> List[Drift]:
    """``repair()``'s drifts, checked.

    :raises InvalidArgumentError: naming what was given and ``repair(audit(...).drifts)``.
    """
    if isinstance(drifts, (CounterField, Relation, AuditReport, str, bytes, Drift)) or \
            not isinstance(drifts, Iterable):
        raise _not_drifts(drifts)
    found = list(drifts)
    if not all(isinstance(drift, Drift) for drift in found):
        raise _not_drifts(drifts)
    return found


def _not_drifts(given: Any) -> InvalidArgumentError:
    what = "a counter" if isinstance(given, CounterField) else "a relation" if isinstance(given, Relation) else \
        "a report (its drifts are report.drifts)" if isinstance(given, AuditReport) else repr(given)[:80]
    return InvalidArgumentError(f"repair() takes the drifts an audit found, not {what}: "
                                f"repair(audit(Post.like_tally).drifts), or repair(report.drifts) of a report "
                                f"kept (the command line's repair MODULE:Post.like_tally audits and repairs in one "
                                f"go). Nothing was written")


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
    :raises InvalidArgumentError: ``drifts`` is not a sequence of :class:`~pynamodb_counters.Drift` (a counter, a
      relation or a report: ``repair(audit(Post.like_tally).drifts)`` repairs what an audit found), or
      ``max_attempts`` is not a whole number of at least 1. Nothing was written.
    :raises TransactionError: DynamoDB rejected a repair's write otherwise than by its condition, or, for a counter
      fed from the stream, its stream cannot be read or a probe could not be deleted.
    """
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
        raise InvalidArgumentError(f"repair(max_attempts=...) is at least 1, not {max_attempts!r}")
    drifts = _drifts_of(drifts)
    auditors: Dict[Tuple[type, str], Auditor] = {}
    repairs = []
    for drift in drifts:
        if dry_run:
            repairs.append(Repair(drift, "planned", drift.stored, drift.actual, 0))
            continue
        where = (drift.model, drift.attribute)
        if where not in auditors:
            auditors[where] = Auditor(getattr(drift.model, drift.attribute), DEFAULT_ITEM_BYTES)
        repairs.append(auditors[where].repair(drift, max_attempts))
    return RepairReport(tuple(repairs))
