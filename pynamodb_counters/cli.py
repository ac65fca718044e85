"""
The ``pynamodb-counters`` command: ``demo``, ``audit``, ``repair`` and ``reshard``.

Exit codes: ``0`` success (no drift; every drift repaired), ``1`` drift found or not all repaired, ``2`` usage
or configuration error, with a one-line message on stderr.
"""
from __future__ import annotations

import argparse
import csv
import importlib
import json
import sys
import time
from typing import Any, List, Optional, TextIO, Tuple, Union

import botocore.exceptions
from pynamodb.exceptions import PynamoDBException

from . import __version__
from .attributes import CounterField
from .exceptions import ConfigurationError, CounterError
from .reconcile import AuditReport, RepairReport, audit, repair
from .relations import Relation, counters_of, feeders_of
from .resharding import reshard

__all__ = ["main"]

Target = Union[CounterField, Relation]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pynamodb-counters",
                                     description="Exact reference counters for PynamoDB models.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    demo = commands.add_parser("demo", help="tell the likes story (embedded moto unless --endpoint-url)")
    demo.add_argument("--endpoint-url", help="a DynamoDB endpoint; default: an embedded moto backend")
    demo.add_argument("--region", default="us-east-1")
    demo.add_argument("--table", default="Social", help="table name (created if missing)")
    for name, text in (("audit", "compare counters with their children; exit 1 if any drifted"),
                       ("repair", "audit, then fix the drifted counters (a dry run unless --apply)")):
        command = commands.add_parser(name, help=text, description=text)
        command.add_argument("target", metavar="MODULE:Model.attribute",
                             help="the counter (myapp.models:Post.like_tally), or MODULE:Model for its only one")
        command.add_argument("--parent", action="append", metavar="KEY", dest="parents",
                             help='a parent key: a hash key, or a JSON list ["POST#a91f", "META"] (repeatable)')
        command.add_argument("--limit", type=int, help="audit at most N parents of a Scan")
        command.add_argument("--segments", type=int, default=1,
                             help="parallel Scan segments, or threads for --parent keys (default 1)")
        command.add_argument("--key-prefix", help="only parents whose hash key starts with this")
        command.add_argument("--endpoint-url", help="the DynamoDB endpoint (default: the models' Meta.host)")
        command.add_argument("--region", help="the AWS region (default: the models' Meta.region)")
        output = command.add_mutually_exclusive_group()
        output.add_argument("--json", action="store_true", help="print one JSON object")
        output.add_argument("--csv", action="store_true", help="print CSV rows")
        if name == "repair":
            command.add_argument("--apply", action="store_true", help="write the repairs (default: dry run)")
            command.add_argument("--max-attempts", type=int, default=5,
                                 help="recounts per parent while live writes move it (default 5)")
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
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """Run the command line; return its exit code."""
    args = build_parser().parse_args(argv)
    try:
        if args.command == "demo":
            from .demo import run

            return run(endpoint_url=args.endpoint_url, region=args.region, table=args.table)
        if args.command == "reshard":
            return _reshard(args)
        return _reconcile(args)
    except (CounterError, PynamoDBException, botocore.exceptions.BotoCoreError, ValueError) as error:
        print(f"pynamodb-counters: {error}", file=sys.stderr)
        return 2


def resolve(spec: str) -> Target:
    """``MODULE:Model.attribute`` (or ``MODULE:Model`` with one counter) as a counter or relation.

    :raises ConfigurationError: with what is wrong and what was expected.
    """
    module_name, _, path = spec.partition(":")
    if not module_name or not path:
        raise ConfigurationError(f"{spec!r}: expected MODULE:Model.attribute, such as myapp.models:Post.like_tally")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ConfigurationError(f"cannot import {module_name!r}: {error}") from error
    model_name, _, attribute = path.partition(".")
    model = getattr(module, model_name, None)
    if not isinstance(model, type):
        raise ConfigurationError(f"{module_name} has no model {model_name!r}")
    if not attribute:
        counters = list(counters_of(model))
        if len(counters) != 1:
            found = ", ".join(counters) or "none"
            raise ConfigurationError(f"{model_name} has {len(counters)} counters ({found}); name one: "
                                     f"{module_name}:{model_name}.<counter>")
        attribute = counters[0]
    target = getattr(model, attribute, None)
    if not isinstance(target, (CounterField, Relation)):
        raise ConfigurationError(f"{model_name}.{attribute} is not a CounterField or a counted_by relation; "
                                 f"counters of {model_name}: {', '.join(counters_of(model)) or 'none'}")
    return target


def _reshard(args: argparse.Namespace) -> int:
    counter, parents = _prepare(args)
    rewritten = reshard(counter, args.shards, parents=parents, key_prefix=args.key_prefix)
    if args.json:
        json.dump({"model": counter.model.__name__, "attribute": counter.name,  # type: ignore[union-attr]
                   "shards": args.shards, "parents_rewritten": rewritten}, sys.stdout)
        sys.stdout.write("\n")
    else:
        print(f"{counter.model.__name__}.{counter.name}: {rewritten} parents rewritten for "  # type: ignore[union-attr]
              f"{args.shards} shards")
    return 0


def _prepare(args: argparse.Namespace) -> Tuple[CounterField, Optional[List[Any]]]:
    """The counter the command names, pointed at ``--endpoint-url`` / ``--region``, and its ``--parent`` keys."""
    target = resolve(args.target)
    counter: CounterField = target.counter if isinstance(target, Relation) else target  # type: ignore[assignment]
    if args.endpoint_url or args.region:
        _point(counter, args.endpoint_url, args.region)
    return counter, [_parse_key(raw) for raw in args.parents] if args.parents else None


def _reconcile(args: argparse.Namespace) -> int:
    target = resolve(args.target)
    _, parents = _prepare(args)
    progress = _Progress(sys.stderr) if sys.stderr.isatty() else None
    report = audit(target, parents=parents, key_prefix=args.key_prefix, limit=args.limit,
                   segments=args.segments, workers=args.segments, progress=progress)
    if progress is not None:
        progress.close()
    if args.command == "audit":
        _print_audit(report, args)
        return 1 if report.drifts else 0
    repairs = repair(report.drifts, max_attempts=args.max_attempts, dry_run=not args.apply)
    _print_repair(report, repairs, args)
    if not args.apply:
        return 1 if report.drifts else 0
    return 0 if repairs.complete else 1


def _point(counter: CounterField, endpoint_url: Optional[str], region: Optional[str]) -> None:
    """Send the counter's parent model and every child model feeding it to another endpoint or region."""
    models: List[Any] = [counter.model] + [relation.child_model for relation in feeders_of(counter)]
    for model in models:
        if endpoint_url:
            model.Meta.host = endpoint_url
        if region:
            model.Meta.region = region
        model._connection = None


def _parse_key(raw: str) -> Any:
    if raw.startswith("["):
        try:
            key = json.loads(raw)
        except json.JSONDecodeError as error:
            raise ConfigurationError(f"--parent {raw!r} is not a JSON list: {error}") from error
        return tuple(key)
    return raw


def _print_audit(report: AuditReport, args: argparse.Namespace) -> None:
    out = sys.stdout
    if args.json:
        json.dump(report.as_dict(), out)
        out.write("\n")
    elif args.csv:
        writer = csv.writer(out)
        writer.writerow(["model", "key", "attribute", "stored", "actual"])
        for drift in report.drifts:
            writer.writerow([drift.model.__name__, json.dumps(list(drift.key)), drift.attribute,
                             "" if drift.stored is None else drift.stored, drift.actual])
    else:
        for drift in report.drifts:
            stored = "missing" if drift.stored is None else drift.stored
            print(f"{drift.model.__name__} {json.dumps(list(drift.key))} {drift.attribute}: stored {stored}, "
                  f"actual {drift.actual}", file=out)
        print(_summary(report), file=out)


def _print_repair(report: AuditReport, repairs: RepairReport, args: argparse.Namespace) -> None:
    out = sys.stdout
    if args.json:
        json.dump(dict(report.as_dict(), applied=args.apply, **repairs.as_dict()), out)
        out.write("\n")
    elif args.csv:
        writer = csv.writer(out)
        writer.writerow(["model", "key", "attribute", "stored", "actual", "status", "before", "after", "attempts"])
        for r in repairs.repairs:
            writer.writerow([r.drift.model.__name__, json.dumps(list(r.drift.key)), r.drift.attribute,
                             "" if r.drift.stored is None else r.drift.stored, r.drift.actual, r.status,
                             "" if r.before is None else r.before, r.after, r.attempts])
    else:
        for r in repairs.repairs:
            before = "missing" if r.before is None else r.before
            note = f" ({r.reason})" if r.reason else ""
            print(f"{r.drift.model.__name__} {json.dumps(list(r.drift.key))} {r.drift.attribute}: {r.status} "
                  f"{before} -> {r.after}{note}", file=out)
        print(_summary(report) + ("" if args.apply else "; dry run, nothing written (use --apply)"), file=out)


def _summary(report: AuditReport) -> str:
    estimate = " (cost-model estimate included)" if report.read_units_estimated else ""
    return (f"{report.parents_checked} parents checked, {report.drifted} drifted, "
            f"{report.read_units:g} read units{estimate}")


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
            self.stream.write(f"\raudited {done}{of} parents")
            self.stream.flush()

    def close(self) -> None:
        self.stream.write("\n")
        self.stream.flush()
