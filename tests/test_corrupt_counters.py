"""A counter that is not a whole number (``ADD like_tally 0.5`` by hand) is drift, never a crash or a silent
truncation: audits report it and repairs set it, reads refuse it naming the item, and a counted delete or a
reshard refused by it says so, with nothing written."""
from __future__ import annotations

import json
from decimal import Decimal
from typing import Tuple

import pytest

from pynamodb_counters import audit, repair, skip_counting
from pynamodb_counters.exceptions import CorruptCounterError, CounterUnderflowError
from tests.support.app_package import run
from tests.support.factories import post, raw_item, raw_update, snapshot, stored
from tests.support.models import Like, Post, Video, View

pytestmark = pytest.mark.usefixtures("dynamodb")


def corrupt_post(pk: str, likes: int, add: str) -> Tuple[str, str]:
    key = post(pk)
    for n in range(likes):
        Like(pk=pk, sk=f"LIKE#USER#{n}", liked_at=1).save()
    raw_update("Social", {"pk": {"S": pk}, "sk": {"S": "META"}}, "ADD like_tally :h", {":h": {"N": add}})
    return key


def test_an_audit_reports_a_non_integer_counter_as_drift_and_repair_fixes_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    corrupt_post("POST#1", 3, "0.5")
    post("POST#2")
    with skip_counting():
        Like(pk="POST#2", sk="LIKE#USER#1", liked_at=1).save()
    report = audit(Post.like_tally)
    assert [(d.key, d.stored, d.actual) for d in report.drifts] == [
        (("POST#1", "META"), Decimal("3.5"), 3), (("POST#2", "META"), 0, 1)]
    code, out, _ = run(capsys, "audit", "tests.support.models:Post.like_tally", "--json")
    assert code == 1 and [(d["key"], d["stored"]) for d in json.loads(out)["drifts"]] == [
        (["POST#1", "META"], "3.5"), (["POST#2", "META"], 0)]
    code, out, _ = run(capsys, "repair", "tests.support.models:Post.like_tally", "--apply")
    assert code == 0 and "repaired 3.5 -> 3" in out
    assert raw_item("Social", {"pk": {"S": "POST#1"}, "sk": {"S": "META"}})["like_tally"] == {"N": "3"}
    assert Post.like_tally.total(("POST#1", "META")) == 3


def test_reads_refuse_a_non_integer_counter_naming_the_item() -> None:
    key = corrupt_post("POST#1", 3, "0.5")
    for read in (lambda: Post.like_tally.total(key), lambda: Post.like_tally.totals([key]),
                 lambda: Post.get(*key).like_tally):
        with pytest.raises(CorruptCounterError) as caught:
            read()
        assert "Post" in str(caught.value) and "POST#1" in str(caught.value) and "like_tally" in str(caught.value)
        assert "3.5" in str(caught.value)
        assert caught.value.model is Post and caught.value.key == key and caught.value.attribute == "like_tally"
    assert Post.get(*key).title is None  # the rest of the item still reads


def test_a_counted_delete_refused_by_a_non_integer_counter_says_so() -> None:
    key = corrupt_post("POST#1", 1, "-0.5")
    before = snapshot()
    with pytest.raises(CounterUnderflowError) as caught:
        Like.get("POST#1", "LIKE#USER#0").delete()
    assert "Post" in str(caught.value) and "POST#1" in str(caught.value) and "like_tally" in str(caught.value)
    assert "0.5" in str(caught.value) and "not a whole number" in str(caught.value)
    assert caught.value.stored == Decimal("0.5") and caught.value.key == key
    assert snapshot() == before


def test_a_sharded_counter_with_a_non_integer_shard_is_drift_and_repaired() -> None:
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


def test_reshard_of_a_non_integer_shard_is_a_clear_error_and_writes_nothing() -> None:
    from pynamodb_counters import reshard
    from pynamodb_counters.declare._shards import shard_key
    from tests.support.factories import raw_client

    Video(pk="VIDEO#v1", sk="META").save()
    hash_key, range_key = shard_key(("VIDEO#v1", "META"), 15)
    raw_client(None).update_item(TableName="Videos", Key={"pk": {"S": hash_key}, "sk": {"S": range_key}},
                                 UpdateExpression="ADD view_count :half",
                                 ExpressionAttributeValues={":half": {"N": "0.5"}})  # by hand
    before = snapshot()
    with pytest.raises(CorruptCounterError, match="VIDEO#v1"):
        reshard(Video.view_count, 8, parents=[("VIDEO#v1", "META")])
    assert snapshot() == before
