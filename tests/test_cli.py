"""The command line: audit and repair, exit codes (0 clean, 1 drift, 2 anything else), JSON and CSV for keys of
every type, and clear errors in one line (for a module not found, where it was looked for after it)."""
from __future__ import annotations

import base64
import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, List

import pytest

from pynamodb_counters import audit, repair, skip_counting
from pynamodb_counters.cli import main
from pynamodb_counters.exceptions import InvalidArgumentError
from pynamodb_counters.reconcile._auditor import Auditor
from pynamodb_counters.testing.server import ServedMoto
from tests.support.app_package import run, source, write_app, write_package
from tests.support.factories import post, snapshot, stored
from tests.support.models import Like, Post, Video, View


def drifted_posts() -> None:
    post("POST#ok")
    Like(pk="POST#ok", sk="LIKE#USER#1", liked_at=1).save()
    post("POST#bad")
    with skip_counting():
        Like(pk="POST#bad", sk="LIKE#USER#1", liked_at=1).save()
        Like(pk="POST#bad", sk="LIKE#USER#2", liked_at=1).save()


@pytest.mark.usefixtures("dynamodb")
def test_audit_exit_codes_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    drifted_posts()
    code, out, _ = run(capsys, "audit", "tests.support.models:Post.like_tally", "--json")
    assert code == 1
    report = json.loads(out)
    assert report["drifts"] == [{"model": "Post", "key": ["POST#bad", "META"], "attribute": "like_tally",
                                 "stored": 0, "actual": 2}]
    assert report["parents_checked"] == 2
    code, out, _ = run(capsys, "audit", "tests.support.models:Like.post", "--parent", '["POST#ok", "META"]', "--json")
    assert code == 0 and json.loads(out)["drifts"] == []


@pytest.mark.usefixtures("dynamodb")
def test_repair_is_a_dry_run_unless_applied(capsys: pytest.CaptureFixture[str]) -> None:
    drifted_posts()
    code, out, _ = run(capsys, "repair", "tests.support.models:Post.like_tally", "--csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 1 and [(r["key"], r["status"]) for r in rows] == [('["POST#bad", "META"]', "planned")]
    assert Post.get("POST#bad", "META").like_tally == 0
    code, out, _ = run(capsys, "repair", "tests.support.models:Post.like_tally", "--apply")
    assert code == 0 and "repaired 0 -> 2" in out
    assert Post.get("POST#bad", "META").like_tally == 2
    code, out, _ = run(capsys, "audit", "tests.support.models:Post.like_tally")
    assert code == 0 and "2 parents checked, 0 drifted" in out


@pytest.mark.usefixtures("dynamodb")
@pytest.mark.parametrize("target, message", [
    ("tests.support.models", "expected MODULE:Model.attribute"),
    ("tests.nowhere:Post.like_tally", "cannot import 'tests.nowhere'"),
    ("tests.support.models:Nobody.like_tally", "has no model 'Nobody'"),
    ("tests.support.models:Post.title", "is not a CounterField"),
    ("tests.support.models:Like", "Like is a child model with no counters of its own; name the counter its "
                                  "relations feed: tests.support.models:Post.like_tally (via Like.post)"),
    ("tests.support.models:Bookmark", "tests.support.models:Post.bookmark_count (via Bookmark.post), "
                                      "tests.support.models:User.bookmarks (via Bookmark.owner)"),
    ("tests.support.models:Like.liked_at", "Like.liked_at is not a CounterField or a counted_by relation; Like is a "
                                           "child model with no counters of its own; name the counter its relations "
                                           "feed: tests.support.models:Post.like_tally (via Like.post)"),
    ("tests.support.models:Post", "Post has 3 counters"),
])
def test_bad_targets_are_usage_errors(capsys: pytest.CaptureFixture[str], target: str, message: str) -> None:
    code, out, err = run(capsys, "audit", target)
    assert code == 2 and message in err and out == ""


@pytest.mark.usefixtures("dynamodb")
def test_reshard_creates_missing_shards_and_then_has_nothing_to_do(capsys: pytest.CaptureFixture[str]) -> None:
    with skip_counting():  # a video stored as a plain item, before its counter was sharded: no shard items
        Video(pk="VIDEO#old", sk="META").save()
    assert not [item for item in stored("Videos") if "_cshard" in item]
    code, out, _ = run(capsys, "reshard", "tests.support.models:Video.view_count", "16", "--json")
    assert code == 0 and json.loads(out) == {"model": "Video", "attribute": "view_count", "shards": 16,
                                             "parents_rewritten": 1}
    shards = sorted(int(item["_cshard"]["N"]) for item in stored("Videos") if "_cshard" in item)
    assert shards == list(range(1, 16))
    for user in range(16):
        View(pk="VIDEO#old", sk=f"VIEW#USER#{user}").save()
    assert Video.view_count.total(("VIDEO#old", "META")) == 16
    code, out, _ = run(capsys, "reshard", "tests.support.models:Video.view_count", "16",
                       "--parent", '["VIDEO#old", "META"]')
    assert code == 0 and "0 parents rewritten" in out


@pytest.mark.usefixtures("dynamodb")
@pytest.mark.parametrize("argv, message", [
    (["tests.support.models:Video.view_count", "0"], "from 1 to 100"),
    (["tests.support.models:Video.view_count", "101"], "from 1 to 100"),
    (["tests.support.models:Video.view_count", "4", "--parent", '["VIDEO#none", "META"]'], "does not exist"),
])
def test_reshard_errors_are_usage_errors_and_write_nothing(capsys: pytest.CaptureFixture[str], argv: List[str],
                                                         message: str) -> None:
    Video(pk="VIDEO#v1", sk="META").save()
    before = snapshot()
    code, out, err = run(capsys, "reshard", *argv)
    assert code == 2 and message in err and out == ""
    assert snapshot() == before


def test_an_unreachable_endpoint_is_a_usage_error(capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    for model in (Post, Like):
        monkeypatch.setattr(model.Meta, "host", model.Meta.host)  # restored afterwards: main() changes it
        monkeypatch.setattr(model, "_connection", None)
    code, _, err = run(capsys, "audit", "tests.support.models:Post.like_tally", "--endpoint-url", "http://127.0.0.1:9")
    assert code == 2 and "127.0.0.1:9" in err
    for model in (Post, Like):
        model._connection = None


@pytest.mark.slow
@pytest.mark.served
def test_the_installed_command_against_a_served_engine(served: ServedMoto) -> None:
    drifted_posts()
    command: List[str] = [sys.executable, "-m", "pynamodb_counters", "audit", "tests.support.models:Post.like_tally",
                          "--endpoint-url", served.endpoint_url, "--segments", "2", "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert [d["key"] for d in json.loads(done.stdout)["drifts"]] == [["POST#bad", "META"]]
    assert done.stderr == ""  # no progress bar when stderr is not a terminal
    done = subprocess.run([*command[:3], "repair", *command[4:], "--apply"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert Post.get("POST#bad", "META", consistent_read=True).like_tally == 2


@pytest.mark.usefixtures("dynamodb")
def test_audit_of_a_parent_that_does_not_exist_is_not_clean(capsys: pytest.CaptureFixture[str]) -> None:
    drifted_posts()
    code, out, err = run(capsys, "audit", "tests.support.models:Post.like_tally", "--parent", '["POST#typo", "META"]')
    assert code == 2
    assert 'Post ["POST#typo", "META"]: not found' in out and "0 parents checked, 0 drifted, 1 not found" in out
    assert err.strip().splitlines() == ['pynamodb-counters: 1 parent not found: ["POST#typo", "META"]']
    code, out, _ = run(capsys, "audit", "tests.support.models:Post.like_tally", "--parent", '["POST#typo", "META"]',
                       "--parent", '["POST#ok", "META"]', "--json")
    report = json.loads(out)
    assert code == 2 and report["missing"] == [["POST#typo", "META"]] and report["parents_checked"] == 1
    code, out, _ = run(capsys, "repair", "tests.support.models:Post.like_tally", "--parent", '["POST#typo", "META"]',
                       "--apply")
    assert code == 2 and "not found" in out
    assert [item for item in stored("Social") if item["pk"]["S"] == "POST#typo"] == []


@pytest.mark.usefixtures("dynamodb")
def test_counts_in_output_agree_with_their_nouns(capsys: pytest.CaptureFixture[str]) -> None:
    post("POST#ok")
    code, out, _ = run(capsys, "audit", "tests.support.models:Post.like_tally")
    assert code == 0 and "1 parent checked, 0 drifted" in out and "1 parents" not in out
    assert re.search(r", (1 read unit|[\d.]+ read units)\b", out)


def test_the_console_script_imports_models_from_the_current_directory(tmp_path: Path) -> None:
    write_package(tmp_path, "myapp", models=source("unfed_counter_models"))
    script = Path(sys.executable).parent / "pynamodb-counters"
    assert script.exists(), "the console script is installed beside the interpreter"
    finished = subprocess.run([str(script), "audit", "myapp.models:Post.like_tally"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=60)
    assert finished.returncode == 2
    assert "No module named" not in finished.stderr
    assert "no counted_by() relation feeds" in finished.stderr  # the module was imported: its counter is known


@pytest.mark.usefixtures("dynamodb")
@pytest.mark.parametrize("argv, kind, message", [
    (["audit", "tests.support.models:Like"], "ConfigurationError", "via Like.post"),
    (["repair", "tests.nowhere:Post.like_tally"], "ConfigurationError", "cannot import 'tests.nowhere'"),
    (["reshard", "tests.support.models:Video.view_count", "0"], "InvalidArgumentError", "from 1 to 100"),
    (["feeders", "tests.support.models:Post.like_tally", "--forget", "prefix=LIKE#"], "InvalidArgumentError",
     "is loaded"),
    (["audit", "tests.support.models:Post.like_tally", "--no-such-option"], "UsageError", "unrecognized arguments"),
])
def test_json_output_after_an_error_is_a_json_error_object(capsys: pytest.CaptureFixture[str], argv: List[str],
                                                           kind: str, message: str) -> None:
    code, out, err = run(capsys, *argv, "--json")
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err
    error = json.loads(out)
    assert set(error) == {"error", "type"} and error["type"] == kind and message in error["error"]
    code, out, _ = run(capsys, *argv)
    assert code == 2 and out == ""  # without --json, stdout stays empty


# -- exit status: 0 clean, 1 drift, 2 anything else, in one line on stderr ------------------------------------------
@pytest.fixture
def keyed(app: Path) -> Any:
    """Parents keyed by a number, by bytes, by a date; each with a drifted counter (2 children, 0 stored)."""
    import datetime

    write_app(app, keyed=source("keyed_models"))
    import app.keyed as module  # type: ignore[import-not-found]

    for model in (module.Numbered, module.Binary, module.Dated):
        model.create_table(billing_mode="PAY_PER_REQUEST")
    module.Numbered(n=7).save()
    module.Binary(b=b"\x00\xff").save()
    module.Dated(name="d", at=datetime.datetime(2024, 1, 2, tzinfo=datetime.timezone.utc)).save()
    return module


@pytest.mark.usefixtures("dynamodb")
def test_an_unexpected_error_exits_2_with_one_line_and_no_traceback(
        keyed: Any, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "audit", "app.keyed:Dated.broken")
    assert code == 2 and out == ""
    assert err.strip().splitlines() == ["pynamodb-counters: RuntimeError: the children function broke "
                                        "(run with --debug for the traceback)"]
    code, out, err = run(capsys, "audit", "app.keyed:Dated.broken", "--json")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert json.loads(out) == {"error": "RuntimeError: the children function broke", "type": "RuntimeError"}
    with pytest.raises(RuntimeError, match="the children function broke"):
        main(["audit", "app.keyed:Dated.broken", "--debug"])


@pytest.mark.usefixtures("dynamodb")
def test_a_module_that_fails_to_import_exits_2(app: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_app(app, broken="raise RuntimeError('no settings configured')\n", syntax="def (:\n")
    for target in ("app.broken:Post.like_tally", "app.syntax:Post.like_tally"):
        code, out, err = run(capsys, "audit", target)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "Traceback" not in err
        assert "cannot import 'app." in err
    code, out, err = run(capsys, "audit", "tests.support.models:Post.like_tally", "--import", "app.broken")
    assert code == 2 and "no settings configured" in err and len(err.strip().splitlines()) == 1


@pytest.mark.usefixtures("dynamodb")
@pytest.mark.parametrize("argv, module, missing", [
    (["repair", "nowhere_app.models:Post.like_tally"], "nowhere_app.models", "nowhere_app"),
    (["repair", "tests.support.models:Post.like_tally", "--import", "nowhere_app"], "nowhere_app", "nowhere_app"),
    (["repair", "tests.nowhere:Post.like_tally"], "tests.nowhere", "tests.nowhere"),
])
def test_a_module_not_found_is_one_line_then_where_it_was_looked_for_and_what_to_do(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, argv: List[str],
        module: str, missing: str) -> None:
    drifted_posts()
    before = snapshot()
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, *argv, "--apply")
    assert code == 2 and out == "" and snapshot() == before  # nothing repaired
    first, *advice = err.strip().splitlines()
    assert first == f"pynamodb-counters: cannot import {module!r}: ModuleNotFoundError: No module named {missing!r}"
    text = " ".join(" ".join(advice).split())
    assert f"current directory ({tmp_path})" in text and "sys.path" in text
    assert f"the one holding {module.partition('.')[0]!r}" in text and "PYTHONPATH=" in text
    assert "--import" in text
    if "." in missing:  # the package was found: where, in case it is another than the one meant
        assert f"{missing.rpartition('.')[0]!r} found in {Path(__file__).parent}" in text
    code, out, err = run(capsys, *argv, "--apply", "--json")  # for programs: one line on stderr, all in the JSON
    assert code == 2 and err.strip().splitlines() == [first] and snapshot() == before
    error = json.loads(out)
    assert error["type"] == "ConfigurationError" and error["error"] == f"{first.partition(': ')[2]} {text}"


@pytest.mark.usefixtures("dynamodb")
def test_a_module_found_that_fails_gets_no_advice_on_where_to_run(
        app: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_app(app, needs="import no_such_dependency_of_the_app\n")
    code, out, err = run(capsys, "audit", "app.needs:Post.like_tally")
    assert code == 2 and out == ""
    assert err.strip().splitlines() == ["pynamodb-counters: cannot import 'app.needs': ModuleNotFoundError: No module "
                                        "named 'no_such_dependency_of_the_app'"]
    write_app(app, declares="from pynamodb_counters.exceptions import ConfigurationError\n"
                            "raise ConfigurationError('what is wrong\\nhow to declare it right')\n")
    code, out, err = run(capsys, "audit", "app.declares:Post.like_tally")  # a declaration error keeps its advice
    assert code == 2 and out == ""
    assert err.strip().splitlines() == ["pynamodb-counters: cannot import 'app.declares': ConfigurationError: what is "
                                        "wrong", "  how to declare it right"]


def test_the_advice_for_a_module_not_found_works(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    write_package(project, "myapp", models=source("unfed_counter_models"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    script = Path(sys.executable).parent / "pynamodb-counters"
    command = [str(script), "audit", "myapp.models:Post.like_tally"]
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    finished = subprocess.run(command, cwd=elsewhere, env=environment, capture_output=True, text=True, timeout=60)
    assert finished.returncode == 2 and finished.stdout == ""
    assert finished.stderr.splitlines()[0] == ("pynamodb-counters: cannot import 'myapp.models': "
                                               "ModuleNotFoundError: No module named 'myapp'")
    assert "PYTHONPATH" in finished.stderr and str(elsewhere) in finished.stderr
    for cwd, path in ((project, None), (elsewhere, str(project))):  # from the project's directory; PYTHONPATH
        run_env = environment if path is None else {**environment, "PYTHONPATH": path}
        finished = subprocess.run(command, cwd=cwd, env=run_env, capture_output=True, text=True, timeout=60)
        assert finished.returncode == 2 and "No module named" not in finished.stderr
        assert "no counted_by() relation feeds" in finished.stderr  # imported: its counter is known


@pytest.mark.usefixtures("dynamodb")
@pytest.mark.parametrize("target, parent", [
    ("app.keyed:Numbered.tally", [7]),
    ("app.keyed:Binary.tally", [base64.b64encode(b"\x00\xff").decode()]),
    ("app.keyed:Dated.tally", ["d", "2024-01-02T00:00:00.000000+0000"]),
])
def test_json_output_is_valid_for_keys_of_every_type_and_keys_round_trip(
        keyed: Any, capsys: pytest.CaptureFixture[str], target: str, parent: List[Any]) -> None:
    for command in ("audit", "repair"):
        code, out, err = run(capsys, command, target, "--json")
        assert code == 1, err
        report = json.loads(out)
        assert [(d["key"], d["stored"], d["actual"]) for d in report["drifts"]] == [(parent, 0, 2)]
    code, out, _ = run(capsys, "audit", target, "--parent", json.dumps(parent), "--json")  # the key as printed
    assert code == 1 and json.loads(out)["drifts"][0]["key"] == parent
    code, out, _ = run(capsys, "repair", target, "--parent", json.dumps(parent), "--apply", "--json")
    assert code == 0 and json.loads(out)["repairs"][0]["status"] == "repaired"
    code, out, _ = run(capsys, "audit", target)
    assert code == 0 and "0 drifted" in out


@pytest.mark.usefixtures("dynamodb")
def test_a_failure_mid_repair_prints_what_was_done_and_the_error(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    for pk in ("POST#1", "POST#2"):
        post(pk)
        with skip_counting():
            Like(pk=pk, sk="LIKE#USER#1", liked_at=1).save()
    apply = Auditor._apply
    calls = []

    def fail_second(self: Any, *args: Any) -> bool:
        calls.append(args)
        if len(calls) == 2:
            raise ConnectionResetError("the connection dropped")
        return apply(self, *args)

    monkeypatch.setattr(Auditor, "_apply", fail_second)
    code, out, err = run(capsys, "repair", "tests.support.models:Post.like_tally", "--apply", "--json")
    report = json.loads(out)
    assert code == 2 and report["error"] == "ConnectionResetError: the connection dropped"
    assert [(r["key"], r["status"]) for r in report["repairs"]] == [(["POST#1", "META"], "repaired")]
    assert len(err.strip().splitlines()) == 1
    assert Post.get("POST#1", "META").like_tally == 1 and Post.get("POST#2", "META").like_tally == 0


# -- odd inputs are refused or understood ---------------------------------------------------------------------------
@pytest.mark.usefixtures("dynamodb")
@pytest.mark.parametrize("value", ["0", "-1", "x"])
def test_max_attempts_below_one_is_a_usage_error(capsys: pytest.CaptureFixture[str], value: str) -> None:
    post("POST#1")
    with skip_counting():
        Like(pk="POST#1", sk="LIKE#USER#1", liked_at=1).save()
    before = snapshot()
    code, out, err = run(capsys, "repair", "tests.support.models:Post.like_tally", "--apply", "--max-attempts", value)
    assert code == 2 and out == "" and "--max-attempts" in err and len(err.strip().splitlines()) == 1
    assert snapshot() == before
    with pytest.raises(InvalidArgumentError, match="max_attempts"):
        repair(audit(Post.like_tally).drifts, max_attempts=0)


@pytest.mark.usefixtures("dynamodb")
def test_a_numeric_hash_key_is_given_bare(keyed: Any, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "audit", "app.keyed:Numbered.tally", "--parent", "7")
    assert code == 1, err
    assert "Numbered [7] tally: stored 0, actual 2" in out
    code, out, err = run(capsys, "audit", "app.keyed:Binary.tally", "--parent", base64.b64encode(b"\x00\xff").decode())
    assert code == 1, err
    code, out, err = run(capsys, "audit", "app.keyed:Numbered.tally", "--parent", "seven")
    assert code == 2 and "--parent 'seven'" in err and "number" in err


@pytest.mark.usefixtures("dynamodb")
def test_an_unknown_option_is_one_line_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "audit", "tests.support.models:Post.like_tally", "--no-such-option")
    assert code == 2 and out == ""
    assert err.strip().splitlines() == ["pynamodb-counters: error: unrecognized arguments: --no-such-option "
                                        "(see pynamodb-counters --help)"]
    code, out, err = run(capsys, "nothing")
    assert code == 2 and len(err.strip().splitlines()) == 1
