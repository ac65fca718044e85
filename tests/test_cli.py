"""The command line: audit and repair, exit codes, JSON and CSV, and clear errors."""
from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

import pytest

from pynamodb_counters import skip_counting
from pynamodb_counters.cli import main
from pynamodb_counters.testing.server import ServedMoto
from tests.factories import post, snapshot, stored
from tests.models import Like, Post, Video, View


def drifted_posts() -> None:
    post("POST#ok")
    Like(pk="POST#ok", sk="LIKE#USER#1", liked_at=1).save()
    post("POST#bad")
    with skip_counting():
        Like(pk="POST#bad", sk="LIKE#USER#1", liked_at=1).save()
        Like(pk="POST#bad", sk="LIKE#USER#2", liked_at=1).save()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> Tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.usefixtures("dynamodb")
def test_audit_exit_codes_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    drifted_posts()
    code, out, _ = run(capsys, "audit", "tests.models:Post.like_tally", "--json")
    assert code == 1
    report = json.loads(out)
    assert report["drifts"] == [{"model": "Post", "key": ["POST#bad", "META"], "attribute": "like_tally",
                                 "stored": 0, "actual": 2}]
    assert report["parents_checked"] == 2
    code, out, _ = run(capsys, "audit", "tests.models:Like.post", "--parent", '["POST#ok", "META"]', "--json")
    assert code == 0 and json.loads(out)["drifts"] == []


@pytest.mark.usefixtures("dynamodb")
def test_repair_is_a_dry_run_unless_applied(capsys: pytest.CaptureFixture[str]) -> None:
    drifted_posts()
    code, out, _ = run(capsys, "repair", "tests.models:Post.like_tally", "--csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 1 and [(r["key"], r["status"]) for r in rows] == [('["POST#bad", "META"]', "planned")]
    assert Post.get("POST#bad", "META").like_tally == 0
    code, out, _ = run(capsys, "repair", "tests.models:Post.like_tally", "--apply")
    assert code == 0 and "repaired 0 -> 2" in out
    assert Post.get("POST#bad", "META").like_tally == 2
    code, out, _ = run(capsys, "audit", "tests.models:Post.like_tally")
    assert code == 0 and "2 parents checked, 0 drifted" in out


@pytest.mark.usefixtures("dynamodb")
@pytest.mark.parametrize("target, message", [
    ("tests.models", "expected MODULE:Model.attribute"),
    ("tests.nowhere:Post.like_tally", "cannot import 'tests.nowhere'"),
    ("tests.models:Nobody.like_tally", "has no model 'Nobody'"),
    ("tests.models:Post.title", "is not a CounterField"),
    ("tests.models:Like", "Like is a child model with no counters of its own; name the counter its relations "
                          "feed: tests.models:Post.like_tally (via Like.post)"),
    ("tests.models:Bookmark", "tests.models:Post.bookmark_count (via Bookmark.post), tests.models:User.bookmarks "
                              "(via Bookmark.owner)"),
    ("tests.models:Like.liked_at", "Like.liked_at is not a CounterField or a counted_by relation; Like is a child "
                                   "model with no counters of its own; name the counter its relations feed: "
                                   "tests.models:Post.like_tally (via Like.post)"),
    ("tests.models:Post", "Post has 3 counters"),
])
def test_bad_targets_are_usage_errors(capsys: pytest.CaptureFixture[str], target: str, message: str) -> None:
    code, out, err = run(capsys, "audit", target)
    assert code == 2 and message in err and out == ""


@pytest.mark.usefixtures("dynamodb")
def test_reshard_creates_missing_shards_and_then_has_nothing_to_do(capsys: pytest.CaptureFixture[str]) -> None:
    with skip_counting():  # a video stored as a plain item, before its counter was sharded: no shard items
        Video(pk="VIDEO#old", sk="META").save()
    assert not [item for item in stored("Videos") if "_cshard" in item]
    code, out, _ = run(capsys, "reshard", "tests.models:Video.view_count", "16", "--json")
    assert code == 0 and json.loads(out) == {"model": "Video", "attribute": "view_count", "shards": 16,
                                             "parents_rewritten": 1}
    shards = sorted(int(item["_cshard"]["N"]) for item in stored("Videos") if "_cshard" in item)
    assert shards == list(range(1, 16))
    for user in range(16):
        View(pk="VIDEO#old", sk=f"VIEW#USER#{user}").save()
    assert Video.view_count.total(("VIDEO#old", "META")) == 16
    code, out, _ = run(capsys, "reshard", "tests.models:Video.view_count", "16", "--parent", '["VIDEO#old", "META"]')
    assert code == 0 and "0 parents rewritten" in out


@pytest.mark.usefixtures("dynamodb")
@pytest.mark.parametrize("argv, message", [
    (["tests.models:Video.view_count", "0"], "from 1 to 100"),
    (["tests.models:Video.view_count", "101"], "from 1 to 100"),
    (["tests.models:Video.view_count", "4", "--parent", '["VIDEO#none", "META"]'], "does not exist"),
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
    code, _, err = run(capsys, "audit", "tests.models:Post.like_tally", "--endpoint-url", "http://127.0.0.1:9")
    assert code == 2 and "127.0.0.1:9" in err
    for model in (Post, Like):
        model._connection = None


@pytest.mark.slow
@pytest.mark.served
def test_the_installed_command_against_a_served_engine(served: ServedMoto) -> None:
    drifted_posts()
    command: List[str] = [sys.executable, "-m", "pynamodb_counters", "audit", "tests.models:Post.like_tally",
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
    code, out, err = run(capsys, "audit", "tests.models:Post.like_tally", "--parent", '["POST#typo", "META"]')
    assert code == 2
    assert 'Post ["POST#typo", "META"]: not found' in out and "0 parents checked, 0 drifted, 1 not found" in out
    assert err.strip().splitlines() == ['pynamodb-counters: 1 parent not found: ["POST#typo", "META"]']
    code, out, _ = run(capsys, "audit", "tests.models:Post.like_tally", "--parent", '["POST#typo", "META"]',
                       "--parent", '["POST#ok", "META"]', "--json")
    report = json.loads(out)
    assert code == 2 and report["missing"] == [["POST#typo", "META"]] and report["parents_checked"] == 1
    code, out, _ = run(capsys, "repair", "tests.models:Post.like_tally", "--parent", '["POST#typo", "META"]',
                       "--apply")
    assert code == 2 and "not found" in out
    assert [item for item in stored("Social") if item["pk"]["S"] == "POST#typo"] == []


@pytest.mark.usefixtures("dynamodb")
def test_counts_in_output_agree_with_their_nouns(capsys: pytest.CaptureFixture[str]) -> None:
    post("POST#ok")
    code, out, _ = run(capsys, "audit", "tests.models:Post.like_tally")
    assert code == 0 and "1 parent checked, 0 drifted" in out and "1 parents" not in out
    assert re.search(r", (1 read unit|[\d.]+ read units)\b", out)


def test_the_console_script_imports_models_from_the_current_directory(tmp_path: Path) -> None:
    (tmp_path / "myapp").mkdir()
    (tmp_path / "myapp" / "__init__.py").write_text("")
    (tmp_path / "myapp" / "models.py").write_text(
        "from pynamodb.attributes import UnicodeAttribute\n"
        "from pynamodb.models import Model\n"
        "from pynamodb_counters import CounterField, CounterMixin\n\n\n"
        "class Post(CounterMixin, Model):\n"
        "    class Meta:\n"
        "        table_name = 'Posts'\n"
        "        region = 'us-east-1'\n\n"
        "    pk = UnicodeAttribute(hash_key=True)\n"
        "    like_tally = CounterField()\n")
    script = Path(sys.executable).parent / "pynamodb-counters"
    assert script.exists(), "the console script is installed beside the interpreter"
    finished = subprocess.run([str(script), "audit", "myapp.models:Post.like_tally"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=60)
    assert finished.returncode == 2
    assert "No module named" not in finished.stderr
    assert "no counted_by() relation feeds" in finished.stderr  # the module was imported: its counter is known


@pytest.mark.usefixtures("dynamodb")
@pytest.mark.parametrize("argv, kind, message", [
    (["audit", "tests.models:Like"], "ConfigurationError", "via Like.post"),
    (["repair", "tests.nowhere:Post.like_tally"], "ConfigurationError", "cannot import 'tests.nowhere'"),
    (["reshard", "tests.models:Video.view_count", "0"], "InvalidArgumentError", "from 1 to 100"),
    (["feeders", "tests.models:Post.like_tally", "--forget", "prefix=LIKE#"], "InvalidArgumentError", "is loaded"),
    (["audit", "tests.models:Post.like_tally", "--no-such-option"], "UsageError", "unrecognized arguments"),
])
def test_json_output_after_an_error_is_a_json_error_object(capsys: pytest.CaptureFixture[str], argv: List[str],
                                                           kind: str, message: str) -> None:
    code, out, err = run(capsys, *argv, "--json")
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err
    error = json.loads(out)
    assert set(error) == {"error", "type"} and error["type"] == kind and message in error["error"]
    code, out, _ = run(capsys, *argv)
    assert code == 2 and out == ""  # without --json, stdout stays empty
