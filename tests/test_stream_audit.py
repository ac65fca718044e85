"""Audits and repairs of counters fed from the stream: records still waiting for ``count_stream`` are never taken
for drift nor counted twice, and real drift is found and repaired exactly, live and from an export, whether
records wait or not.

The audit proves what a counter holds at its mark (the last record counted into it): it writes a probe item into
the parent's partition before counting the children and deletes it after, reads the child table's stream up to
the probe's removal, and takes off the changes of the records after the mark. Every test runs the handler after
the audit (and the repair) and compares every counter with a recount."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest
from botocore.exceptions import ClientError
from pynamodb.attributes import UnicodeAttribute
from pynamodb.constants import STREAM_NEW_AND_OLD_IMAGE
from pynamodb.models import Model
from pynamodb.signals import pre_dynamodb_send

from pynamodb_counters import CounterField, CounterMixin, audit, counted_by, repair
from pynamodb_counters.streams import SkipReason
from pynamodb_counters.testing import export_table
from tests.support.client_hooks import hooked
from tests.support.factories import raw_client
from tests.support.models import REGION
from tests.support.stream_models import STREAM_MODELS, Board, Note, Pin
from tests.support.stream_state import boards, count, exact, stored, stream

pytestmark = pytest.mark.usefixtures("dynamodb")

META = ("BOARD#b1", "META")


@pytest.fixture
def counters_models() -> List[type]:
    return list(STREAM_MODELS)


def drift_by_hand(pk: str, counter: str, by: int) -> None:
    """Drift a counter as a hand fix around the library does: a raw ADD, nothing else."""
    raw_client(None).update_item(TableName="Boards", Key={"pk": {"S": pk}, "sk": {"S": "META"}},
                                 UpdateExpression="ADD #c :n", ExpressionAttributeNames={"#c": counter},
                                 ExpressionAttributeValues={":n": {"N": str(by)}})


def probes() -> List[Dict[str, Any]]:
    """The audit probes stored in the table (none once an audit is over)."""
    return [item for item in raw_client(None).scan(TableName="Boards")["Items"] if "_cprobe" in item]


def test_an_audit_while_records_wait_finds_no_drift_and_the_handler_then_makes_every_counter_exact() -> None:
    boards("BOARD#b1")
    Pin(pk="BOARD#b1", sk="PIN#u1", rating=3).save()
    count(stream())  # counted: the mark holds it
    mark = stream()[-1]["dynamodb"]["SequenceNumber"]
    Pin(pk="BOARD#b1", sk="PIN#u2", rating=4, status="published").save()  # waiting
    Pin(pk="BOARD#b1", sk="PIN#u1", rating=5).save()  # an edit waiting: stars +2
    Pin(pk="BOARD#b1", sk="PIN#u3").save()
    Pin(pk="BOARD#b1", sk="PIN#u3").delete()
    for counter in (Board.pin_count, Board.stars, Board.published):
        report = audit(counter, parents=[META])
        assert (report.drifts, report.unverifiable, report.parents_checked) == ((), (), 1), counter
    assert not probes()
    result = count(stream(after=mark))
    assert result.skipped and {skip.reason for skip in result.skipped} >= {SkipReason.A_PROBE}
    exact("BOARD#b1")


def test_real_drift_with_records_waiting_is_repaired_exactly_and_the_handler_counts_them_on_top() -> None:
    boards("BOARD#b1", "BOARD#b2")
    Pin(pk="BOARD#b1", sk="PIN#u1").save()
    Pin(pk="BOARD#b2", sk="PIN#u1").save()
    count(stream())
    drift_by_hand("BOARD#b1", "pin_count", 5)  # 6 stored, 1 counted into it
    mark = stream()[-1]["dynamodb"]["SequenceNumber"]
    Pin(pk="BOARD#b1", sk="PIN#u2").save()  # waiting: 2 children stored
    Pin(pk="BOARD#b2", sk="PIN#u2").save()
    report = audit(Board.pin_count, parents=[META, ("BOARD#b2", "META")])
    assert [(d.key, d.stored, d.actual) for d in report.drifts] == [(META, 6, 1)]  # what it holds at its mark
    assert [r.status for r in repair(report.drifts).repairs] == ["repaired"]
    assert Board.get(*META, consistent_read=True).pin_count == 1  # the waiting pin is the handler's to count
    count(stream(after=mark))
    exact("BOARD#b1", "BOARD#b2")


def test_real_drift_with_nothing_waiting_is_found_and_repaired_as_today_live_and_from_an_export(
        tmp_path: Path) -> None:
    boards("BOARD#b1", "BOARD#b2")
    for pk in ("BOARD#b1", "BOARD#b2"):
        Note(pk=pk, sk="NOTE#1", words=7).save()  # note_words from the stream, note_count in its transaction
        Pin(pk=pk, sk="PIN#u1").save()
    count(stream())
    drift_by_hand("BOARD#b2", "note_words", -3)
    exported = [export_table(Board, tmp_path / "boards", files=2)]
    from_export = audit(Board.note_words, export=exported)
    assert [(d.key, d.stored, d.actual) for d in from_export.drifts] == [(("BOARD#b2", "META"), 4, 7)]
    live = audit(Board.note_words, parents=[META, ("BOARD#b2", "META")])
    assert live.drifts == from_export.drifts and live.unverifiable == ()
    assert audit(Board.note_count, parents=[META, ("BOARD#b2", "META")]).drifts == ()
    assert [r.status for r in repair(live.drifts).repairs] == ["repaired"]
    exact("BOARD#b1", "BOARD#b2")


def test_a_repair_of_an_older_audit_recounts_when_the_handler_counted_since() -> None:
    boards("BOARD#b1")
    Pin(pk="BOARD#b1", sk="PIN#u1").save()
    count(stream())
    drift_by_hand("BOARD#b1", "pin_count", 2)
    mark = stream()[-1]["dynamodb"]["SequenceNumber"]
    Pin(pk="BOARD#b1", sk="PIN#u2").save()
    [found] = audit(Board.pin_count, parents=[META]).drifts
    assert (found.stored, found.actual) == (3, 1)
    count(stream(after=mark))  # the handler counts the waiting pin before the repair: 4 stored
    assert Board.get(*META, consistent_read=True).pin_count == 4
    [done] = repair([found]).repairs
    assert (done.status, done.before, done.after) == ("repaired", 4, 2)
    exact("BOARD#b1")


@pytest.fixture
def pin_during_counts() -> Iterator[List[int]]:
    """A pin saved on board b1 after the audit counted it and before it deletes its probe (just before each
    DeleteItem), as many times as the list says: the count did not see it, the records before the probe's
    removal hold it."""
    left = [2]

    def save_one(sender: Any, operation_name: str, table_name: str, req_uuid: Any) -> None:
        if operation_name == "DeleteItem" and left[0] > 0:
            left[0] -= 1
            raw_client(None).put_item(TableName="Boards", Item={"pk": {"S": "BOARD#b1"},
                                                                "sk": {"S": f"PIN#late{left[0]}"}})

    pre_dynamodb_send.connect(save_one, weak=False)
    try:
        yield left
    finally:
        pre_dynamodb_send.disconnect(save_one)


def test_a_child_written_during_the_count_makes_it_count_again_and_never_drift(pin_during_counts: List[int]
                                                                               ) -> None:
    boards("BOARD#b1")
    Pin(pk="BOARD#b1", sk="PIN#u1").save()
    report = audit(Board.pin_count, parents=[META])  # the first two counts each see a pin written meanwhile
    assert pin_during_counts == [0]
    assert (report.drifts, report.unverifiable) == ((), ())
    count(stream())
    exact("BOARD#b1")


def test_a_parent_written_during_every_count_is_unverifiable(pin_during_counts: List[int]) -> None:
    boards("BOARD#b1")
    drift_by_hand("BOARD#b1", "pin_count", 1)
    pin_during_counts[0] = 10
    report = audit(Board.pin_count, parents=[META])
    assert report.drifts == ()
    assert [u.cause for u in report.unverifiable] == ["it changed during every count (live writes): audit it "
                                                      "again"]
    assert stored("BOARD#b1")["pin_count"] == 1  # left alone
    assert not probes()


def test_an_audit_that_cannot_write_its_probe_reports_the_parent_and_writes_nothing() -> None:
    boards("BOARD#b1")
    Pin(pk="BOARD#b1", sk="PIN#u1").save()

    def refuse(**_: Any) -> None:  # raised before the request reaches the engine
        raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "not authorized to perform: "
                                     "dynamodb:PutItem"}, "ResponseMetadata": {"HTTPStatusCode": 400}}, "PutItem")

    events = Pin._get_connection().connection.client.meta.events  # the client PynamoDB sends the probe with
    events.register("before-send.dynamodb.PutItem", refuse)
    try:
        report = audit(Board.pin_count, parents=[META])
    finally:
        events.unregister("before-send.dynamodb.PutItem", refuse)
    assert report.drifts == ()
    [parent] = report.unverifiable
    assert "probe" in parent.reason and "PutItem" in parent.reason
    assert not probes()
    assert stored("BOARD#b1")["pin_count"] == 0


def test_a_sharded_counter_is_compared_at_each_shard_items_own_mark_and_repaired_exactly() -> None:
    boards("BOARD#b1")
    for user in range(6):
        Pin(pk="BOARD#b1", sk=f"PIN#u{user}").save()
    records = stream()
    sent: List[str] = []

    def fail_the_first(**_: Any) -> None:  # one shard item's update fails: its mark stays behind the others'
        sent.append("UpdateItem")
        if len(sent) == 1:
            raise ClientError({"Error": {"Code": "ValidationException", "Message": "injected"},
                               "ResponseMetadata": {"HTTPStatusCode": 400}}, "UpdateItem")

    with hooked("before-send.dynamodb.UpdateItem", fail_the_first, Board):
        assert count(records)["batchItemFailures"]
    items = raw_client(None).scan(TableName="Boards")["Items"]
    marks = {item.get("_cstream:views<prefix=PIN#", {}).get("S") for item in items
             if item["pk"]["S"].startswith("BOARD#b1") and item["sk"]["S"] == "META"}  # "BOARD#b1#SHARD2"...
    assert len(marks) > 2  # shard items marked at different records, and one not at all
    assert audit(Board.views, parents=[META]).drifts == ()
    drift_by_hand("BOARD#b1", "views", 2)  # on the parent item, one of the four shard items
    [found] = audit(Board.views, parents=[META]).drifts
    assert (found.stored, found.actual) == (Board.views.total(META, consistent_read=True), found.stored - 2)
    assert [r.status for r in repair([found]).repairs] == ["repaired"]
    count(records)  # delivered again from the start: what was counted is not counted twice
    exact("BOARD#b1")
    assert stored("BOARD#b1")["views"] == 6


def test_a_relation_counted_by_children_is_reported_with_its_cause_and_nothing_written() -> None:
    class Wall(CounterMixin, Model):
        Meta = type("Meta", (), {"table_name": "Walls", "region": REGION,
                                 "stream_view_type": STREAM_NEW_AND_OLD_IMAGE})
        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        posts = CounterField()

    class Post(CounterMixin, Model):
        Meta = type("Meta", (), {"table_name": "Walls", "region": REGION,
                                 "stream_view_type": STREAM_NEW_AND_OLD_IMAGE})
        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        body = UnicodeAttribute()  # what tells a post from its wall, in their one table
        wall = counted_by(Wall.posts, key=lambda post: (post.pk, "META"), counting="stream",
                          children=lambda key: Post.count(key[0], Post.sk.startswith("POST#")))

    Wall.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
    Wall(pk="W", sk="META").save()
    [parent] = audit(Wall.posts, parents=[("W", "META")]).unverifiable
    assert "children=" in parent.reason
    assert [item["sk"]["S"] for item in raw_client(None).scan(TableName="Walls")["Items"]] == ["META"]


def test_a_shard_that_ended_is_read_to_its_end_through_empty_pages() -> None:
    """DynamoDB Streams may answer a GetRecords of a shard that ended (a parent shard) with an empty page before
    its last records: the audit reads on, so a record of the partition there is taken off (moto keeps one open
    shard: the stream is stubbed, the table is moto's)."""
    from botocore.stub import Stubber

    from pynamodb_counters.reconcile._stream_proof import Probe, StreamProof, streams_client

    boards("BOARD#b1")

    def number(n: int) -> str:
        return str(n).zfill(21)  # DynamoDB's sequence numbers have 21 digits and more

    parent, child = "shardId-00000001-parent-000000", "shardId-00000002-child-0000000"

    def record(sequence: str, event: str, sk: str) -> Dict[str, Any]:
        image = {"pk": {"S": "BOARD#b1"}, "sk": {"S": sk}}
        return {"eventID": f"e{sequence}", "eventName": event, "eventSource": "aws:dynamodb",
                "dynamodb": {"Keys": image, "SequenceNumber": sequence, "StreamViewType": "NEW_AND_OLD_IMAGES",
                             **({"NewImage": image} if event == "INSERT" else {"OldImage": image})}}

    client = streams_client(Pin)
    arn = raw_client(None).describe_table(TableName="Boards")["Table"]["LatestStreamArn"]
    with Stubber(client) as stub:
        stub.add_response("list_streams", {"Streams": [{"StreamArn": arn, "TableName": "Boards",
                                                        "StreamLabel": arn.rsplit("/", 1)[-1]}]})
        stub.add_response("describe_stream", {"StreamDescription": {"Shards": [
            {"ShardId": parent, "SequenceNumberRange": {"StartingSequenceNumber": number(100),
                                                        "EndingSequenceNumber": number(300)}},
            {"ShardId": child, "ParentShardId": parent,
             "SequenceNumberRange": {"StartingSequenceNumber": number(400)}}]}})
        stub.add_response("get_shard_iterator", {"ShardIterator": "parent-1"})
        stub.add_response("get_records", {"Records": [], "NextShardIterator": "parent-2"})  # not its end
        stub.add_response("get_records", {"Records": [record(number(200), "INSERT", "PIN#late")]})  # the end
        stub.add_response("get_shard_iterator", {"ShardIterator": "child-1"})
        stub.add_response("get_records", {"Records": [record(number(500), "INSERT", "_cprobe#p"),
                                                      record(number(600), "REMOVE", "_cprobe#p")],
                                          "NextShardIterator": "child-2"})
        stub.add_response("get_records", {"Records": [], "NextShardIterator": "child-3"})  # its current end
        proof = StreamProof(Board.pin_count, [relation for relation in (Pin.board,)])
        probe = Probe("Boards", "BOARD#b1", "_cprobe#p", ("BOARD#b1", "_cprobe#p"))
        waiting = proof.waiting([(META, {("_cstream:pin_count<prefix=PIN#", 0): "1".zfill(40)}, [probe])])
        stub.assert_no_pending_responses()
    assert waiting == {META: 1}  # the pin in the parent shard, after the mark, waits
