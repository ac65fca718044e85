"""
The ``pynamodb-counters`` command: ``demo``, ``audit``, ``repair``, ``feeders`` and ``reshard``.

Exit codes: ``0`` success (no drift; every drift repaired), ``1`` drift found or not all repaired, ``2`` anything
else: a usage or configuration error, parents that cannot be verified (fed by relations whose modules were not
loaded: ``--import``), or any error at all, with a one-line message on stderr (the traceback with ``--debug``); a
configuration error's advice (for a module not found: where it was looked for) follows it on further lines, except
with ``--json``.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from typing import Any, List, NoReturn, Optional, Tuple

from .. import __version__
from ..declare._attributes import CounterField
from ..declare._relations import Relation
from ..exceptions import ConfigurationError, InvalidArgumentError
from ..feeders import migrate_feeders
from ..reconcile import audit, repair
from ..reconcile._reports import AuditReport, RepairReport
from ..resharding import reshard
from ._output import AuditProgress, count, describe, json_error, key_text, print_audit, print_repair
from ._output import ExportAuditProgress as _ExportProgress
from ._targets import Target, load_module, parse_key, point, resolve

__all__ = ["main"]

PROG = "pynamodb-counters"


class _UsageExit(SystemExit):
    """A usage error, already printed on stderr; its message, for ``--json``."""

    def __init__(self, message: str) -> None:
        super().__init__(2)
        self.message = message


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error on one line: ``pynamodb-counters: error: ... (see ... --help)``."""

    def error(self, message: str) -> NoReturn:
        text = f"{message} (see {self.prog} --help)"
        sys.stderr.write(f"{PROG}: error: {text}\n")
        raise _UsageExit(text)


def _at_least_one(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"a whole number of at least 1, not {raw!r}")
    return value


def _common(command: argparse.ArgumentParser) -> None:
    command.add_argument("--debug", action="store_true", help="on an error, show its traceback")


def _models(command: argparse.ArgumentParser) -> None:
    command.add_argument("--import", action="append", metavar="MODULE", dest="imports", default=[],
                         help="import this module first, to load models declaring more relations (repeatable)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Exact reference counters for PynamoDB models.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    demo = commands.add_parser("demo", help="tell the likes story (embedded moto unless --endpoint-url)")
    demo.add_argument("--endpoint-url", help="a DynamoDB endpoint; default: an embedded moto backend")
    demo.add_argument("--region", default="us-east-1")
    demo.add_argument("--table", default="Social", help="table name (created if missing)")
    _common(demo)
    for name, text in (("audit", "compare counters with their children; exit 1 if any drifted"),
                       ("repair", "audit, then fix the drifted counters (a dry run unless --apply)")):
        command = commands.add_parser(name, help=text, description=text)
        command.add_argument("target", metavar="MODULE:Model.attribute",
                             help="the counter (myapp.models:Post.like_tally), or MODULE:Model for its only one")
        command.add_argument("--parent", action="append", metavar="KEY", dest="parents",
                             help='a parent key: a hash key, or a JSON list ["POST#a91f", "META"] (repeatable); '
                                  'numbers as numbers, binary in base64')
        _models(command)
        _common(command)
        command.add_argument("--limit", type=int, help="audit at most N parents of a Scan")
        command.add_argument("--segments", type=int, default=1,
                             help="parallel Scan segments, or threads for --parent keys (default 1)")
        command.add_argument("--key-prefix", help="only parents whose hash key starts with this")
        command.add_argument("--endpoint-url", help="the DynamoDB endpoint (default: the models' Meta.host)")
        command.add_argument("--region", help="the AWS region (default: the models' Meta.region)")
        command.add_argument("--export", action="append", metavar="LOCATION", dest="exports",
                             help="audit every parent of this table export (s3://bucket/prefix/AWSDynamoDB/<id>/ "
                                  "or a local copy), verifying its candidates on the live table; repeat it for "
                                  "each table the counter's relations read")
        command.add_argument("--engine", choices=("local", "spark"), default="local",
                             help="with --export: read it on this machine's cores (local, the default) or as a "
                                  "Spark job (the session SparkSession.builder.getOrCreate() gives: the job's "
                                  "under spark-submit)")
        command.add_argument("--workers", type=_at_least_one,
                             help="with --export and the local engine: processes reading its files (default: one "
                                  "per core)")
        command.add_argument("--export-of-copy", action="store_true",
                             help="with --export: the export is of a copy of the live table (another account, "
                                  "region or TableId), audited on purpose; otherwise such an export is refused")
        output = command.add_mutually_exclusive_group()
        output.add_argument("--json", action="store_true", help="print one JSON object")
        output.add_argument("--csv", action="store_true", help="print CSV rows")
        if name == "repair":
            command.add_argument("--apply", action="store_true", help="write the repairs (default: dry run)")
            command.add_argument("--max-attempts", type=_at_least_one, default=5,
                                 help="recounts per parent while live writes move it (default 5)")
    text = ("list the feeder records of a counter's parents; rewrite legacy ones (--migrate) or forget those of "
            "relations removed from the code (--forget); a dry run unless --apply")
    command = commands.add_parser("feeders", help=text, description=text)
    command.add_argument("target", metavar="MODULE:Model.attribute", help="the counter (myapp.models:Post.like_tally)")
    command.add_argument("--parent", action="append", metavar="KEY", dest="parents",
                         help='a parent key: a hash key, or a JSON list ["POST#a91f", "META"] (repeatable)')
    command.add_argument("--key-prefix", help="only parents whose hash key starts with this")
    command.add_argument("--limit", type=int, help="at most N parents of a Scan")
    command.add_argument("--migrate", action="store_true",
                         help="rewrite legacy feeder ids (module:Class.relation) of loaded relations to current ids")
    command.add_argument("--forget", action="append", metavar="FEEDER", default=[],
                         help="remove this feeder id, of a relation removed from the code (repeatable)")
    command.add_argument("--apply", action="store_true", help="write the changes (default: dry run)")
    command.add_argument("--endpoint-url", help="the DynamoDB endpoint (default: the models' Meta.host)")
    command.add_argument("--region", help="the AWS region (default: the models' Meta.region)")
    command.add_argument("--json", action="store_true", help="print one JSON object")
    _models(command)
    _common(command)
    text = "give a counter SHARDS shards on every parent (or on --parent keys), keeping every count"
    command = commands.add_parser("reshard", help=text, description=text)
    command.add_argument("target", metavar="MODULE:Model.attribute", help="the counter (myapp.models:Post.like_tally)")
    command.add_argument("shards", type=int, help="the new number of shards (1 folds them back into the parent)")
    command.add_argument("--parent", action="append", metavar="KEY", dest="parents",
                         help='a parent key: a hash key, or a JSON list ["POST#a91f", "META"] (repeatable)')
    command.add_argument("--key-prefix", help="only parents whose hash key starts with this")
    command.add_argument("--endpoint-url", help="the DynamoDB endpoint (default: the models' Meta.host)")
    command.add_argument("--region", help="the AWS region (default: the models' Meta.region)")
    command.add_argument("--json", action="store_true", help="print one JSON object")
    _models(command)
    _common(command)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """Run the command line; return its exit code: ``0`` clean, ``1`` drift, ``2`` any other outcome."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as done:  # --help, --version, or a usage error (already printed on one line)
        if isinstance(done, _UsageExit) and "--json" in (sys.argv[1:] if argv is None else argv):
            json_error(done.message, "UsageError")
        return done.code if isinstance(done.code, int) else 2
    _import_from_here()
    try:
        if args.command == "demo":
            from .demo import run

            return run(endpoint_url=args.endpoint_url, region=args.region, table=args.table)
        for module in args.imports:
            load_module(module)
        if args.command == "reshard":
            return _reshard(args)
        if args.command == "feeders":
            return _feeders(args)
        return _reconcile(args)
    except Exception as error:  # every failure is exit 2 and one line (any advice after it); the traceback on request
        if args.debug:
            raise
        json_output = getattr(args, "json", False)
        if json_output and not getattr(args, "reported", False):
            json_error(describe(error, hint=False), type(error).__name__)
        message, advice = _message(error)
        print(f"{PROG}: {message}", file=sys.stderr)
        for line in [] if json_output else advice:  # with --json, for programs: the one line
            print(f"  {line}", file=sys.stderr)
        return 2


def _message(error: Exception) -> Tuple[str, List[str]]:
    """An error's message in one line, as :func:`describe` gives it, and the lines of advice after it: a
    ``ConfigurationError`` says what is wrong on its first line and what to do on the lines after (a module not
    found: where it was looked for; a declaration: how to declare it)."""
    first, _, advice = str(error).partition("\n")
    if not advice or not isinstance(error, ConfigurationError):
        return describe(error), []
    return " ".join(first.split()), [line.strip() for line in advice.split("\n") if line.strip()]


def _import_from_here() -> None:
    """Models are imported from the current directory first, as ``python -m pynamodb_counters`` (and ``flask``,
    ``celery``) do: a console script's own ``sys.path`` starts with its ``bin`` folder instead."""
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())


def _reshard(args: argparse.Namespace) -> int:
    counter, parents = _prepare(args)
    rewritten = reshard(counter, args.shards, parents=parents, key_prefix=args.key_prefix)
    if args.json:
        json.dump({"model": counter.model.__name__, "attribute": counter.name,  # type: ignore[union-attr]
                   "shards": args.shards, "parents_rewritten": rewritten}, sys.stdout)
        sys.stdout.write("\n")
    else:
        print(f"{counter.model.__name__}.{counter.name}: {count(rewritten, 'parent')} rewritten for "  # type: ignore
              f"{count(args.shards, 'shard')}")
    return 0


def _feeders(args: argparse.Namespace) -> int:
    counter, parents = _prepare(args)
    report = migrate_feeders(counter, parents=parents, key_prefix=args.key_prefix, limit=args.limit,
                             migrate=args.migrate, forget=args.forget, dry_run=not args.apply)
    if args.json:
        json.dump(report.as_dict(), sys.stdout)
        sys.stdout.write("\n")
        return 0
    print(f"{report.model.__name__}.{report.attribute}: {count(report.parents_checked, 'parent')} checked")
    for entry in report.entries:
        named = f" ({entry.relation})" if entry.relation else ""
        print(f"  {entry.status:<8} {entry.feeder}{named}: {count(entry.parents, 'parent')}")
    for change in report.changes:
        shard = f" shard {change.shard}" if change.shard else ""
        edits = [f"+ {entry}" for entry in change.added] + [f"- {entry}" for entry in change.removed]
        print(f"{change.model.__name__} {key_text(change.model, change.key)}{shard}: {change.status} "
              f"{', '.join(edits)}")
    done = "rewritten" if report.applied else "to rewrite"
    note = "" if report.applied or not report.changes else "; dry run, nothing written (use --apply)"
    print(f"{count(len(report.changes), 'item')} {done}{note}")
    return 0


def _prepare(args: argparse.Namespace) -> Tuple[CounterField, Optional[List[Any]]]:
    """The counter the command names, pointed at ``--endpoint-url`` / ``--region``, and its ``--parent`` keys."""
    target = resolve(args.target)
    counter: CounterField = target.counter if isinstance(target, Relation) else target
    if args.endpoint_url or args.region:
        point(counter, args.endpoint_url, args.region)
    assert counter.model is not None
    return counter, [parse_key(counter.model, raw) for raw in args.parents] if args.parents else None


def _reconcile(args: argparse.Namespace) -> int:
    target = resolve(args.target)
    _, parents = _prepare(args)
    if args.exports:
        report = _audit_export(target, args)
    else:
        if args.engine != "local" or args.workers is not None or args.export_of_copy:
            raise InvalidArgumentError("--engine, --workers and --export-of-copy say how an export is read: pass "
                                       "--export too")
        progress = AuditProgress(sys.stderr) if sys.stderr.isatty() else None
        report = audit(target, parents=parents, key_prefix=args.key_prefix, limit=args.limit,
                       segments=args.segments, workers=args.segments, progress=progress)
        if progress is not None:
            progress.close()
    if args.command == "audit":
        print_audit(report, args)
        return _unverified(report) or _not_found(report) or (1 if report.drifts else 0)
    done: List[Any] = []
    try:
        for drift in report.drifts:  # one at a time: a failure still reports what was done
            done.extend(repair([drift], max_attempts=args.max_attempts, dry_run=not args.apply).repairs)
    except Exception as error:
        if args.debug:
            raise
        print_repair(report, RepairReport(tuple(done)), args, error=error)
        args.reported = True  # the JSON record above carries the error
        raise
    repairs = RepairReport(tuple(done))
    print_repair(report, repairs, args)
    if report.unverifiable or any(r.status == "refused" for r in repairs.repairs):
        return _unverified(report) or 2
    if report.missing:
        return _not_found(report)
    if not args.apply:
        return 1 if report.drifts else 0
    return 0 if repairs.complete else 1


def _audit_export(target: Target, args: argparse.Namespace) -> AuditReport:
    """An audit from ``--export``, its progress on stderr: redrawn on a terminal, a line a stage elsewhere."""
    if args.parents or args.limit is not None or args.segments != 1:
        raise InvalidArgumentError("--export audits every parent of the export: --parent, --limit and --segments "
                                   "are for audits of the live table")
    spark = _spark_session() if args.engine == "spark" else None
    progress = _ExportProgress(sys.stderr)
    try:
        return audit(target, export=args.exports, engine=args.engine, spark=spark, workers=args.workers,
                     key_prefix=args.key_prefix, progress=progress, export_of_copy=args.export_of_copy)
    finally:
        progress.close()


def _spark_session() -> Any:
    """The session ``--engine spark`` runs on: ``SparkSession.builder.getOrCreate()`` (under ``spark-submit``,
    the job's own)."""
    try:
        sql = importlib.import_module("pyspark.sql")
    except ImportError as error:
        raise ConfigurationError("--engine spark needs PySpark: pip install 'pynamodb-counters[spark]' (and Java "
                                 "17 or later), or run the command with spark-submit") from error
    return sql.SparkSession.builder.getOrCreate()


def _unverified(report: AuditReport) -> int:
    """Exit 2 with a line on stderr for each reason parents could not be verified; ``0`` when all could."""
    if not report.unverifiable:
        return 0
    unloaded = sorted({name for u in report.unverifiable for name in u.unloaded})
    if unloaded:
        print(f"{PROG}: {count(sum(bool(u.unloaded) for u in report.unverifiable), 'parent')} unverifiable: fed "
              f"by {', '.join(unloaded)}, not loaded; load the modules declaring them with --import MODULE "
              f"(entries of relations removed from the code: pynamodb-counters feeders --forget)", file=sys.stderr)
    for cause in sorted({u.cause for u in report.unverifiable if u.cause}):
        print(f"{PROG}: {count(sum(u.cause == cause for u in report.unverifiable), 'parent')} unverifiable: "
              f"{cause}", file=sys.stderr)
    return 2


def _not_found(report: AuditReport) -> int:
    """Exit 2 with one line on stderr when ``--parent`` keys name no stored parent; ``0`` when all did."""
    if not report.missing:
        return 0
    keys = ", ".join(key_text(report.model, key) for key in report.missing)
    print(f"{PROG}: {count(len(report.missing), 'parent')} not found: {keys}", file=sys.stderr)
    return 2
