"""
An audit from a table export: the export nominates candidates, the live table decides.

::

    report = audit(Post.like_tally, export="s3://bucket/exports/AWSDynamoDB/01701234567890-a1b2c3d4/")
    report.candidates   # parents whose stored total differs from their children in the export
    report.drifts       # the candidates recounted on the live table and still drifted

The export's data files are read apart (one task each, on this machine's cores or on Spark: ``_engines``) into
partitions (``_counts``); a parent's findings need its whole partition, so the partitions are merged
before they are judged. An export is not transactionally consistent (it may hold one half of a transaction that
was propagating while it was taken), so no finding of it is reported as drift: each candidate is recounted on
the live table, by key, and only those still drifted are drifts. The live reads are the candidates' alone.

Before any file is read, on either engine, each export is matched to the live table of its name (one
``DescribeTable`` a table, a control-plane call that costs no read units): an export of a table of that name in
another account or region, or of an earlier table of that name (another ``TableId``), is refused, unless the
caller says it audits a copy on purpose (``export_of_copy``).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from pynamodb.exceptions import TableDoesNotExist, TableError

from ..._keys import ParentKey
from ...declare._attributes import CounterField
from ...declare._expiry_rules import STREAM
from ...exceptions import ExportError, InvalidArgumentError
from .._audit_rules import audited
from .._reports import AuditReport, Drift
from .._stream_proof import latest_records
from ._counts import ExportCounting, FileCounting, Findings, Partition, Tally, merge_partitions
from ._engines import ENGINES, Task, run_by_key
from ._files import Export, open_export, table_place

__all__ = ["ExportProgress", "audit_export", "exports_of"]

Location = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class ExportProgress:
    """How far an audit from an export got: what ``audit(..., export=..., progress=...)`` is called with.

    :ivar files_read: data files read so far, of ``files``.
    :ivar items_read: the items in the files read (as their manifests count them).
    :ivar candidates: the parents the export nominates, once every file is read (``None`` before).
    :ivar verified: candidates recounted on the live table so far.
    """

    files_read: int
    files: int
    items_read: int
    candidates: Optional[int] = None
    verified: int = 0


ExportProgressCallback = Callable[[ExportProgress], None]
Verify = Callable[[List[ParentKey], Optional[Callable[[int, Optional[int]], None]]], AuditReport]


def exports_of(export: Union[Location, Sequence[Location]]) -> List[str]:
    """The export locations ``audit(export=...)`` was given: one, or a list.

    :raises InvalidArgumentError: no location, or a value that is not a path, an ``s3://`` URL or a list of them.
    """
    given = [export] if isinstance(export, (str, os.PathLike)) else \
        list(export) if isinstance(export, (list, tuple)) else []
    if not given or not all(isinstance(each, (str, os.PathLike)) and str(each) for each in given):
        raise InvalidArgumentError(f"export= takes an export's location (a local directory or an s3:// URL of "
                                   f"its AWSDynamoDB/<ExportId>/ prefix), or a list of them, not {export!r}")
    return [os.fspath(each) for each in given]


def audit_export(counter: CounterField, locations: Sequence[str], verify: Verify, *, engine: str = "local",
                 spark: Any = None, workers: Optional[int] = None, key_prefix: Optional[str] = None,
                 progress: Optional[ExportProgressCallback] = None, export_of_copy: bool = False) -> AuditReport:
    """Audit ``counter`` from the exports at ``locations``, verifying every candidate with ``verify`` (the live
    audit by keys).

    :param export_of_copy: the exports may be of other tables of the same names (copies of the live ones): their
      account, region and table id are not checked.
    :raises ExportError: an export that cannot be read, an export of a table the audit does not read, a table it
      reads with no export, an export of another account's, region's or table id's table of that name (unless
      ``export_of_copy``), a live table that cannot be described, a relation that cannot be evaluated from an
      export; nothing is reported.
    :raises InvalidArgumentError: an unknown ``engine``, ``spark=`` without ``engine="spark"``.
    """
    if engine not in ENGINES:
        raise InvalidArgumentError(f"engine= is one of {', '.join(map(repr, ENGINES))}, not {engine!r}")
    if spark is not None and engine != "spark":
        raise InvalidArgumentError("spark= is the session of engine='spark': pass both, or neither")
    counting = ExportCounting(counter, audited(counter)[1], key_prefix)
    exports = _matched(counting, [open_export(location) for location in locations])
    if not export_of_copy:
        for export in exports:
            _check_live(export, _described(_model_of(counting, export.table), export))
    if counting.marks:
        counting.latest = _latest_records(counting, exports)
    tasks: List[Task] = [(export, file) for export in exports for file in export.files]
    files, items = len(tasks), [0, 0]

    def done(task: Task) -> None:
        items[0] += 1
        items[1] += task[1].items
        if progress is not None:
            progress(ExportProgress(items[0], files, items[1]))

    findings = run_by_key(engine, tasks, _ReadFile(counting.file), merge_partitions, _Judge(counting), Findings.merge,
                          Findings(0, ()), spark=spark, workers=workers, done=done)
    read = sum(file.items for export in exports for file in export.files)
    candidates = tuple(sorted((Drift(counting.model, f.key, str(counter.name), f.stored, f.actual)
                               for f in findings.found if f.actual is not None), key=lambda d: repr(d.key)))
    keys = [drift.key for drift in candidates] + [f.key for f in findings.found if f.actual is None]
    if progress is not None:
        progress(ExportProgress(files, files, read, len(keys)))

    def verified(done: int, total: Optional[int]) -> None:
        if progress is not None:
            progress(ExportProgress(files, files, read, len(keys), done))

    live = verify(keys, verified) if keys else None
    return AuditReport(counting.model, str(counter.name), live.drifts if live else (), findings.parents,
                       live.read_units if live else 0.0, live.read_units_estimated if live else False,
                       live.unverifiable if live else (), (), candidates)


def _matched(counting: ExportCounting, exports: List[Export]) -> List[Export]:
    """The exports, each of a table the audit reads, one for each table it reads."""
    by_table: Dict[str, Export] = {}
    for export in exports:
        if export.table not in counting.tables:
            raise ExportError(f"{export.location} is an export of the table {export.table!r}, which no relation "
                              f"feeding {counting.model.__name__}.{counting.counter.name} reads (it reads "
                              f"{_tables(counting)}): pass the exports of those tables")
        other = by_table.setdefault(export.table, export)
        if other is not export:
            raise ExportError(f"{other.location} and {export.location} are both exports of the table "
                              f"{export.table!r}: pass one export of each table")
    for table, needed_by in counting.tables.items():
        if table not in by_table:
            raise ExportError(f"no export of the table {table!r}, which {' and '.join(needed_by)} "
                              f"{'reads' if len(needed_by) == 1 else 'read'}: pass its export too "
                              f"(export=[...] takes one export of each table)")
    return list(by_table.values())


def _model_of(counting: ExportCounting, table: str) -> Any:
    """A model stored in ``table``, whose connection reaches the live table: the parent's, or a child's."""
    if table == counting.parent_table:
        return counting.model
    return next(found.relation.child_model for found in counting.children if found.table == table)


def _described(model: Any, export: Export) -> Dict[str, Any]:
    """The live table's description (one ``DescribeTable``, through the model's connection)."""
    try:
        return dict(model._get_connection().describe_table())
    except (TableError, TableDoesNotExist) as error:
        hint = ("it does not exist where the model points (Meta.table_name, region, host)"
                if isinstance(error, TableDoesNotExist) else
                "grant dynamodb:DescribeTable on it, or audit the export as a copy with export_of_copy=True "
                "(--export-of-copy on the command line), which skips the check")
        raise ExportError(f"the live table {export.table!r} cannot be described (DescribeTable: {error}), so "
                          f"{export.location} cannot be matched to it: {hint}", cause=error) from error


def _check_live(export: Export, live: Dict[str, Any]) -> None:
    """Refuse an export of another table of the live table's name: its account, region, or table id (where the
    export's summary carries one) is not the live table's."""
    live_arn = live.get("TableArn")
    ours, theirs = table_place(live_arn), table_place(export.table_arn)
    differs: List[str] = []
    if ours is not None and theirs is not None:
        for field, mine, other in (("account", ours[1], theirs[1]), ("region", ours[0], theirs[0])):
            if mine != other:
                differs.append(f"its {field} is {other}, the live table's {mine}")
    live_id = live.get("TableId")
    if not differs and export.table_id is not None and live_id is not None and export.table_id != live_id:
        differs.append(f"its table id is {export.table_id}, the live table's {live_id} (a table of that name "
                       f"deleted and created again since the export, or restored under it)")
    if differs:
        raise ExportError(f"{export.location} is an export of a table {export.table!r} other than the live one: "
                          f"{'; '.join(differs)} (the export's {export.table_arn}, the live table {live_arn}). "
                          f"Pass an export of the live table; or, to audit a copy of it on purpose (its candidates "
                          f"verified on the live table), pass export_of_copy=True (--export-of-copy on the command "
                          f"line)")


def _tables(counting: ExportCounting) -> str:
    return ", ".join(repr(table) for table in sorted(counting.tables))


STREAM_RETENTION = 24 * 3600.0
"""How long, in seconds, DynamoDB Streams keeps a record."""


def _latest_records(counting: ExportCounting, exports: Sequence[Export]) -> Dict[str, str]:
    """For a counter fed from the stream: the last record of each partition in the streams of the tables its
    relations counted from the stream read (``_stream_proof.latest_records``), once. A parent whose partition has
    one after its marks as exported may have had records waiting for the handler then: the export cannot say what
    its children were at its marks, and the live table decides.

    :raises ExportError: an export taken so long ago (or whose time its summary does not give) that records
      waiting then may have left the stream since.
    """
    now = time.time()
    for export in exports:
        if export.exported_at is None or now - export.exported_at >= STREAM_RETENTION:
            taken = "at an unknown time (its manifest-summary.json gives no exportTime)" if export.exported_at is None \
                else f"{(now - export.exported_at) / 3600:.0f} hours ago"
            raise ExportError(f"{export.location} was taken {taken}: {counting.model.__name__}."
                              f"{counting.counter.name} is fed from the stream, and the records that waited for the "
                              f"handler when an export was taken are read from the stream, which keeps them 24 "
                              f"hours. Audit it from an export less than a day old (or on the live table)")
    latest: Dict[str, str] = {}
    tables = {found.table: found.relation.child_model for found in counting.children
              if found.relation.counting == STREAM}
    for model in tables.values():
        for partition, sequence in latest_records(model).items():
            if sequence > latest.get(partition, ""):
                latest[partition] = sequence
    return latest


class _ReadFile:
    """One task's work: a data file's items, read and tallied by partition. It pickles as what reading a file needs
    (``_counts.FileCounting``: plain values), so that a worker process or a Spark executor imports no model
    but those of the relations counted with ``when=`` or ``amount=``."""

    def __init__(self, counting: FileCounting) -> None:
        self.counting = counting

    def __call__(self, task: Task) -> Tally:
        export, file = task
        return self.counting.tally(export.table, export.read(file))


class _Judge:
    """A whole partition's findings (judged in the caller's process on the local engine, on the executors on
    Spark): it pickles as the names of what it counts (the counter's model and attribute, the child models feeding
    it), with the streams' last records, so that an executor rebuilds it from the models it imports."""

    def __init__(self, counting: ExportCounting) -> None:
        self.counting = counting

    def __call__(self, partition: Partition) -> Findings:
        return self.counting.findings(partition)

    def __getstate__(self) -> Tuple[Any, ...]:
        return _state(self.counting), self.counting.latest

    def __setstate__(self, state: Tuple[Any, ...]) -> None:
        self.counting = _rebuilt(state[0])
        self.counting.latest = state[1]


def _state(counting: ExportCounting) -> Tuple[Any, ...]:
    children = tuple(found.relation.child_model for found in counting.children)
    return counting.model, counting.counter.name, counting.key_prefix, children


def _rebuilt(state: Tuple[Any, ...]) -> ExportCounting:
    model, name, key_prefix, children = state  # the child models' modules declare the relations: now imported
    counter = model.get_attributes()[name]
    feeders = audited(counter)[1]
    if len(feeders) != len(children):
        raise ExportError(f"{len(children)} relations feed {model.__name__}.{name} where the audit started, "
                          f"{len(feeders)} in this worker: make the modules declaring them importable here")
    return ExportCounting(counter, feeders, key_prefix)

