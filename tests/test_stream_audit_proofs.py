"""What an audit of a counter fed from the stream may call exact, or drift: only what it proved.

A parent's mark says which of its records the handler counted. Without a mark, records in the stream may have
been passed over (their parent did not exist then) or may wait: the parent is unverifiable until they are known.
A reshard gives every shard item the mark its counter had. Children counted into a parent from outside its
partition are never audited by a Query of the partition. An export of a counter fed from the stream nominates
every parent whose records wait, and the live table decides. And the records of every stream of the table still
readable (a stream disabled and enabled again) are read."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from pynamodb_counters import audit, repair, reshard
from pynamodb_counters.streams import count_stream
from pynamodb_counters.testing import export_table, lambda_event, stream_records
from tests.support import feed_models as feed
from tests.support.factories import raw_client
from tests.support.previous_stream import previous_stream, restart_stream
from tests.support.stream_models import STREAM_MODELS, Board, Folder, Pin, tallies
from tests.support.stream_state import boards, count, exact, stored, stream

pytestmark = pytest.mark.usefixtures("dynamodb")

META = ("BOARD#b1", "META")


@pytest.fixture
def counters_models() -> List[type]:
    return list(STREAM_MODELS) + list(feed.FEED_MODELS)


def drift_by_hand(pk: str, counter: str, by: int) -> None:
    raw_client(None).update_item(TableName="Boards", Key={"pk": {"S": pk}, "sk": {"S": "META"}},
                                 UpdateExpression="ADD #c :n", ExpressionAttributeNames={"#c": counter},
                                 ExpressionAttributeValues={":n": {"N": str(by)}})


def last(records: List[Dict[str, Any]]) -> str:
    return str(records[-1]["dynamodb"]["SequenceNumber"])


def found(report: Any) -> Tuple[List[Tuple[Any, Any, Any]], List[Any]]:
    return [(d.key, d.stored, d.actual) for d in report.drifts], [u.key for u in report.unverifiable]


# -- a parent without a mark ---------------------------------------------------------------------------------------
def test_a_parent_whose_records_were_passed_over_before_it_existed_is_unverifiable_never_exact() -> None:
    for user in range(3):
        Pin(pk="BOARD#b1", sk=f"PIN#u{user}").save()  # before their board exists
    result = count(stream())
    assert {change.parent for change in result.missing} == {Board, Folder}  # their days are created
    start = last(stream())
    boards("BOARD#b1")
    count(stream(after=start))  # caught up: nothing will ever count the three pins into the board
    assert (stored("BOARD#b1")["pin_count"], len(list(Pin.query("BOARD#b1", Pin.sk.startswith("PIN#"))))) == (0, 3)
    report = audit(Board.pin_count, parents=[META])
    assert report.drifts == ()
    [parent] = report.unverifiable
    assert "mark" in parent.reason and "Pin.board" in parent.reason


def test_a_parent_deleted_and_created_again_has_no_mark_and_is_unverifiable_while_its_records_are_in_the_stream(
        ) -> None:
    boards("BOARD#b1")
    for user in range(3):
        Pin(pk="BOARD#b1", sk=f"PIN#u{user}").save()
    count(stream())
    assert audit(Board.pin_count, parents=[META]).drifts == ()
    start = last(stream())
    Board.get(*META).delete()
    Board(pk="BOARD#b1", sk="META").save()
    count(stream(after=start))
    report = audit(Board.pin_count, parents=[META])
    assert (found(report)[0], found(report)[1]) == ([], [META])


def test_a_parent_without_a_mark_is_exact_where_nothing_in_the_stream_changes_it() -> None:
    boards("BOARD#b1", "BOARD#b2")
    Pin(pk="BOARD#b2", sk="PIN#u1").save()
    count(stream())
    report = audit(Board.pin_count, parents=[META, ("BOARD#b2", "META")])
    assert found(report) == ([], [])


# -- a reshard -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("before, after", [(1, 4), (4, 2)])
def test_after_a_reshard_every_shard_item_holds_the_mark_its_counter_had(before: int, after: int) -> None:
    Post, Like = tallies(before)
    Post.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
    try:
        handle = lambda records, like: count_stream(lambda_event(records, like), models=[like])  # noqa: E731
        Post(pk="P", sk="META").save()
        for n in range(12):
            Like(pk="P", sk=f"LIKE#{n}").save()
        handle(stream_records(Like), Like)
        start = last(stream_records(Like))
        Like.get("P", "LIKE#0").delete()  # a last batch that touches one shard item only: the marks differ
        Like(pk="P", sk="LIKE#0").save()
        handle(stream_records(Like, after=start), Like)
        Grown, Liked = tallies(after)
        reshard(Grown.views, after, parents=[("P", "META")])
        start = last(stream_records(Like))
        handle(stream_records(Liked, after=start), Liked)
        total = lambda: Grown.views.total(("P", "META"), consistent_read=True)  # noqa: E731
        assert total() == 12
        assert found(audit(Grown.views, parents=[("P", "META")])) == ([], [])
        for n in range(12, 15):
            Liked(pk="P", sk=f"LIKE#{n}").save()  # waiting
        assert found(audit(Grown.views, parents=[("P", "META")])) == ([], [])
        handle(stream_records(Liked, after=start), Liked)
        assert total() == 15
    finally:
        Post.delete_table()


# -- children outside their parent's partition -------------------------------------------------------------------
def test_children_counted_from_outside_their_parents_partition_leave_it_unverifiable_and_never_repaired(
        tmp_path: Path) -> None:
    feed.Post(pk="POST#p1", sk="META").save()
    feed.Post(pk="POST#p2", sk="META").save()
    for user in ("ann", "bob", "cy"):
        feed.Cheer(pk=f"USER#{user}", sk="CHEER#POST#p1", post_id="POST#p1").save()
    assert count_stream(lambda_event(stream_records(feed.Post), feed.Post), models=[feed.Cheer]).error is None
    assert feed.Post.get("POST#p1", "META", consistent_read=True).cheer_tally == 3
    for report in (audit(feed.Post.cheer_tally), audit(feed.Post.cheer_tally, parents=[("POST#p1", "META")]),
                   audit(feed.Post.cheer_tally, export=export_table(feed.Post, tmp_path / "feed", files=1))):
        assert found(report) == ([], [("POST#p1", "META")])
        assert "outside" in report.unverifiable[0].reason
    assert feed.Post.get("POST#p1", "META", consistent_read=True).cheer_tally == 3


# -- an export taken while records wait -------------------------------------------------------------------------------
@pytest.mark.parametrize("drift, waiting", [(3, 3), (-3, -3)])
def test_an_export_audit_finds_a_drift_that_the_records_waiting_at_export_time_offset(
        tmp_path: Path, drift: int, waiting: int) -> None:
    boards("BOARD#b1", "BOARD#b2")
    for n in range(5):
        Pin(pk="BOARD#b1", sk=f"PIN#u{n}").save()
        Pin(pk="BOARD#b2", sk=f"PIN#u{n}").save()
    count(stream())
    start = last(stream())
    drift_by_hand("BOARD#b1", "pin_count", drift)
    for n in range(abs(waiting)):  # the export holds as many children as the counter: they wait for the handler
        if waiting > 0:
            Pin(pk="BOARD#b1", sk=f"PIN#w{n}").save()
        else:
            Pin(pk="BOARD#b1", sk=f"PIN#u{n}").delete()
    exported = export_table(Board, tmp_path / "boards", files=2)
    report = audit(Board.pin_count, export=exported)
    live = audit(Board.pin_count, parents=[META, ("BOARD#b2", "META")])
    assert found(report) == found(live) == ([(META, 5 + drift, 5)], [])
    assert [r.status for r in repair(report.drifts).repairs] == ["repaired"]
    count(stream(after=start))
    exact("BOARD#b1", "BOARD#b2")


# -- a stream disabled and enabled again -----------------------------------------------------------------------------
@pytest.mark.parametrize("drift", [0, 3])
def test_the_records_of_a_previous_stream_still_readable_are_read(drift: int) -> None:
    from pynamodb_counters.reconcile._stream_proof import streams_client

    boards("BOARD#b1")
    for n in range(2):
        Pin(pk="BOARD#b1", sk=f"PIN#u{n}").save()
    count(stream())
    old = raw_client(None).describe_table(TableName="Boards")["Table"]["LatestStreamArn"]
    start = last(stream())
    drift_by_hand("BOARD#b1", "pin_count", drift)
    for n in range(2, 5):
        Pin(pk="BOARD#b1", sk=f"PIN#u{n}").save()  # waiting, in the stream about to be disabled
    waiting = stream(after=start)
    assert restart_stream("Boards") != old
    with previous_stream(streams_client(Pin), "Boards", old, waiting) as answered:  # the child table's client
        report = audit(Board.pin_count, parents=[META])
    assert "GetRecords" in answered
    assert found(report) == (([(META, 2 + drift, 2)] if drift else []), [])
    repair(report.drifts)
    event = lambda_event(waiting, Board)  # the previous stream's event source mapping delivers them
    event["Records"] = [{**record, "eventSourceARN": old} for record in event["Records"]]
    assert count_stream(event, models=[Pin]).error is None
    exact("BOARD#b1")
