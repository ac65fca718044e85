"""Audits from a table export mean what the live audit means: for every kind of relation an export can evaluate
(a table of counters below), the export nominates exactly the parents the live audit finds drifted, and the
verification on the live table keeps exactly those still drifted. Bad input is refused before anything is
reported."""
from __future__ import annotations

import base64
import gzip
import hashlib
import json
import re
import time
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

import pytest
from pynamodb.expressions.condition import size
from pynamodb.signals import pre_dynamodb_send

from pynamodb_counters import AuditReport, ExportProgress, audit, repair, skip_counting
from pynamodb_counters.declare._item_conditions import matcher
from pynamodb_counters.exceptions import CounterError, ExportError, InvalidArgumentError
from pynamodb_counters.testing import export_table, write_export
from tests.support.audit_models import Answer, Cart, Line, Question, create_tables
from tests.support.client_hooks import unlike_before_the_first_query
from tests.support.export_models import TABLE_MODELS, Daily, Forum, Hit, Member, Pinned, Poll, Topic, View, Vote
from tests.support.factories import drifted_by_one, raw_client
from tests.support.models import Bookmark, Post, User
from tests.test_exports import data_path, entries, set_entry, set_summary, table_id

pytestmark = pytest.mark.usefixtures("dynamodb")

FORUMS = [f"FORUM#f{n}" for n in range(4)]
FORUMS_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/Forums"
Key = Tuple[str, str]


@pytest.fixture
def counters_models() -> List[type]:
    return [*TABLE_MODELS, Post, User]


#: the items :func:`activity` leaves in each table, from its first run in this process
_ACTIVITY_ITEMS: Dict[str, List[Dict[str, Any]]] = {}


def activity() -> None:
    """Four forums with every kind of child, counted: topics, pinned topics and (uncounted) polls under one
    prefix, votes of 0 to 3 stars, views over four shards, members in their own table, and hits creating daily
    buckets (one of them long expired).

    The first run in a process writes them through the library (about 80 counted saves) and keeps the items they
    left; the next runs put those items back as they were, by BatchWriteItem, into the test's empty tables."""
    if _ACTIVITY_ITEMS:
        client = raw_client(None)
        for table, items in _ACTIVITY_ITEMS.items():
            for start in range(0, len(items), 25):
                written = client.batch_write_item(RequestItems={
                    table: [{"PutRequest": {"Item": item}} for item in items[start:start + 25]]})
                assert not written.get("UnprocessedItems")
        return
    write_activity()
    _ACTIVITY_ITEMS.update({table: _items(table) for table in sorted({m.Meta.table_name for m in TABLE_MODELS})})


def write_activity() -> None:
    """:func:`activity`'s children, each saved through the library."""
    for n, pk in enumerate(FORUMS):
        Forum(pk=pk, sk="META").save()
        for t in range(n + 1):
            Topic(pk=pk, sk=f"TOPIC#t{t}").save()
        Pinned(pk=pk, sk="TOPIC#pinned").save()
        Poll(pk=pk, sk="TOPIC#poll").save()
        for v in range(4):
            Vote(pk=pk, sk=f"VOTE#u{v}", value=v).save()  # 0 to 3 stars: 6 in all, 2 upvotes
        for v in range(6 + n):
            View(pk=pk, sk=f"VIEW#u{v}").save()
        for m in range(n):
            Member(pk=pk, sk=f"MEMBER#u{m}").save()
        expires = time.time() + (86400 if n else -86400)  # f0's bucket expired yesterday
        for h in range(2):
            Hit(pk=f"{pk}#DAY#2026-11-30", sk=f"HIT#u{h}", expires_at=int(expires)).save()


def bump(model: Any, key: Tuple[str, ...], attr_name: str, by: int) -> None:
    """Move a stored counter behind the library's back."""
    raw_client(None).update_item(TableName=model.Meta.table_name, Key={"pk": {"S": key[0]}, "sk": {"S": key[1]}},
                                 UpdateExpression="ADD #c :by", ExpressionAttributeNames={"#c": attr_name},
                                 ExpressionAttributeValues={":by": {"N": str(by)}})


def plant() -> None:
    """Drift on every counter, each made a different way: counters moved by hand (on a shard item too), children
    written and deleted without counting, a counter removed, and drift on the expired bucket (never reported)."""
    bump(Forum, ("FORUM#f1", "META"), "topic_count", 2)
    with skip_counting():
        Pinned(pk="FORUM#f2", sk="TOPIC#extra").save()  # counted by the relation: the counter is one short
        Poll(pk="FORUM#f3", sk="TOPIC#extra-poll").save()  # not counted: no drift
        Vote(pk="FORUM#f1", sk="VOTE#extra", value=1).save()  # score one short, upvotes exact
        Vote(pk="FORUM#f2", sk="VOTE#extra", value=3).save()  # score 3 short, upvotes one
        Member(pk="FORUM#f3", sk="MEMBER#u0").delete()
        View(pk="FORUM#f0", sk="VIEW#extra").save()
    bump(Forum, ("FORUM#f3#SHARD2", "META"), "view_count", 5)  # a shard item's share
    raw_client(None).update_item(TableName="Forums", Key={"pk": {"S": "FORUM#f2"}, "sk": {"S": "META"}},
                                 UpdateExpression="REMOVE upvotes")
    bump(Daily, ("FORUM#f1#DAY#2026-11-30", "DAY"), "hits", 1)
    bump(Daily, ("FORUM#f0#DAY#2026-11-30", "DAY"), "hits", 7)  # expired: not drift


def exports(directory: Path, files: int = 3) -> Dict[str, str]:
    return {"Forums": export_table(Forum, directory, files=files),
            "Members": export_table(Member, directory, files=files)}


def export_for(counter: Any, taken: Dict[str, str]) -> List[str]:
    """The exports an audit of ``counter`` reads: its parent's table, and its children's."""
    return [taken["Forums"]] + ([taken["Members"]] if counter is Forum.member_count else [])


def drifts(report: AuditReport, of: str = "drifts") -> Dict[Tuple[Any, ...], Tuple[Any, int]]:
    return {d.key: (d.stored, d.actual) for d in getattr(report, of)}


COUNTERS = [Forum.topic_count, Forum.upvotes, Forum.score, Forum.view_count, Forum.member_count, Daily.hits]


@pytest.mark.parametrize("counter", COUNTERS, ids=lambda c: f"{c.model.__name__}.{c.name}")
def test_an_export_nominates_exactly_the_live_drift_of_every_kind_of_relation(counter: Any,
                                                                               tmp_path: Path) -> None:
    activity()
    plant()
    live = audit(counter)
    assert live.drifts  # every counter of the table was made to drift
    report = audit(counter, export=export_for(counter, exports(tmp_path)))
    assert drifts(report, "candidates") == drifts(live)  # the export is consistent here: nothing more
    assert drifts(report) == drifts(live)
    assert report.parents_checked == live.parents_checked
    assert report.read_units > 0  # the candidates were recounted on the live table


def test_the_expected_drifts_of_the_table(tmp_path: Path) -> None:
    """What the table above holds, by hand: the comparison with the live audit compares something."""
    activity()
    plant()
    taken = exports(tmp_path)
    expected = [
        (Forum.topic_count, {("FORUM#f1", "META"): (5, 3), ("FORUM#f2", "META"): (4, 5)}),
        (Forum.upvotes, {("FORUM#f2", "META"): (None, 3)}),
        (Forum.score, {("FORUM#f1", "META"): (6, 7), ("FORUM#f2", "META"): (6, 9)}),
        (Forum.view_count, {("FORUM#f0", "META"): (6, 7), ("FORUM#f3", "META"): (14, 9)}),
        (Forum.member_count, {("FORUM#f3", "META"): (3, 2)}),
        (Daily.hits, {("FORUM#f1#DAY#2026-11-30", "DAY"): (3, 2)}),
    ]
    for counter, found in expected:
        assert drifts(audit(counter, export=export_for(counter, taken))) == found, counter


def test_candidates_are_verified_on_the_live_table(tmp_path: Path) -> None:
    """A drift repaired after the export is a candidate, not a drift; a drift the export shows only because it
    holds one half of a transaction (the child, not its count) is a candidate, not a drift."""
    activity()
    plant()
    before = {table: [dict(item) for item in _items(table)] for table in ("Forums",)}
    repair(audit(Forum.topic_count, parents=[("FORUM#f1", "META")]).drifts)
    Topic(pk="FORUM#f0", sk="TOPIC#late").save()  # counted; the export below holds the topic, not its count
    after = _items("Forums")
    forums = {_key(item): item for item in before["Forums"] if item["sk"]["S"] == "META"}
    mixed = [forums.get(_key(item), item) for item in after]  # the forums as before, the children as after
    export = write_export(tmp_path, mixed, table_arn=FORUMS_ARN, files=2)
    report = audit(Forum.topic_count, export=export)
    assert set(drifts(report, "candidates")) == {("FORUM#f0", "META"), ("FORUM#f1", "META"), ("FORUM#f2", "META")}
    assert drifts(report) == {("FORUM#f2", "META"): (4, 5)}
    assert drifts(report) == drifts(audit(Forum.topic_count))


def test_a_half_exported_transaction_can_hide_a_drift_of_the_same_parent(tmp_path: Path) -> None:
    """What an export cannot promise: a parent one short (an uncounted topic) whose next counted topic was
    exported as the count without the child looks exact in the export. The live audit finds it; the next export
    does too. (Documented in docs/auditing-at-scale.rst: why candidates are verified, and what they can miss.)"""
    activity()
    with skip_counting():
        Topic(pk="FORUM#f1", sk="TOPIC#uncounted").save()
    Topic(pk="FORUM#f1", sk="TOPIC#counted").save()
    items = [item for item in _items("Forums") if _key(item) != ("FORUM#f1", "TOPIC#counted")]
    assert not audit(Forum.topic_count, export=write_export(tmp_path, items, table_arn=FORUMS_ARN)).candidates
    assert drifts(audit(Forum.topic_count)) == {("FORUM#f1", "META"): (4, 5)}
    assert drifts(audit(Forum.topic_count, export=export_table(Forum, tmp_path / "next"))) == \
        {("FORUM#f1", "META"): (4, 5)}


def test_a_parent_fed_by_a_relation_not_loaded_is_unverifiable_not_drift(tmp_path: Path) -> None:
    activity()
    raw_client(None).update_item(TableName="Forums", Key={"pk": {"S": "FORUM#f1"}, "sk": {"S": "META"}},
                                 UpdateExpression="ADD #f :e, topic_count :one",
                                 ExpressionAttributeNames={"#f": "_cfeed"},
                                 ExpressionAttributeValues={":e": {"SS": ["topic_count<prefix=GONE#"]},
                                                            ":one": {"N": "1"}})
    report = audit(Forum.topic_count, export=export_table(Forum, tmp_path))
    live = audit(Forum.topic_count)
    assert [u.key for u in report.unverifiable] == [("FORUM#f1", "META")] == [u.key for u in live.unverifiable]
    assert report.unverifiable[0].unloaded == ("prefix=GONE#",)
    assert not report.drifts and not report.candidates


def test_a_candidate_is_never_dropped_as_exact_when_a_write_lands_between_its_read_and_its_count(
        tmp_path: Path) -> None:
    key = drifted_by_one()
    export = export_table(Post, tmp_path)
    with unlike_before_the_first_query(key[0]) as unliked:
        report = audit(Post.like_tally, export=export)
    assert unliked and [(d.key, d.stored, d.actual) for d in report.candidates] == [(key, 2, 3)]
    assert [(d.key, d.stored, d.actual) for d in report.drifts] == [(key, 1, 2)]


def test_a_child_whose_amount_was_stored_as_a_string_makes_only_its_parent_unverifiable(tmp_path: Path) -> None:
    create_tables()
    for pk in ("CART#a", "CART#b"):
        Cart(pk=pk, sk="META").save()
        Line(pk=pk, sk="LINE#1", units=2).save()
    raw_client(None).put_item(TableName="Carts", Item={"pk": {"S": "CART#a"}, "sk": {"S": "LINE#2"},
                                                       "units": {"S": "three"}})  # around the library
    with skip_counting():
        Line(pk="CART#b", sk="LINE#2", units=3).save()
    report = audit(Cart.quantity, export=export_table(Cart, tmp_path), workers=1)
    assert drifts(report) == {("CART#b", "META"): (2, 5)}
    [refused] = report.unverifiable
    assert refused.key == ("CART#a", "META") and "('CART#a', 'LINE#2')" in refused.reason


def test_several_parents_of_one_partition_counted_under_a_prefix_are_unverifiable_not_drift(tmp_path: Path
                                                                                            ) -> None:
    create_tables()
    for n in (1, 2):
        Question(pk="FORUM#1", sk=f"QUESTION#{n}").save()
        Answer(pk="FORUM#1", sk=f"ANSWER#{n}#a").save()
    Question(pk="FORUM#2", sk="QUESTION#1").save()
    with skip_counting():
        Answer(pk="FORUM#2", sk="ANSWER#1#x").save()
    report = audit(Question.answers, export=export_table(Question, tmp_path))
    assert drifts(report) == {("FORUM#2", "QUESTION#1"): (0, 1)}
    assert sorted(u.key for u in report.unverifiable) == [("FORUM#1", "QUESTION#1"), ("FORUM#1", "QUESTION#2")]
    assert not repair(report.drifts).complete or Question.get("FORUM#1", "QUESTION#1").answers == 1


def test_an_export_audit_bounded_by_key_prefix(tmp_path: Path) -> None:
    activity()
    plant()
    report = audit(Forum.topic_count, export=exports(tmp_path)["Forums"], key_prefix="FORUM#f2")
    assert drifts(report) == {("FORUM#f2", "META"): (4, 5)} and report.parents_checked == 1


def test_repair_takes_the_verified_drifts(tmp_path: Path) -> None:
    activity()
    plant()
    taken = exports(tmp_path)
    for counter in COUNTERS:
        repair(audit(counter, export=export_for(counter, taken)).drifts)
        assert not audit(counter).drifts, counter


def test_an_exact_table_reads_nothing_live(tmp_path: Path) -> None:
    activity()
    report = audit(Forum.view_count, export=exports(tmp_path)["Forums"])
    assert not report.candidates and not report.drifts and report.read_units == 0
    assert report.parents_checked == len(FORUMS)


def test_progress_reports_files_items_candidates_and_verification(tmp_path: Path) -> None:
    activity()
    plant()
    seen: List[ExportProgress] = []
    taken = exports(tmp_path, files=3)
    audit(Forum.topic_count, export=taken["Forums"], progress=seen.append)
    reading = [p for p in seen if p.candidates is None]
    assert [p.files_read for p in reading] == [1, 2, 3] and {p.files for p in seen} == {3}
    assert reading[-1].items_read == len(_items("Forums"))
    assert seen[-1].candidates == 2 and seen[-1].verified == 2


def test_the_local_engine_gives_the_same_result_on_any_number_of_processes(tmp_path: Path) -> None:
    activity()
    plant()
    taken = exports(tmp_path, files=5)
    one = audit(Forum.score, export=taken["Forums"], workers=1)
    many = audit(Forum.score, export=taken["Forums"], workers=3)
    assert one == many and one.drifts


# -- bad input: a clear error, nothing reported ---------------------------------------------------------------
def test_the_export_of_a_table_no_relation_reads(tmp_path: Path) -> None:
    activity()
    taken = exports(tmp_path)
    with pytest.raises(ExportError, match=r"export of the table 'Members', which no relation feeding "
                                          r"Forum.topic_count reads \(it reads 'Forums'\)"):
        audit(Forum.topic_count, export=[taken["Forums"], taken["Members"]])
    with pytest.raises(ExportError, match="'Members'"):
        audit(Forum.topic_count, export=taken["Members"])


def test_an_export_missing_for_a_table_a_relation_reads(tmp_path: Path) -> None:
    activity()
    taken = exports(tmp_path)
    with pytest.raises(ExportError, match=r"no export of the table 'Members', which Member.forum reads"):
        audit(Forum.member_count, export=taken["Forums"])
    with pytest.raises(ExportError, match=r"no export of the table 'Forums', which Forum.member_count reads"):
        audit(Forum.member_count, export=taken["Members"])


def test_two_exports_of_one_table(tmp_path: Path) -> None:
    activity()
    first, second = export_table(Forum, tmp_path / "a"), export_table(Forum, tmp_path / "b")
    with pytest.raises(ExportError, match="are both exports of the table 'Forums'"):
        audit(Forum.topic_count, export=[first, second])


def test_a_relation_counted_by_a_function_cannot_be_evaluated_from_an_export(tmp_path: Path) -> None:
    User(user_id="USER#1").save()
    Post(pk="POST#1", sk="META").save()
    Bookmark(pk="POST#1", sk="BOOKMARK#1", user_id="USER#1").save()
    with pytest.raises(ExportError, match=r"Bookmark.owner is counted by its children= function"):
        audit(User.bookmarks, export=export_table(User, tmp_path))


@pytest.mark.parametrize("options, message", [
    ({"engine": "dask"}, r"engine= is one of 'local', 'spark', not 'dask'"),
    ({"spark": object()}, r"spark= is the session of engine='spark'"),
    ({"engine": "spark"}, r"engine='spark' needs spark="),
    ({"parents": [("FORUM#f1", "META")]}, r"parents=, limit= and segments= are for audits of the live table"),
    ({"limit": 3}, r"parents=, limit= and segments="),
    ({"segments": 2}, r"parents=, limit= and segments="),
    ({"workers": 0}, r"workers is at least 1"),
])
def test_options_an_export_audit_refuses(options: Dict[str, Any], message: str, tmp_path: Path) -> None:
    activity()
    plant()
    export = exports(tmp_path)["Forums"]
    with pytest.raises(InvalidArgumentError, match=message):
        audit(Forum.topic_count, export=export, **options)


@pytest.mark.parametrize("export", [[], "", 42, [None]])
def test_an_export_that_is_not_a_location(export: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="export= takes an export's location"):
        audit(Forum.topic_count, export=export)


def test_engine_and_spark_without_an_export() -> None:
    with pytest.raises(InvalidArgumentError, match="pass export= too"):
        audit(Forum.topic_count, engine="spark")
    with pytest.raises(InvalidArgumentError, match="pass export= too"):
        audit(Forum.topic_count, export_of_copy=True)


# -- an export of another table of the same name: refused, unless audited as a copy on purpose ------------------
@pytest.mark.parametrize("arn, differs", [
    (FORUMS_ARN.replace("123456789012", "999999999999"), ["its account is 999999999999, the live table's "
                                                          "123456789012"]),
    (FORUMS_ARN.replace("us-east-1", "eu-west-1"), ["its region is eu-west-1, the live table's us-east-1"]),
    ("arn:aws:dynamodb:eu-west-1:999999999999:table/Forums", ["its account is 999999999999, the live table's "
                                                              "123456789012", "its region is eu-west-1"]),
], ids=["account", "region", "both"])
def test_an_export_of_the_same_named_table_of_another_account_or_region_is_refused_and_reports_nothing(
        arn: str, differs: List[str], tmp_path: Path) -> None:
    """The table of that name elsewhere (production's, while the live table is staging's) holds other parents: its
    candidates say nothing of the live table's, and a drifted parent exact there would be missed."""
    activity()
    plant()
    elsewhere = [item for item in _items("Forums") if _key(item) != ("FORUM#f1", "META")]  # f1 exact there
    export = write_export(tmp_path, elsewhere + [{"pk": {"S": "FORUM#f1"}, "sk": {"S": "META"},
                                                  "topic_count": {"N": "3"}}], table_arn=arn)
    seen: List[ExportProgress] = []
    with pytest.raises(ExportError, match=re.escape(export)) as error:
        audit(Forum.topic_count, export=export, progress=seen.append)
    message = str(error.value)
    assert all(text in message for text in differs), message
    assert arn in message and f"live table {FORUMS_ARN}" in message and "export_of_copy=True" in message
    assert seen == []  # no file read, no candidate nominated or verified
    assert drifts(audit(Forum.topic_count)) == {("FORUM#f1", "META"): (5, 3), ("FORUM#f2", "META"): (4, 5)}


def test_an_export_of_an_earlier_table_of_the_same_name_is_refused_by_its_table_id(tmp_path: Path) -> None:
    """A table deleted and created again under its name (or restored under it) has a new TableId: the earlier
    one's export is not its. (moto gives no TableId: DescribeTable answers with one here, as AWS's does.)"""
    activity()
    plant()
    with table_id(Forum, "earlier-4b1e"):
        export = export_table(Forum, tmp_path)
        assert drifts(audit(Forum.topic_count, export=export))  # the same table: audited
    seen: List[ExportProgress] = []
    with table_id(Forum, "now-9c2f"), pytest.raises(ExportError, match=re.escape(export)) as error:
        audit(Forum.topic_count, export=export, progress=seen.append)
    assert "its table id is earlier-4b1e, the live table's now-9c2f" in str(error.value) and seen == []
    with table_id(Forum, "now-9c2f"):
        assert drifts(audit(Forum.topic_count, export=export, export_of_copy=True)) == \
            drifts(audit(Forum.topic_count))


def test_an_export_of_a_copy_is_audited_on_purpose_with_export_of_copy(tmp_path: Path) -> None:
    """A copy in another account and region (a restore, a staging copy) nominates candidates, and the live table
    decides, as with any export."""
    activity()
    plant()
    copy = write_export(tmp_path, _items("Forums"), table_arn="arn:aws:dynamodb:eu-west-1:999999999999:table/Forums",
                        table_id="0a1b2c3d-copy")
    repair(audit(Forum.topic_count, parents=[("FORUM#f1", "META")]).drifts)  # exact live, drifted in the copy
    report = audit(Forum.topic_count, export=copy, export_of_copy=True)
    assert drifts(report, "candidates") == {("FORUM#f1", "META"): (5, 3), ("FORUM#f2", "META"): (4, 5)}
    assert drifts(report) == drifts(audit(Forum.topic_count)) == {("FORUM#f2", "META"): (4, 5)}


def test_an_export_without_a_table_id_is_matched_to_the_live_table_by_its_arn_alone(tmp_path: Path) -> None:
    """A hand-made export (``write_export`` without ``table_id``) carries no TableId: its ARN decides."""
    activity()
    plant()
    export = write_export(tmp_path, _items("Forums"), table_arn=FORUMS_ARN)
    assert drifts(audit(Forum.topic_count, export=export)) == drifts(audit(Forum.topic_count))


def test_each_live_table_is_described_once_per_audit_whatever_the_number_of_files(tmp_path: Path) -> None:
    """One DescribeTable a table (a control-plane call: no read units), however many files, processes and
    candidates."""
    activity()
    plant()
    taken = exports(tmp_path, files=4)
    described: List[str] = []

    def record(sender: Any, operation_name: str, table_name: str, **_: Any) -> None:
        if operation_name == "DescribeTable":
            described.append(table_name)

    pre_dynamodb_send.connect(record)
    try:
        report = audit(Forum.member_count, export=[taken["Forums"], taken["Members"]], workers=2)
    finally:
        pre_dynamodb_send.disconnect(record)
    assert sorted(described) == ["Forums", "Members"]
    assert report.drifts and report.read_units == audit(Forum.member_count, parents=[("FORUM#f3", "META")]).read_units


def test_the_spark_engine_refuses_an_export_of_another_account_before_it_starts(tmp_path: Path) -> None:
    activity()
    export = write_export(tmp_path, _items("Forums"), table_arn=FORUMS_ARN.replace("123456789012", "999999999999"))
    with pytest.raises(ExportError, match="its account is 999999999999"):
        audit(Forum.topic_count, export=export, engine="spark", spark=object())  # not a session: never reached


def test_an_export_of_a_table_that_does_not_exist_live_is_refused(tmp_path: Path) -> None:
    activity()
    export = export_table(Forum, tmp_path)
    Forum.delete_table()
    try:
        with pytest.raises(ExportError, match=r"the live table 'Forums' cannot be described .*DescribeTable") \
                as error:
            audit(Forum.topic_count, export=export)
    finally:
        Forum.create_table(billing_mode="PAY_PER_REQUEST", wait=True)  # for the backend to delete
    assert export in str(error.value)


def test_a_corrupt_data_file_reports_nothing(tmp_path: Path) -> None:
    """A reading error raised in a worker process reaches the caller as itself, naming the file."""
    activity()
    plant()
    export = Path(exports(tmp_path, files=4)["Forums"])
    broken = sorted((export / "data").glob("*.json.gz"))[1]
    broken.write_bytes(gzip.compress(b'{"Item": {"pk": {"S": "FORUM#f1"}}}\n')[:-6])
    with pytest.raises(ExportError, match=broken.name) as raised:
        audit(Forum.topic_count, export=str(export), workers=2)
    assert isinstance(raised.value, CounterError)


def _damage(export: Path, how: str) -> str:
    """Damage an export as the reader's own tests do; the text the error must hold (a file, or the format)."""
    if how == "ion":
        set_summary(export, outputFormat="ION")
        return "ION"
    if how == "incremental":
        set_summary(export, exportType="INCREMENTAL_EXPORT")
        return "incremental"
    path = data_path(export, 1)
    if how == "missing file":
        path.unlink()
    elif how == "checksum":
        set_entry(export, 1, md5Checksum=base64.b64encode(hashlib.md5(b"other").digest()).decode())
    elif how == "item count":
        set_entry(export, 1, itemCount=entries(export)[1]["itemCount"] + 1)
        set_summary(export, itemCount=json.loads((export / "manifest-summary.json").read_text())["itemCount"] + 1)
    elif how == "file listed twice":  # counts and MD5s add up: the file's children would be counted twice
        listed = entries(export)
        twice = listed + listed[1:2]
        (export / "manifest-files.json").write_text("".join(json.dumps(entry) + "\n" for entry in twice))
        set_summary(export, itemCount=sum(entry["itemCount"] for entry in twice))
        return f"{listed[1]['dataFileS3Key']!r} is listed twice"
    return str(path)


@pytest.mark.parametrize("how", ["ion", "incremental", "missing file", "checksum", "item count",
                                 "file listed twice"])
def test_an_export_not_as_aws_writes_it_fails_the_audit_and_reports_nothing(how: str, tmp_path: Path) -> None:
    activity()
    plant()
    export = Path(exports(tmp_path)["Forums"])
    named = _damage(export, how)
    seen: List[ExportProgress] = []
    with pytest.raises(ExportError, match=re.escape(named)):
        audit(Forum.topic_count, export=str(export), workers=2, progress=seen.append)  # read in processes
    assert all(p.candidates is None for p in seen)  # no candidate was nominated, none verified
    assert drifts(audit(Forum.topic_count)) == {("FORUM#f1", "META"): (5, 3), ("FORUM#f2", "META"): (4, 5)}


def test_an_exported_item_not_as_dynamodb_writes_it(tmp_path: Path) -> None:
    items = [{"pk": {"S": "FORUM#x"}, "sk": {"S": "META"}, "topic_count": {"N": "1"}}]
    export = Path(write_export(tmp_path, items, table_arn=FORUMS_ARN, files=1))
    data = next((export / "data").glob("*.json.gz"))
    data.write_bytes(gzip.compress(json.dumps({"NewImage": items[0]}).encode() + b"\n"))
    with pytest.raises(ExportError):
        audit(Forum.topic_count, export=str(export))


# -- conditions evaluated on raw items, as DynamoDB evaluates them -------------------------------------------
CONDITIONS = {
    "equal": lambda: Forum.sk == "META",
    "not equal": lambda: Forum.sk != "META",
    "begins": lambda: Forum.sk.startswith("TOPIC#"),
    "number": lambda: Forum.topic_count > 2,
    "between": lambda: Forum.topic_count.between(2, 4),
    "in": lambda: Forum.sk.is_in("META", "DAY"),
    "exists": lambda: Forum.upvotes.exists(),
    "absent": lambda: Forum.upvotes.does_not_exist(),
    "and or not": lambda: (Forum.sk == "META") & ~(Forum.topic_count < 3) | Forum.sk.startswith("VOTE#"),
    "discriminator": lambda: Topic.kind.is_in(Topic, Pinned),
    "contains": lambda: Forum.pk.contains("#f1"),
}


@pytest.mark.parametrize("name", sorted(CONDITIONS))
def test_a_condition_matches_exactly_the_items_a_scan_filters(name: str) -> None:
    activity()
    plant()
    condition = CONDITIONS[name]()
    scanned = {_key(item) for page in _scan_pages(condition) for item in page["Items"]}
    matches = matcher(condition, name)
    assert {_key(item) for item in _items("Forums") if matches(item)} == scanned
    assert scanned  # each condition picks something, and not everything
    assert scanned != {_key(item) for item in _items("Forums")}


def test_a_condition_that_cannot_be_evaluated_on_an_item() -> None:
    with pytest.raises(ExportError, match=r"Forum.audit_filter\(\) .*size"):
        matcher(Forum.sk.startswith("A") & (size(Forum.pk) > 3), "Forum.audit_filter()", ExportError)


def _scan_pages(condition: Any) -> Sequence[Dict[str, Any]]:
    connection = Forum._get_connection()
    pages, start = [], None
    while True:
        page = connection.scan(filter_condition=condition, exclusive_start_key=start, consistent_read=True)
        pages.append(page)
        start = page.get("LastEvaluatedKey")
        if not start:
            return pages


def _items(table: str) -> List[Dict[str, Any]]:
    client = raw_client(None)
    return [item for page in client.get_paginator("scan").paginate(TableName=table, ConsistentRead=True)
            for item in page["Items"]]


def _key(item: Dict[str, Any]) -> Key:
    return item["pk"]["S"], item["sk"]["S"]

