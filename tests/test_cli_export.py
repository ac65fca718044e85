"""The commands on an export: ``audit --export`` and ``repair --export --apply``, progress on stderr, the same
JSON and CSV as the live audit, and clear errors."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import List

import pytest

from pynamodb_counters import ExportProgress, audit, skip_counting
from pynamodb_counters.cli import _ExportProgress
from pynamodb_counters.testing import export_table, write_export
from tests.support.app_package import run
from tests.support.export_models import TABLE_MODELS, Forum, Member, Topic
from tests.support.factories import stored
from tests.support.models import Post, User

pytestmark = pytest.mark.usefixtures("dynamodb")

TARGET = "tests.support.export_models:Forum.topic_count"
#: the items of a forum with one topic: its own, the 3 shard items of its view_count, the topic
ITEMS = 1 + 3 + 1


@pytest.fixture
def counters_models() -> List[type]:
    return [*TABLE_MODELS, Post, User]


def drifted_forums(directory: Path) -> str:
    """Three forums, one topic each; f1 one short (an uncounted topic), f2 one high (moved by hand); their
    export."""
    for pk in ("FORUM#f0", "FORUM#f1", "FORUM#f2"):
        Forum(pk=pk, sk="META").save()
        Topic(pk=pk, sk="TOPIC#t0").save()
    with skip_counting():
        Topic(pk="FORUM#f1", sk="TOPIC#uncounted").save()
    Forum._get_connection().update_item("FORUM#f2", "META", actions=[Forum.topic_count.add(1)])
    return export_table(Forum, directory, files=3)


def test_audit_from_an_export_reports_as_the_live_audit(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    export = drifted_forums(tmp_path)
    code, out, err = run(capsys, "audit", TARGET, "--export", export, "--json")
    assert code == 1
    report = json.loads(out)
    live = audit(Forum.topic_count).as_dict()
    assert report["drifts"] == live["drifts"] == [
        {"model": "Forum", "key": ["FORUM#f1", "META"], "attribute": "topic_count", "stored": 1, "actual": 2},
        {"model": "Forum", "key": ["FORUM#f2", "META"], "attribute": "topic_count", "stored": 2, "actual": 1}]
    assert report["candidates"] == report["drifts"] and report["parents_checked"] == 3
    # stderr is not a terminal here: one line when the files are read, one when the candidates are verified
    assert err.splitlines() == [f"read 3/3 files, {3 * ITEMS + 1} items; 2 candidates",
                                "verified 2/2 candidates on the live table"]


def test_candidates_repaired_since_the_export_are_not_drifts(capsys: pytest.CaptureFixture[str],
                                                             tmp_path: Path) -> None:
    export = drifted_forums(tmp_path)
    with skip_counting():
        Topic(pk="FORUM#f1", sk="TOPIC#uncounted").delete()  # f1 exact again after the export
    code, out, _ = run(capsys, "audit", TARGET, "--export", export, "--csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 1 and [(r["key"], r["stored"], r["actual"]) for r in rows] == [('["FORUM#f2", "META"]', "2", "1")]
    code, out, _ = run(capsys, "audit", TARGET, "--export", export)
    assert "3 parents checked, 2 candidates from the export, 1 drifted" in out


def test_repair_from_an_export_is_a_dry_run_unless_applied(capsys: pytest.CaptureFixture[str],
                                                          tmp_path: Path) -> None:
    export = drifted_forums(tmp_path)
    code, out, _ = run(capsys, "repair", TARGET, "--export", export)
    assert code == 1 and "dry run, nothing written" in out
    assert Forum.get("FORUM#f1", "META").topic_count == 1
    code, out, _ = run(capsys, "repair", TARGET, "--export", export, "--apply")
    assert code == 0 and "repaired 1 -> 2" in out and "repaired 2 -> 1" in out
    assert not audit(Forum.topic_count).drifts


def test_an_exact_export_exits_zero(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    Forum(pk="FORUM#f0", sk="META").save()
    Topic(pk="FORUM#f0", sk="TOPIC#t0").save()
    code, out, err = run(capsys, "audit", TARGET, "--export", export_table(Forum, tmp_path), "--workers", "1")
    assert code == 0 and "1 parent checked, 0 drifted" in out
    assert err.splitlines() == [f"read 4/4 files, {ITEMS} items; 0 candidates"]


def test_two_exports_for_a_relation_in_another_table(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    Forum(pk="FORUM#f0", sk="META").save()
    with skip_counting():
        Member(pk="FORUM#f0", sk="MEMBER#u0").save()
    forums, members = export_table(Forum, tmp_path / "forums"), export_table(Member, tmp_path / "members")
    code, out, _ = run(capsys, "audit", "tests.support.export_models:Forum.member_count", "--export", forums,
                       "--export", members, "--json")
    assert code == 1 and [d["key"] for d in json.loads(out)["drifts"]] == [["FORUM#f0", "META"]]
    code, out, err = run(capsys, "audit", "tests.support.export_models:Forum.member_count", "--export", forums,
                         "--json")
    assert code == 2 and json.loads(out)["type"] == "ExportError" and "no export of the table 'Members'" in err


def test_an_export_of_another_account_is_refused_unless_declared_a_copy(capsys: pytest.CaptureFixture[str],
                                                                        tmp_path: Path) -> None:
    drifted_forums(tmp_path / "live")
    copy = write_export(tmp_path / "copy", stored("Forums"), files=2,
                        table_arn="arn:aws:dynamodb:eu-west-1:999999999999:table/Forums")
    code, out, err = run(capsys, "audit", TARGET, "--export", copy, "--json")
    assert code == 2 and json.loads(out)["type"] == "ExportError"  # an error object, no report
    assert "its account is 999999999999, the live table's 123456789012" in err and "--export-of-copy" in err
    code, out, _ = run(capsys, "repair", TARGET, "--export", copy, "--apply")
    assert code == 2 and out == ""  # nothing repaired, nothing reported
    assert Forum.get("FORUM#f1", "META").topic_count == 1
    code, out, _ = run(capsys, "audit", TARGET, "--export", copy, "--export-of-copy", "--json")
    assert code == 1 and [d["key"] for d in json.loads(out)["drifts"]] == [["FORUM#f1", "META"], ["FORUM#f2", "META"]]
    code, out, err = run(capsys, "audit", TARGET, "--export-of-copy", "--json")
    assert code == 2 and "pass --export too" in err


@pytest.mark.parametrize("argv, kind, message", [
    (["--engine", "spark"], "InvalidArgumentError", "pass --export too"),
    (["--workers", "2"], "InvalidArgumentError", "pass --export too"),
    (["--export", "{export}", "--parent", '["FORUM#f0", "META"]'], "InvalidArgumentError",
     "--parent, --limit and --segments are for audits of the live table"),
    (["--export", "{export}", "--limit", "3"], "InvalidArgumentError", "--parent, --limit and --segments"),
    (["--export", "{export}", "--workers", "0"], "UsageError", "at least 1"),
    (["--export", "{export}", "--engine", "dask"], "UsageError", "invalid choice: 'dask'"),
    (["--export", "{missing}"], "ExportError", "manifest-summary.json"),
])
def test_bad_export_options_are_usage_errors_and_report_nothing(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                                argv: List[str], kind: str, message: str) -> None:
    export = drifted_forums(tmp_path)
    argv = [a.format(export=export, missing=tmp_path / "nothing") for a in argv]
    code, out, err = run(capsys, "audit", TARGET, *argv, "--json")
    assert code == 2 and message in err
    assert json.loads(out)["type"] == kind  # an error object, no report
    code, out, _ = run(capsys, "repair", TARGET, *argv, "--apply")
    assert code == 2 and out == ""  # nothing repaired, nothing reported
    assert Forum.get("FORUM#f1", "META").topic_count == 1


def test_progress_lines_write_large_counts_in_full() -> None:
    """A million items is ``1000000 items``, not ``1e+06 items``; on a terminal the line is redrawn in place."""
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    for stream, expected in ((io.StringIO(), "read 16/16 files, 1000000 items; 1000 candidates\n"
                                             "verified 1000/1000 candidates on the live table\n"),
                             (Terminal(), "\rread 16/16 files, 1000000 items; 1000 candidates, verified 1000/1000\n")):
        shown = _ExportProgress(stream)
        shown(ExportProgress(files_read=16, files=16, items_read=1_000_000))
        shown(ExportProgress(files_read=16, files=16, items_read=1_000_000, candidates=1000, verified=0))
        shown(ExportProgress(files_read=16, files=16, items_read=1_000_000, candidates=1000, verified=1000))
        shown.close()
        assert stream.getvalue().split("\r")[-1] == expected.split("\r")[-1]
