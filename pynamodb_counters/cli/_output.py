"""
What the ``pynamodb-counters`` command prints: the reports of ``audit`` and ``repair`` (as text, ``--json`` or
``--csv``), an audit's progress on stderr, and an error as one line (or, with ``--json``, one JSON object).
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from typing import Any, Dict, Optional, TextIO

from ..exceptions import CounterError
from ..reconcile._reports import AuditReport, RepairReport, json_key
from ..reconcile.export._audit import ExportProgress

__all__ = ["AuditProgress", "ExportAuditProgress", "count", "describe", "json_error", "key_text", "print_audit",
           "print_repair"]


def describe(error: BaseException, hint: bool = True) -> str:
    """One line for an error: the library's and PynamoDB's own messages as they are, any other error with its
    type (and, with ``hint``, a pointer to ``--debug``)."""
    from pynamodb.exceptions import PynamoDBException

    if isinstance(error, (CounterError, PynamoDBException)):
        text = str(error)
    else:
        text = f"{type(error).__name__}: {error}" + (" (run with --debug for the traceback)" if hint else "")
    return " ".join(text.split())


def json_error(message: str, kind: str) -> None:
    """With ``--json``, an error is one JSON object on stdout too: ``{"error": message, "type": kind}``."""
    json.dump({"error": message, "type": kind}, sys.stdout)
    sys.stdout.write("\n")


def key_text(model: Any, key: Any) -> str:
    """``key`` of ``model`` as a JSON list, the form ``--parent`` takes back."""
    return json.dumps(json_key(model, key))


def print_audit(report: AuditReport, args: argparse.Namespace) -> None:
    """An audit's report on stdout: one JSON object (``--json``), CSV rows (``--csv``), or a line a finding and
    a summary."""
    out = sys.stdout
    if args.json:
        json.dump(report.as_dict(), out)
        out.write("\n")
    elif args.csv:
        writer = csv.writer(out)
        writer.writerow(["model", "key", "attribute", "stored", "actual"])
        for drift in report.drifts:
            writer.writerow([drift.model.__name__, key_text(drift.model, drift.key), drift.attribute,
                             "" if drift.stored is None else drift.stored, drift.actual])
        for unverified in report.unverifiable:
            writer.writerow([unverified.model.__name__, key_text(unverified.model, unverified.key),
                             unverified.attribute, "" if unverified.stored is None else unverified.stored,
                             unverified.reason])
    else:
        for drift in report.drifts:
            stored = "missing" if drift.stored is None else drift.stored
            print(f"{drift.model.__name__} {key_text(drift.model, drift.key)} {drift.attribute}: stored {stored}, "
                  f"actual {drift.actual}", file=out)
        _print_unverifiable(report, out)
        for key in report.missing:
            print(f"{report.model.__name__} {key_text(report.model, key)}: not found", file=out)
        print(_summary(report), file=out)


def _print_unverifiable(report: AuditReport, out: TextIO) -> None:
    for unverified in report.unverifiable:
        print(f"{unverified.model.__name__} {key_text(unverified.model, unverified.key)} {unverified.attribute}: "
              f"{unverified.reason}", file=out)


def print_repair(report: AuditReport, repairs: RepairReport, args: argparse.Namespace,
                  error: Optional[BaseException] = None) -> None:
    """A repair's report on stdout, as :func:`print_audit` prints an audit's; with ``error``, what was done before
    it (the JSON object carries the error)."""
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
            writer.writerow([r.drift.model.__name__, key_text(r.drift.model, r.drift.key), r.drift.attribute,
                             "" if r.drift.stored is None else r.drift.stored, r.drift.actual, r.status,
                             "" if r.before is None else r.before, r.after, r.attempts])
    else:
        for r in repairs.repairs:
            before = "missing" if r.before is None else r.before
            note = f" ({r.reason})" if r.reason else ""
            print(f"{r.drift.model.__name__} {key_text(r.drift.model, r.drift.key)} {r.drift.attribute}: "
                  f"{r.status} {before} -> {r.after}{note}", file=out)
        _print_unverifiable(report, out)
        if error is None:
            print(_summary(report) + ("" if args.apply else "; dry run, nothing written (use --apply)"), file=out)


def _summary(report: AuditReport) -> str:
    estimate = " (cost-model estimate included)" if report.read_units_estimated else ""
    unverifiable = f", {len(report.unverifiable)} unverifiable" if report.unverifiable else ""
    unverifiable += f", {len(report.missing)} not found" if report.missing else ""
    candidates = f"{count(len(report.candidates), 'candidate')} from the export, " if report.candidates else ""
    return (f"{count(report.parents_checked, 'parent')} checked, {candidates}{report.drift_count} drifted"
            f"{unverifiable}, "
            f"{count(report.read_units, 'read unit')}{estimate}")


def count(number: float, noun: str) -> str:
    """``"1 parent"``, ``"2 parents"``, ``"0.5 read units"``, ``"1000000 items"`` (never ``1e+06``)."""
    text = str(int(number)) if float(number).is_integer() else str(number)
    return f"{text} {noun}" + ("" if number == 1 else "s")


class AuditProgress:
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


class ExportAuditProgress:
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
            self._print(f"{self._read(state)}; {count(state.candidates or 0, 'candidate')}")
        elif stage == "verify" and state.verified == state.candidates:
            self._print(f"verified {state.verified}/{state.candidates} candidates on the live table")

    def _print(self, line: str) -> None:
        self.printed = line
        self.stream.write(f"{line}\n")
        self.stream.flush()

    @staticmethod
    def _read(state: ExportProgress) -> str:
        return f"read {state.files_read}/{state.files} files, {count(state.items_read, 'item')}"

    def _line(self, state: ExportProgress) -> str:
        if state.candidates is None:
            return self._read(state)
        return (f"{self._read(state)}; {count(state.candidates, 'candidate')}, verified {state.verified}/"
                f"{state.candidates}")

    def close(self) -> None:
        if self.live and self.last is not None:
            self.stream.write("\n")
            self.stream.flush()
