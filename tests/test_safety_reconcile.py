"""Issue 10, reconciliation safety: cases 1, 7, 10, 13 and the audit and CLI items of 15.

Case 1 writes real model modules to ``tmp_path`` (``app/posts.py`` and ``app/reactions.py``), imports them both
to write, then forgets them (as a fresh process would) and runs the command with ``app.posts`` alone.
"""
from __future__ import annotations

import base64
import json
import sys
import textwrap
from decimal import Decimal
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest
from pynamodb.attributes import UnicodeAttribute
from pynamodb.exceptions import PutError

from pynamodb_counters import Drift, audit, bulk_save, repair, set_counter, skip_counting
from pynamodb_counters._auditor import Auditor
from pynamodb_counters.cli import main
from pynamodb_counters.exceptions import (
    CorruptCounterError,
    CounterUnderflowError,
    InvalidArgumentError,
    TransactionError,
)
from tests.factories import post, raw_client, snapshot, stored
from tests.models import Like, Post, Video, View

pytestmark = pytest.mark.usefixtures("dynamodb")

MODELS = '''
from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

from pynamodb_counters import CounterField, CounterMixin, counted_by


class Post(CounterMixin, Model):
    class Meta:
        table_name = "Case1"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    title = UnicodeAttribute(null=True)
    like_tally = CounterField()

    @classmethod
    def audit_filter(cls):
        return cls.sk == "META"


class Like(CounterMixin, Model):
    class Meta:
        table_name = "Case1"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    post = counted_by(Post.like_tally, key=lambda like: (like.pk, "META"), prefix="LIKE#")
'''

REACTIONS = '''
from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

from pynamodb_counters import CounterMixin, counted_by

from app.posts import Post


class Reaction(CounterMixin, Model):
    class Meta:
        table_name = "Case1"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    post = counted_by(Post.like_tally, key=lambda reaction: (reaction.pk, "META"), prefix="REACTION#")
'''


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> Tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def raw_update(table: str, key: Dict[str, Any], expression: str, values: Dict[str, Any]) -> None:
    """An UpdateItem behind the library's back; ``#a`` in ``expression`` names the attribute."""
    names = {"#a": expression.split()[1]}
    raw_client(None).update_item(TableName=table, Key=key, UpdateExpression=expression.replace(names["#a"], "#a"),
                                 ExpressionAttributeNames=names, ExpressionAttributeValues=values)


def raw_item(table: str, key: Dict[str, Any]) -> Dict[str, Any]:
    item: Dict[str, Any] = raw_client(None).get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]
    return item


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A package ``app`` on ``sys.path`` (files written by each test), forgotten again afterwards."""
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path / "app"
    forget_app()


def forget_app() -> None:
    """Forget every ``app`` module, as a new process would not have imported them."""
    for name in [name for name in sys.modules if name == "app" or name.startswith("app.")]:
        del sys.modules[name]


def write_app(app: Path, **modules: str) -> None:
    for name, text in modules.items():
        (app / f"{name}.py").write_text(textwrap.dedent(text))


def seed_case1(app: Path) -> None:
    """P1 with 3 likes and 2 reactions (exact: 5), P2 with 1 like, written by a process that loaded both
    modules: each counted write records the relation that fed the counter (P2: Like.post only)."""
    write_app(app, posts=MODELS, reactions=REACTIONS)
    from app.posts import Like as AppLike  # type: ignore[import-not-found]
    from app.posts import Post as AppPost
    from app.reactions import Reaction  # type: ignore[import-not-found]

    AppPost.create_table(billing_mode="PAY_PER_REQUEST")
    AppPost(pk="P1", sk="META").save()
    AppPost(pk="P2", sk="META").save()
    for n in range(3):
        AppLike(pk="P1", sk=f"LIKE#{n}").save()
    for n in range(2):
        Reaction(pk="P1", sk=f"REACTION#{n}").save()
    AppLike(pk="P2", sk="LIKE#0").save()
    assert AppPost.get("P1", "META").like_tally == 5
    forget_app()


P1 = {"pk": {"S": "P1"}, "sk": {"S": "META"}}


# -- case 1 ------------------------------------------------------------------------------------------------------
def test_case1_repair_refuses_a_counter_fed_by_a_relation_that_is_not_loaded(
        app: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seed_case1(app)
    before = snapshot_case1()
    code, out, err = run(capsys, "repair", "app.posts:Post.like_tally", "--apply")
    assert "repaired 5 -> 3" not in out
    assert 'Post ["P1", "META"] like_tally: unverifiable: fed by prefix=REACTION#, which is not ' \
           'loaded' in out
    assert code == 2 and "--import" in err and len(err.strip().splitlines()) == 1
    assert snapshot_case1() == before  # nothing written
    assert raw_item("Case1", P1)["like_tally"] == {"N": "5"}
    code, out, err = run(capsys, "audit", "app.posts:Post.like_tally", "--json")
    report = json.loads(out)
    assert code == 2 and report["drifted"] == 0 and report["unverifiable"] == [
        {"model": "Post", "key": [pk, "META"], "attribute": "like_tally",
         "unloaded": ["prefix=REACTION#"],
         "reason": "unverifiable: fed by prefix=REACTION#, which is not loaded"} for pk in ("P1",)]
    assert err.strip().splitlines() == [
        "pynamodb-counters: 1 parent unverifiable: fed by prefix=REACTION#, not loaded; load the modules "
        "declaring them with --import MODULE (entries of relations removed from the code: pynamodb-counters "
        "feeders --forget)"]
    code, out, err = run(capsys, "audit", "app.posts:Post.like_tally", "--import", "app.reactions")
    assert code == 0 and "2 parents checked, 0 drifted" in out and err == ""


def snapshot_case1() -> List[Dict[str, Any]]:
    return sorted(stored("Case1"), key=repr)


def test_case1_the_python_api_refuses_too_and_set_counter_is_the_override(app: Path) -> None:
    seed_case1(app)
    from app.posts import Post as AppPost

    report = audit(AppPost.like_tally)
    assert report.drifts == () and report.parents_checked == 2
    assert [(u.key, u.unloaded, u.reason) for u in report.unverifiable] == [
        ((pk, "META"), ("prefix=REACTION#",),
         "unverifiable: fed by prefix=REACTION#, which is not loaded") for pk in ("P1",)]
    sequence = int(raw_item("Case1", P1)["_cseq"]["N"])
    before = snapshot_case1()
    repairs = repair([Drift(AppPost, ("P1", "META"), "like_tally", 5, 3, sequence)])  # as an older audit saw it
    assert [(r.status, r.reason) for r in repairs.repairs] == [
        ("refused", "unverifiable: fed by prefix=REACTION#, which is not loaded")]
    assert not repairs.complete
    assert snapshot_case1() == before
    set_counter(AppPost.like_tally, ("P1", "META"), 4)  # the explicit override still works
    assert raw_item("Case1", P1)["like_tally"] == {"N": "4"}


def test_case1_the_no_feeder_error_says_to_import_more(app: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_app(app, only=MODELS.replace("    post = counted_by", "    # post = counted_by"))
    code, out, err = run(capsys, "audit", "app.only:Post.like_tally")
    assert code == 2 and out == "" and "no counted_by() relation feeds Post.like_tally" in err
    assert "--import" in err


def test_case1_counted_writes_record_their_feeders_and_parent_saves_keep_them() -> None:
    key = post("POST#rec")
    Like(pk="POST#rec", sk="LIKE#USER#1", liked_at=1).save()
    bulk_save([Like(pk="POST#bulk", sk="LIKE#USER#1", liked_at=1)] if post("POST#bulk") else [])
    for pk in ("POST#rec", "POST#bulk"):
        item = raw_item("Social", {"pk": {"S": pk}, "sk": {"S": "META"}})
        assert item["_cfeed"] == {"SS": ["like_tally<prefix=LIKE#"]}
    loaded = Post.get(*key)
    loaded.title = "Edited"
    loaded.save()  # a parent save SETs its declared attributes only
    item = raw_item("Social", {"pk": {"S": "POST#rec"}, "sk": {"S": "META"}})
    assert item["_cfeed"] == {"SS": ["like_tally<prefix=LIKE#"]} and item["title"] == {"S": "Edited"}
    assert Post.get(*key).like_tally == 1 and "_cfeed" not in Post.get(*key).attribute_values
    assert audit(Post.like_tally, parents=[key]).unverifiable == ()


def test_case1_a_sharded_counter_records_feeders_on_its_shard_items_and_audits_read_them_all() -> None:
    Video(pk="VIDEO#v1", sk="META").save()
    views = [View(pk="VIDEO#v1", sk=f"VIEW#USER#{n}") for n in range(8)]
    for view in views:
        view.save()
    items = [item for item in stored("Videos") if item["pk"]["S"].startswith("VIDEO#v1") and "_cfeed" in item]
    assert items and all(item["_cfeed"] == {"SS": ["view_count<prefix=VIEW#"]} for item in items)
    shard = next(item for item in items if "_cshard" in item)  # a shard item, not the parent
    raw_update("Videos", {"pk": shard["pk"], "sk": shard["sk"]}, "ADD _cfeed :n",
               {":n": {"SS": ["view_count<gone.models:Boost.video"]}})
    report = audit(Video.view_count, parents=[("VIDEO#v1", "META")])
    assert report.drifts == ()
    assert [u.unloaded for u in report.unverifiable] == [("gone.models:Boost.video",)]
    assert audit(Video.report_count, parents=[("VIDEO#v1", "META")]).unverifiable == ()  # another counter's


# -- case 7 ------------------------------------------------------------------------------------------------------
def corrupt_post(pk: str, likes: int, add: str) -> Tuple[str, str]:
    key = post(pk)
    for n in range(likes):
        Like(pk=pk, sk=f"LIKE#USER#{n}", liked_at=1).save()
    raw_update("Social", {"pk": {"S": pk}, "sk": {"S": "META"}}, "ADD like_tally :h", {":h": {"N": add}})
    return key


def test_case7_an_audit_reports_a_non_integer_counter_as_drift_and_repair_fixes_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    corrupt_post("POST#1", 3, "0.5")
    post("POST#2")
    with skip_counting():
        Like(pk="POST#2", sk="LIKE#USER#1", liked_at=1).save()
    report = audit(Post.like_tally)
    assert [(d.key, d.stored, d.actual) for d in report.drifts] == [
        (("POST#1", "META"), Decimal("3.5"), 3), (("POST#2", "META"), 0, 1)]
    code, out, _ = run(capsys, "audit", "tests.models:Post.like_tally", "--json")
    assert code == 1 and [(d["key"], d["stored"]) for d in json.loads(out)["drifts"]] == [
        (["POST#1", "META"], "3.5"), (["POST#2", "META"], 0)]
    code, out, _ = run(capsys, "repair", "tests.models:Post.like_tally", "--apply")
    assert code == 0 and "repaired 3.5 -> 3" in out
    assert raw_item("Social", {"pk": {"S": "POST#1"}, "sk": {"S": "META"}})["like_tally"] == {"N": "3"}
    assert Post.like_tally.total(("POST#1", "META")) == 3


def test_case7_reads_refuse_a_non_integer_counter_naming_the_item() -> None:
    key = corrupt_post("POST#1", 3, "0.5")
    for read in (lambda: Post.like_tally.total(key), lambda: Post.like_tally.totals([key]),
                 lambda: Post.get(*key).like_tally):
        with pytest.raises(CorruptCounterError) as caught:
            read()
        assert "Post" in str(caught.value) and "POST#1" in str(caught.value) and "like_tally" in str(caught.value)
        assert "3.5" in str(caught.value)
        assert caught.value.model is Post and caught.value.key == key and caught.value.attribute == "like_tally"
    assert Post.get(*key).title is None  # the rest of the item still reads


def test_case7_a_counted_delete_refused_by_a_non_integer_counter_says_so() -> None:
    key = corrupt_post("POST#1", 1, "-0.5")
    before = snapshot()
    with pytest.raises(CounterUnderflowError) as caught:
        Like.get("POST#1", "LIKE#USER#0").delete()
    assert "Post" in str(caught.value) and "POST#1" in str(caught.value) and "like_tally" in str(caught.value)
    assert "0.5" in str(caught.value) and "not a whole number" in str(caught.value)
    assert caught.value.stored == Decimal("0.5") and caught.value.key == key
    assert snapshot() == before


def test_case7_a_sharded_counter_with_a_non_integer_shard_is_drift_and_repaired() -> None:
    Video(pk="VIDEO#v1", sk="META").save()
    for n in range(4):
        View(pk="VIDEO#v1", sk=f"VIEW#USER#{n}").save()
    shard = next(item for item in stored("Videos") if "_cshard" in item and item["pk"]["S"] == "VIDEO#v1#SHARD3")
    raw_update("Videos", {"pk": shard["pk"], "sk": shard["sk"]}, "ADD view_count :h", {":h": {"N": "0.25"}})
    with pytest.raises(CorruptCounterError):
        Video.view_count.total(("VIDEO#v1", "META"))
    report = audit(Video.view_count)
    assert [(d.stored, d.actual) for d in report.drifts] == [(Decimal("4.25"), 4)]
    assert [r.status for r in repair(report.drifts).repairs] == ["repaired"]
    assert Video.view_count.total(("VIDEO#v1", "META")) == 4
    assert audit(Video.view_count).drifts == ()


# -- case 10 -----------------------------------------------------------------------------------------------------
KEYED = '''
import datetime
import inspect

from pynamodb.attributes import BinaryAttribute, NumberAttribute, UnicodeAttribute, UTCDateTimeAttribute
from pynamodb.models import Model

from pynamodb_counters import CounterField, CounterMixin, counted_by


def fail(key):
    raise RuntimeError("the children function broke")


# PynamoDB 6 asks binary attributes to choose their encoding; PynamoDB 5.5 has one
BINARY = {"legacy_encoding": False} if "legacy_encoding" in inspect.signature(BinaryAttribute).parameters else {}


class Numbered(CounterMixin, Model):
    class Meta:
        table_name = "Numbered"
        region = "us-east-1"

    n = NumberAttribute(hash_key=True)
    tally = CounterField()


class Binary(CounterMixin, Model):
    class Meta:
        table_name = "Binary"
        region = "us-east-1"

    b = BinaryAttribute(hash_key=True, **BINARY)
    tally = CounterField()


class Dated(CounterMixin, Model):
    class Meta:
        table_name = "Dated"
        region = "us-east-1"

    name = UnicodeAttribute(hash_key=True)
    at = UTCDateTimeAttribute(range_key=True)
    tally = CounterField()
    broken = CounterField()


class Child(CounterMixin, Model):
    class Meta:
        table_name = "Children"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    numbered = counted_by(Numbered.tally, key=lambda c: 7, children=lambda key: 2)
    binary = counted_by(Binary.tally, key=lambda c: b"\\x00\\xff", children=lambda key: 2)
    dated = counted_by(Dated.tally, key=lambda c: ("d", datetime.datetime(2024, 1, 2, tzinfo=datetime.timezone.utc)),
                       children=lambda key: 2)
    broken = counted_by(Dated.broken, key=lambda c: ("d", datetime.datetime(2024, 1, 2,
                        tzinfo=datetime.timezone.utc)), children=fail)
'''


@pytest.fixture
def keyed(app: Path) -> Any:
    """Parents keyed by a number, by bytes, by a date; each with a drifted counter (2 children, 0 stored)."""
    import datetime

    write_app(app, keyed=KEYED)
    import app.keyed as module  # type: ignore[import-not-found]

    for model in (module.Numbered, module.Binary, module.Dated):
        model.create_table(billing_mode="PAY_PER_REQUEST")
    module.Numbered(n=7).save()
    module.Binary(b=b"\x00\xff").save()
    module.Dated(name="d", at=datetime.datetime(2024, 1, 2, tzinfo=datetime.timezone.utc)).save()
    return module


def test_case10_an_unexpected_error_exits_2_with_one_line_and_no_traceback(
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


def test_case10_a_module_that_fails_to_import_exits_2(app: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_app(app, broken="raise RuntimeError('no settings configured')\n", syntax="def (:\n")
    for target in ("app.broken:Post.like_tally", "app.syntax:Post.like_tally"):
        code, out, err = run(capsys, "audit", target)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "Traceback" not in err
        assert "cannot import 'app." in err
    code, out, err = run(capsys, "audit", "tests.models:Post.like_tally", "--import", "app.broken")
    assert code == 2 and "no settings configured" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("target, parent", [
    ("app.keyed:Numbered.tally", [7]),
    ("app.keyed:Binary.tally", [base64.b64encode(b"\x00\xff").decode()]),
    ("app.keyed:Dated.tally", ["d", "2024-01-02T00:00:00.000000+0000"]),
])
def test_case10_json_output_is_valid_for_keys_of_every_type_and_keys_round_trip(
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


def test_case10_a_failure_mid_repair_prints_what_was_done_and_the_error(
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
    code, out, err = run(capsys, "repair", "tests.models:Post.like_tally", "--apply", "--json")
    report = json.loads(out)
    assert code == 2 and report["error"] == "ConnectionResetError: the connection dropped"
    assert [(r["key"], r["status"]) for r in report["repairs"]] == [(["POST#1", "META"], "repaired")]
    assert len(err.strip().splitlines()) == 1
    assert Post.get("POST#1", "META").like_tally == 1 and Post.get("POST#2", "META").like_tally == 0


# -- case 13 -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["0", "-1", "x"])
def test_case13_max_attempts_below_one_is_a_usage_error(capsys: pytest.CaptureFixture[str], value: str) -> None:
    post("POST#1")
    with skip_counting():
        Like(pk="POST#1", sk="LIKE#USER#1", liked_at=1).save()
    before = snapshot()
    code, out, err = run(capsys, "repair", "tests.models:Post.like_tally", "--apply", "--max-attempts", value)
    assert code == 2 and out == "" and "--max-attempts" in err and len(err.strip().splitlines()) == 1
    assert snapshot() == before
    with pytest.raises(InvalidArgumentError, match="max_attempts"):
        repair(audit(Post.like_tally).drifts, max_attempts=0)


def test_case13_a_numeric_hash_key_is_given_bare(keyed: Any, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "audit", "app.keyed:Numbered.tally", "--parent", "7")
    assert code == 1, err
    assert "Numbered [7] tally: stored 0, actual 2" in out
    code, out, err = run(capsys, "audit", "app.keyed:Binary.tally", "--parent", base64.b64encode(b"\x00\xff").decode())
    assert code == 1, err
    code, out, err = run(capsys, "audit", "app.keyed:Numbered.tally", "--parent", "seven")
    assert code == 2 and "--parent 'seven'" in err and "number" in err


class BigLike(Like):
    """A like with a free-text note, to reach DynamoDB's item size limit."""

    note = UnicodeAttribute(null=True)


def largest_note() -> int:
    """The longest note a plain Put of a BigLike accepts (found on the engine: moto sizes items its own way)."""
    low, high = 0, 420 * 1024
    while low < high:
        middle = (low + high + 1) // 2
        try:
            with skip_counting():
                BigLike(pk="POST#probe", sk="LIKE#USER#probe", liked_at=1, note="x" * middle).save()
            low = middle
        except PutError:
            high = middle - 1
    with skip_counting():
        BigLike(pk="POST#probe", sk="LIKE#USER#probe").delete()
    return low


@pytest.mark.slow
def test_case13_an_item_too_large_only_with_the_write_id_says_so() -> None:
    post("POST#big")
    big = BigLike(pk="POST#big", sk="LIKE#USER#big", liked_at=1, note="x" * largest_note())
    before = snapshot()
    with pytest.raises(TransactionError) as caught:
        big.save()
    message = str(caught.value)
    assert "BigLike ('POST#big', 'LIKE#USER#big')" in message and "write id" in message and "_cwid" in message
    assert "Nothing was written" in message and caught.value.cause_response_code == "ValidationException"
    assert snapshot() == before


# -- case 15 -----------------------------------------------------------------------------------------------------
def test_case15_an_unknown_option_is_one_line_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "audit", "tests.models:Post.like_tally", "--no-such-option")
    assert code == 2 and out == ""
    assert err.strip().splitlines() == ["pynamodb-counters: error: unrecognized arguments: --no-such-option "
                                        "(see pynamodb-counters --help)"]
    code, out, err = run(capsys, "nothing")
    assert code == 2 and len(err.strip().splitlines()) == 1


def test_case15_a_parent_without_its_counter_reads_0_and_audits_as_drift() -> None:
    key = post("POST#old")
    raw_client(None).update_item(TableName="Social", Key={"pk": {"S": key[0]}, "sk": {"S": key[1]}},
                                 UpdateExpression="REMOVE like_tally")
    assert Post.get(*key).like_tally == 0
    assert [(d.stored, d.actual) for d in audit(Post.like_tally, parents=[key]).drifts] == [(None, 0)]
