"""
The ``pynamodb-counters`` command: ``demo``, ``audit``, ``repair``, ``feeders`` and ``reshard``.

Exit codes: ``0`` success (no drift; every drift repaired), ``1`` drift found or not all repaired, ``2`` anything
else: a usage or configuration error, parents that cannot be verified (fed by relations whose modules were not
loaded: ``--import``), or any error at all, with a one-line message on stderr (the traceback with ``--debug``).
"""
from __future__ import annotations

import argparse
import base64
import binascii
import csv
import importlib
import json
import os
import sys
import time
from typing import Any, Dict, List, NoReturn, Optional, TextIO, Tuple, Union

from pynamodb.constants import BINARY, NUMBER

from . import __version__
from ._compat import key_attributes
from ._export_audit import ExportProgress
from ._reports import AuditReport, RepairReport, json_key
from ._spec import counters_of, feeders_of, relations_of
from .attributes import CounterField
from .exceptions import ConfigurationError, CounterError, InvalidArgumentError
from .feeders import migrate_feeders
from .reconcile import audit, repair
from .relations import Relation
from .resharding import reshard

__all__ = ["main"]

Target = Union[CounterField, Relation]
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
            _json_error(done.message, "UsageError")
        return done.code if isinstance(done.code, int) else 2
    _import_from_here()
    try:
        if args.command == "demo":
            from .demo import run

            return run(endpoint_url=args.endpoint_url, region=args.region, table=args.table)
        for module in args.imports:
            _import(module)
        if args.command == "reshard":
            return _reshard(args)
        if args.command == "feeders":
            return _feeders(args)
        return _reconcile(args)
    except Exception as error:  # every failure is exit 2 and one line; the traceback on request
        if args.debug:
            raise
        if getattr(args, "json", False) and not getattr(args, "reported", False):
            _json_error(describe(error, hint=False), type(error).__name__)
        print(f"{PROG}: {describe(error)}", file=sys.stderr)
        return 2


def _json_error(message: str, kind: str) -> None:
    """With ``--json``, an error is one JSON object on stdout too: ``{"error": message, "type": kind}``."""
    json.dump({"error": message, "type": kind}, sys.stdout)
    sys.stdout.write("\n")


def _import_from_here() -> None:
    """Models are imported from the current directory first, as ``python -m pynamodb_counters`` (and ``flask``,
    ``celery``) do: a console script's own ``sys.path`` starts with its ``bin`` folder instead."""
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())


def describe(error: BaseException, hint: bool = True) -> str:
    """One line for an error: the library's and PynamoDB's own messages as they are, any other error with its
    type (and, with ``hint``, a pointer to ``--debug``)."""
    from pynamodb.exceptions import PynamoDBException

    if isinstance(error, (CounterError, PynamoDBException)):
        text = str(error)
    else:
        text = f"{type(error).__name__}: {error}" + (" (run with --debug for the traceback)" if hint else "")
    return " ".join(text.split())


def _import(module_name: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except Exception as error:  # a module failing to import, for whatever reason, is a usage error
        raise ConfigurationError(f"cannot import {module_name!r}: {type(error).__name__}: {error}") from error


def resolve(spec: str) -> Target:
    """``MODULE:Model.attribute`` (or ``MODULE:Model`` with one counter) as a counter or relation.

    :raises ConfigurationError: with what is wrong and what was expected.
    """
    module_name, _, path = spec.partition(":")
    if not module_name or not path:
        raise ConfigurationError(f"{spec!r}: expected MODULE:Model.attribute, such as myapp.models:Post.like_tally")
    module = _import(module_name)
    model_name, _, attribute = path.partition(".")
    model = getattr(module, model_name, None)
    if not isinstance(model, type):
        raise ConfigurationError(f"{module_name} has no model {model_name!r}")
    if not attribute:
        counters = list(counters_of(model))
        if not counters and relations_of(model):
            raise ConfigurationError(_fed_by(model))
        if len(counters) != 1:
            found = ", ".join(counters) or "none"
            raise ConfigurationError(f"{model_name} has {len(counters)} counters ({found}); name one: "
                                     f"{module_name}:{model_name}.<counter>")
        attribute = counters[0]
    target = getattr(model, attribute, None)
    if not isinstance(target, (CounterField, Relation)):
        known = _fed_by(model) if not counters_of(model) and relations_of(model) else \
            f"counters of {model_name}: {', '.join(counters_of(model)) or 'none'}"
        raise ConfigurationError(f"{model_name}.{attribute} is not a CounterField or a counted_by relation; {known}")
    return target


def _fed_by(model: Any) -> str:
    """What to name instead of a child model without counters: the counters its relations feed."""
    feeds = ", ".join(f"{r.parent_model.__module__}:{r.parent_model.__name__}.{r.attribute} "
                      f"(via {model.__name__}.{r.name})" for r in relations_of(model))
    return f"{model.__name__} is a child model with no counters of its own; name the counter its relations feed: " \
           f"{feeds}"


def _reshard(args: argparse.Namespace) -> int:
    counter, parents = _prepare(args)
    rewritten = reshard(counter, args.shards, parents=parents, key_prefix=args.key_prefix)
    if args.json:
        json.dump({"model": counter.model.__name__, "attribute": counter.name,  # type: ignore[union-attr]
                   "shards": args.shards, "parents_rewritten": rewritten}, sys.stdout)
        sys.stdout.write("\n")
    else:
        print(f"{counter.model.__name__}.{counter.name}: {_count(rewritten, 'parent')} rewritten for "  # type: ignore
              f"{_count(args.shards, 'shard')}")
    return 0


def _feeders(args: argparse.Namespace) -> int:
    counter, parents = _prepare(args)
    report = migrate_feeders(counter, parents=parents, key_prefix=args.key_prefix, limit=args.limit,
                             migrate=args.migrate, forget=args.forget, dry_run=not args.apply)
    if args.json:
        json.dump(report.as_dict(), sys.stdout)
        sys.stdout.write("\n")
        return 0
    print(f"{report.model.__name__}.{report.attribute}: {_count(report.parents_checked, 'parent')} checked")
    for entry in report.entries:
        named = f" ({entry.relation})" if entry.relation else ""
        print(f"  {entry.status:<8} {entry.feeder}{named}: {_count(entry.parents, 'parent')}")
    for change in report.changes:
        shard = f" shard {change.shard}" if change.shard else ""
        edits = [f"+ {entry}" for entry in change.added] + [f"- {entry}" for entry in change.removed]
        print(f"{change.model.__name__} {_key_text(change.model, change.key)}{shard}: {change.status} "
              f"{', '.join(edits)}")
    done = "rewritten" if report.applied else "to rewrite"
    note = "" if report.applied or not report.changes else "; dry run, nothing written (use --apply)"
    print(f"{_count(len(report.changes), 'item')} {done}{note}")
    return 0


def _prepare(args: argparse.Namespace) -> Tuple[CounterField, Optional[List[Any]]]:
    """The counter the command names, pointed at ``--endpoint-url`` / ``--region``, and its ``--parent`` keys."""
    target = resolve(args.target)
    counter: CounterField = target.counter if isinstance(target, Relation) else target  # type: ignore[assignment]
    if args.endpoint_url or args.region:
        _point(counter, args.endpoint_url, args.region)
    assert counter.model is not None
    return counter, [_parse_key(counter.model, raw) for raw in args.parents] if args.parents else None


def _reconcile(args: argparse.Namespace) -> int:
    target = resolve(args.target)
    _, parents = _prepare(args)
    if args.exports:
        report = _audit_export(target, args)
    else:
        if args.engine != "local" or args.workers is not None:
            raise InvalidArgumentError("--engine and --workers choose how an export is read: pass --export too")
        progress = _Progress(sys.stderr) if sys.stderr.isatty() else None
        report = audit(target, parents=parents, key_prefix=args.key_prefix, limit=args.limit,
                       segments=args.segments, workers=args.segments, progress=progress)
        if progress is not None:
            progress.close()
    if args.command == "audit":
        _print_audit(report, args)
        return _unverified(report) or _not_found(report) or (1 if report.drifts else 0)
    done: List[Any] = []
    try:
        for drift in report.drifts:  # one at a time: a failure still reports what was done
            done.extend(repair([drift], max_attempts=args.max_attempts, dry_run=not args.apply).repairs)
    except Exception as error:
        if args.debug:
            raise
        _print_repair(report, RepairReport(tuple(done)), args, error=error)
        args.reported = True  # the JSON record above carries the error
        raise
    repairs = RepairReport(tuple(done))
    _print_repair(report, repairs, args)
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
                     key_prefix=args.key_prefix, progress=progress)
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
    """Exit 2 with one line on stderr when parents could not be verified; ``0`` when all could."""
    if not report.unverifiable:
        return 0
    unloaded = sorted({name for u in report.unverifiable for name in u.unloaded})
    print(f"{PROG}: {_count(len(report.unverifiable), 'parent')} unverifiable: fed by {', '.join(unloaded)}, "
          f"not loaded; load the modules declaring them with --import MODULE (entries of relations removed from "
          f"the code: pynamodb-counters feeders --forget)", file=sys.stderr)
    return 2


def _not_found(report: AuditReport) -> int:
    """Exit 2 with one line on stderr when ``--parent`` keys name no stored parent; ``0`` when all did."""
    if not report.missing:
        return 0
    keys = ", ".join(_key_text(report.model, key) for key in report.missing)
    print(f"{PROG}: {_count(len(report.missing), 'parent')} not found: {keys}", file=sys.stderr)
    return 2


def _point(counter: CounterField, endpoint_url: Optional[str], region: Optional[str]) -> None:
    """Send the counter's parent model and every child model feeding it to another endpoint or region."""
    models: List[Any] = [counter.model] + [relation.child_model for relation in feeders_of(counter)]
    for model in models:
        if endpoint_url:
            model.Meta.host = endpoint_url
        if region:
            model.Meta.region = region
        model._connection = None


def _parse_key(model: Any, raw: str) -> Any:
    """A ``--parent`` value as a key of ``model``: a JSON list of its key values, or a bare hash key; each value
    as the key attribute takes it (a number, bytes from base64, a date in PynamoDB's format)."""
    if raw.startswith("["):
        try:
            values = json.loads(raw)
        except json.JSONDecodeError as error:
            raise ConfigurationError(f"--parent {raw!r} is not a JSON list: {error}") from error
        if not isinstance(values, list):
            raise ConfigurationError(f"--parent {raw!r} is not a JSON list")
    else:
        values = [raw]
    converted = [_key_value(attribute, value, raw) for attribute, value in zip(key_attributes(model), values)]
    return tuple(converted + values[len(converted):])


def _key_value(attribute: Any, value: Any, raw: str) -> Any:
    where = f"--parent {raw!r}: {type(attribute).__name__} {attribute.attr_name}"
    if not isinstance(value, str):
        if attribute.attr_type == NUMBER and isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
        raise ConfigurationError(f"{where} takes a {'number' if attribute.attr_type == NUMBER else 'string'}, not "
                                 f"{value!r}")
    try:
        if attribute.attr_type == NUMBER:
            number = json.loads(value)
            if isinstance(number, bool) or not isinstance(number, (int, float)):
                raise ValueError(value)
            return number
        if attribute.attr_type == BINARY:
            return base64.b64decode(value, validate=True)
        return attribute.deserialize(value)
    except (ValueError, TypeError, binascii.Error) as error:
        kind = {NUMBER: "a number", BINARY: "bytes in base64"}.get(attribute.attr_type, "a value it can read")
        raise ConfigurationError(f"{where} takes {kind}: {error}") from error


def _key_text(model: Any, key: Any) -> str:
    return json.dumps(json_key(model, key))


def _print_audit(report: AuditReport, args: argparse.Namespace) -> None:
    out = sys.stdout
    if args.json:
        json.dump(report.as_dict(), out)
        out.write("\n")
    elif args.csv:
        writer = csv.writer(out)
        writer.writerow(["model", "key", "attribute", "stored", "actual"])
        for drift in report.drifts:
            writer.writerow([drift.model.__name__, _key_text(drift.model, drift.key), drift.attribute,
                             "" if drift.stored is None else drift.stored, drift.actual])
        for unverified in report.unverifiable:
            writer.writerow([unverified.model.__name__, _key_text(unverified.model, unverified.key),
                             unverified.attribute, "" if unverified.stored is None else unverified.stored,
                             unverified.reason])
    else:
        for drift in report.drifts:
            stored = "missing" if drift.stored is None else drift.stored
            print(f"{drift.model.__name__} {_key_text(drift.model, drift.key)} {drift.attribute}: stored {stored}, "
                  f"actual {drift.actual}", file=out)
        _print_unverifiable(report, out)
        for key in report.missing:
            print(f"{report.model.__name__} {_key_text(report.model, key)}: not found", file=out)
        print(_summary(report), file=out)


def _print_unverifiable(report: AuditReport, out: TextIO) -> None:
    for unverified in report.unverifiable:
        print(f"{unverified.model.__name__} {_key_text(unverified.model, unverified.key)} {unverified.attribute}: "
              f"{unverified.reason}", file=out)


def _print_repair(report: AuditReport, repairs: RepairReport, args: argparse.Namespace,
                  error: Optional[BaseException] = None) -> None:
    out = sys.stdout
    if args.json:
        record: Dict[str, Any] = dict(report.as_dict(), applied=args.apply, **repairs.as_dict())
        if error is not None:
            record.update(error=describe(error, hint=False), type=type(error).__name__)
        json.dump(record, out)
        out.write("\n")
    elif args.csv:
        writer = csv.writer(out)
        writer.writerow(["model", "key", "attribute", "stored", "actual", "status", "before", "after", "attempts"])
        for r in repairs.repairs:
            writer.writerow([r.drift.model.__name__, _key_text(r.drift.model, r.drift.key), r.drift.attribute,
                             "" if r.drift.stored is None else r.drift.stored, r.drift.actual, r.status,
                             "" if r.before is None else r.before, r.after, r.attempts])
    else:
        for r in repairs.repairs:
            before = "missing" if r.before is None else r.before
            note = f" ({r.reason})" if r.reason else ""
            print(f"{r.drift.model.__name__} {_key_text(r.drift.model, r.drift.key)} {r.drift.attribute}: "
                  f"{r.status} {before} -> {r.after}{note}", file=out)
        _print_unverifiable(report, out)
        if error is None:
            print(_summary(report) + ("" if args.apply else "; dry run, nothing written (use --apply)"), file=out)


def _summary(report: AuditReport) -> str:
    estimate = " (cost-model estimate included)" if report.read_units_estimated else ""
    unverifiable = f", {len(report.unverifiable)} unverifiable" if report.unverifiable else ""
    unverifiable += f", {len(report.missing)} not found" if report.missing else ""
    candidates = f"{_count(len(report.candidates), 'candidate')} from the export, " if report.candidates else ""
    return (f"{_count(report.parents_checked, 'parent')} checked, {candidates}{report.drifted} drifted"
            f"{unverifiable}, "
            f"{_count(report.read_units, 'read unit')}{estimate}")


def _count(number: float, noun: str) -> str:
    """``"1 parent"``, ``"2 parents"``, ``"0.5 read units"``, ``"1000000 items"`` (never ``1e+06``)."""
    text = str(int(number)) if float(number).is_integer() else str(number)
    return f"{text} {noun}" + ("" if number == 1 else "s")


class _Progress:
    """A one-line progress display on a terminal, redrawn at most ten times a second."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.shown = 0.0

    def __call__(self, done: int, total: Optional[int]) -> None:
        now = time.monotonic()
        if now - self.shown >= 0.1 or done == total:
            self.shown = now
            of = f"/{total}" if total is not None else ""
            self.stream.write(f"\raudited {done}{of} {'parent' if (total or done) == 1 else 'parents'}")
            self.stream.flush()

    def close(self) -> None:
        self.stream.write("\n")
        self.stream.flush()


class _ExportProgress:
    """The progress of an audit from an export: files and items read, candidates, verified. On a terminal, one
    line redrawn at most ten times a second; elsewhere (a log), one line when the files are read and one when the
    candidates are verified."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.live = stream.isatty()
        self.shown = 0.0
        self.last: Optional[ExportProgress] = None
        self.printed: Optional[str] = None

    def __call__(self, state: ExportProgress) -> None:
        self.last = state
        stage = "read" if state.candidates is None else "verify"
        if self.live:
            now = time.monotonic()
            if now - self.shown >= 0.1 or state.files_read == state.files:
                self.shown = now
                self.stream.write(f"\r{self._line(state)}")
                self.stream.flush()
        elif stage == "verify" and self.printed is None:
            self._print(f"{self._read(state)}; {_count(state.candidates or 0, 'candidate')}")
        elif stage == "verify" and state.verified == state.candidates:
            self._print(f"verified {state.verified}/{state.candidates} candidates on the live table")

    def _print(self, line: str) -> None:
        self.printed = line
        self.stream.write(f"{line}\n")
        self.stream.flush()

    @staticmethod
    def _read(state: ExportProgress) -> str:
        return f"read {state.files_read}/{state.files} files, {_count(state.items_read, 'item')}"

    def _line(self, state: ExportProgress) -> str:
        if state.candidates is None:
            return self._read(state)
        return (f"{self._read(state)}; {_count(state.candidates, 'candidate')}, verified {state.verified}/"
                f"{state.candidates}")

    def close(self) -> None:
        if self.live and self.last is not None:
            self.stream.write("\n")
            self.stream.flush()
