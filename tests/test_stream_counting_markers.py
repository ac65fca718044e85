"""Children counted from the stream outside their parent's partition (``counted_by(..., counting="stream")`` whose
key names a parent of another partition): each record is counted with a marker item of its own, create-only, in
the same TransactWriteItems as its parents' changes, exactly once whatever Lambda delivers; the parents' marks are
never set for them. A child model without a ``TTLAttribute`` is refused at its first such record.

Every counter is compared with a recount of the children stored (:func:`exact`)."""
from __future__ import annotations

import time
from collections import Counter
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional, Sequence, Tuple

import pytest
from botocore.exceptions import ClientError
from pynamodb.attributes import NumberAttribute, TTLAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_counters import CounterMixin, counted_by, signals
from pynamodb_counters.declare._expiry_rules import MARKER, MARKER_LIFETIME
from pynamodb_counters.exceptions import ConfigurationError
from pynamodb_counters.streams import SkipReason, StreamResult, count_expiries, count_stream, not_a_marker
from pynamodb_counters.testing import lambda_event, stream_records
from tests.support.client_hooks import hooked
from tests.support.factories import raw_client
from tests.support.stream_marker_models import MARKER_MODELS, DailyLikes, Invite, Like, Post, Reply, Thread
from tests.support.stream_records import expire, ttl_marked
from tests.test_declarations import refused

pytestmark = pytest.mark.usefixtures("dynamodb")

POSTS = ["POST#p1", "POST#p2"]
STREAM_MARKER = "_cstream#"
"""The start of a stream record's marker's hash key (an expiry's is ``_cexpiry#``)."""


@pytest.fixture
def counters_models() -> List[type]:
    return list(MARKER_MODELS)


def posts(*ids: str) -> None:
    for post_id in ids or POSTS:
        Post(post_id=post_id).save()


OF_TABLE = {model.Meta.table_name: model for model in reversed(MARKER_MODELS)}
"""A model of each table, by its name (the first of the table's)."""


def stream(table: str = "Likes", after: Optional[str] = None) -> List[Dict[str, Any]]:
    return stream_records(OF_TABLE[table], after=after)


def count(records: Sequence[Dict[str, Any]], table: str = "Likes", models: Sequence[type] = (Like,)) -> StreamResult:
    """``count_stream`` on ``records``, as a Lambda on ``table``'s stream receives them."""
    return count_stream(lambda_event(records, OF_TABLE[table]), models=list(models))


def last(records: Sequence[Dict[str, Any]]) -> str:
    sequence: str = records[-1]["dynamodb"]["SequenceNumber"]
    return sequence


def exact(*ids: str) -> None:
    """Every post's and day's counters equal a recount of the likes stored (markers left out)."""
    likes = list(Like.scan(filter_condition=not_a_marker(), consistent_read=True))
    for post_id in ids or POSTS:
        mine = [like for like in likes if like.post_id == post_id]
        post = Post.get(post_id, consistent_read=True)
        assert (post.like_count, post.stars, post.commented) == \
            (len(mine), sum(int(like.stars) for like in mine), sum(like.comment is not None for like in mine)), post_id
    days = Counter(like.day for like in likes)
    stored = {day.post_id[len("DAY#"):]: day.likes for day in DailyLikes.scan(consistent_read=True)}
    assert {day: n for day, n in stored.items() if n} == dict(days)


def markers(table: str = "Likes") -> List[Dict[str, Any]]:
    client = raw_client(None)
    return [item for item in client.scan(TableName=table, ConsistentRead=True)["Items"] if MARKER in item]


def activity() -> None:
    """Likes written by PynamoDB and by raw boto3, edited (stars, a comment, another day) and deleted."""
    Like(user_id="USER#u1", post_id="POST#p1", stars=3).save()
    Like(user_id="USER#u1", post_id="POST#p2").save()
    Like(user_id="USER#u2", post_id="POST#p1", comment="nice").save()
    raw_client(None).put_item(TableName="Likes", Item={"user_id": {"S": "USER#u3"}, "post_id": {"S": "POST#p2"},
                                                       "stars": {"N": "5"}, "day": {"S": "2026-12-07"}})
    like = Like.get("USER#u1", "POST#p1")
    like.update(actions=[Like.stars.set(2), Like.comment.set("edited")])
    Like(user_id="USER#u2", post_id="POST#p1", comment="nice", day="2026-12-07").save()  # another day
    Like(user_id="USER#u1", post_id="POST#p2").delete()
    raw_client(None).delete_item(TableName="Likes", Key={"user_id": {"S": "USER#u3"}, "post_id": {"S": "POST#p2"}})
    Like(user_id="USER#u4", post_id="POST#p2", stars=4).save()


# -- counted once, whoever wrote it --------------------------------------------------------------------------------
def test_likes_in_other_partitions_are_counted_from_writes_by_pynamodb_and_boto3() -> None:
    posts()
    activity()
    records = stream()
    result = count(records)
    assert result == {"batchItemFailures": []} and result.error is None
    assert len(result.counted) == len(records) and not result.missing and not result.floored
    exact()
    post = raw_client(None).get_item(TableName="Posts", Key={"post_id": {"S": "POST#p1"}})["Item"]
    assert not [name for name in post if name.startswith("_cstream")]  # markers, never marks
    assert "like_count<outside;table=Likes;relation=Like.post" in post["_cfeed"]["SS"]  # for audits
    assert sorted(item["user_id"]["S"] for item in markers()) == \
        sorted(STREAM_MARKER + record["eventID"] for record in records)


def test_a_batch_delivered_twice_and_records_repeated_count_once() -> None:
    posts()
    activity()
    records = stream()
    first = count(records + records[:3])  # three records repeated in the batch
    assert Counter(skipped.reason for skipped in first.skipped) == {SkipReason.REPEATED: 3}
    exact()
    again = count(records)
    assert again == {"batchItemFailures": []} and again.counted == () and again.changes == ()
    assert {skipped.reason for skipped in again.skipped} == {SkipReason.COUNTED_ALREADY}
    exact()


def test_a_partial_failure_is_redelivered_from_the_record_named_and_counts_the_rest_once() -> None:
    posts()
    activity()
    records = stream()
    calls: List[int] = []

    def refuse_first(**_: Any) -> None:
        calls.append(1)
        if len(calls) == 2:  # the first finds the markers of the records counted before; the second fails
            raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "injected"}},
                              "TransactWriteItems")

    batch = records[:4] + records[:2] + records[4:]  # the first two delivered again within the batch
    count(records[:2])
    with hooked("before-call.dynamodb.TransactWriteItems", refuse_first, Like):
        result = count(batch)
    failed = result["batchItemFailures"][0]["itemIdentifier"]
    assert failed == records[2]["dynamodb"]["SequenceNumber"] and result.error is not None
    assert count(records[2:]) == {"batchItemFailures": []}
    exact()


def test_a_crash_after_the_write_and_before_the_checkpoint_counts_once() -> None:
    posts()
    activity()
    records = stream()

    class Crash(BaseException):
        pass

    def crash(**_: Any) -> None:
        raise Crash("the handler's process died after DynamoDB committed")

    with hooked("after-call.dynamodb.TransactWriteItems", crash, Like), pytest.raises(Crash):
        count(records)
    exact()  # it had committed
    again = count(records)
    assert again.counted == () and again.error is None
    exact()


# -- what never blocks the stream, and what is refused ---------------------------------------------------------------
def test_a_remove_never_takes_a_counter_below_zero() -> None:
    posts()
    Like(user_id="USER#u1", post_id="POST#p1", stars=3).save()
    first = stream()
    count(first)
    raw_client(None).update_item(TableName="Posts", Key={"post_id": {"S": "POST#p1"}},
                                 UpdateExpression="SET stars = :one", ExpressionAttributeValues={":one": {"N": "1"}})
    Like(user_id="USER#u1", post_id="POST#p1").delete()
    result = count(stream(after=last(first)))
    post = Post.get("POST#p1", consistent_read=True)
    assert (post.stars, post.like_count) == (0, 0) and result.error is None
    assert [(change.attribute, change.delta) for change in result.floored] == [("stars", -2)]
    assert ("stars", -1) in [(change.attribute, change.delta) for change in result.changes]
    exact()


def test_a_record_whose_parent_does_not_exist_is_skipped_and_never_blocks_the_stream() -> None:
    posts("POST#p1")
    Like(user_id="USER#u1", post_id="POST#none").save()  # its day's rollup is created: counted there alone
    Like(user_id="USER#u1", post_id="POST#p1").save()
    result = count(stream())
    assert result == {"batchItemFailures": []} and len(result.counted) == 2
    assert sorted(change.attribute for change in result.missing if change.key == ("POST#none",)) == \
        ["like_count", "stars"]
    exact("POST#p1")
    Thread(pk="THREAD#t1", sk="META").save()
    Reply(pk="THREAD#t1", sk="REPLY#1", thread="THREAD#none").save()
    Reply(pk="THREAD#t1", sk="REPLY#2", thread="THREAD#t1").save()
    records = stream("Threads")
    replies = count(records, "Threads", [Reply])
    assert replies == {"batchItemFailures": []} and replies.counted == (records[-1]["eventID"],)
    assert (records[-2]["eventID"], SkipReason.PARENT_MISSING) in \
        [(skipped.event, skipped.reason) for skipped in replies.skipped]
    assert Thread.get("THREAD#t1", "META", consistent_read=True).replies == 1


def test_a_child_of_a_parent_in_another_table_without_a_ttl_attribute_is_refused_when_declared() -> None:
    """Counted into a parent of another table, every record is counted with a marker that expires through the
    child's TTLAttribute: without one (or with a hash key that cannot hold a marker's), the declaration alone shows
    it. (A child outside its parent's partition in the same table is refused at its record: see
    tests/test_stream_counting.py.)"""
    with refused(r"Bookmark.post = counted_by\(...\): counted from the stream into a parent outside its partition.*"
                 r"TTLAttribute"):
        class Bookmark(CounterMixin, Model):
            class Meta:
                table_name = "Bookmarks"
                region = "us-east-1"
                stream_view_type = "NEW_AND_OLD_IMAGES"

            user_id = UnicodeAttribute(hash_key=True)
            post_id = UnicodeAttribute(range_key=True)
            post = counted_by(Post.bookmarks, key=lambda bookmark: (bookmark.post_id,), counting="stream")

    with refused(r"Tally.post = counted_by\(...\): .* needs Tally's hash key to be a string attribute"):
        class Tally(CounterMixin, Model):
            class Meta:
                table_name = "Tallies"
                region = "us-east-1"
                stream_view_type = "NEW_AND_OLD_IMAGES"

            number = NumberAttribute(hash_key=True)
            post_id = UnicodeAttribute()
            expires_at = TTLAttribute(null=True)
            post = counted_by(Post.bookmarks, key=lambda tally: (tally.post_id,), counting="stream")


def test_markers_expire_through_the_childs_ttl_and_their_own_records_are_skipped() -> None:
    posts()
    Like(user_id="USER#u1", post_id="POST#p1").save()
    first = stream()
    before = time.time()
    count(first)
    (marker,) = markers()
    assert before + MARKER_LIFETIME - 5 <= int(marker["expires_at"]["N"]) <= time.time() + MARKER_LIFETIME
    assert marker[MARKER] == {"S": "Likes"}
    written = stream(after=last(first))  # the marker's own INSERT
    key = {"user_id": marker["user_id"], "post_id": marker["post_id"]}
    expired = expire("Likes", [key])  # and its deletion by TTL
    later = ttl_marked(stream(after=last(first)), expired)
    result = count(later)
    assert [skipped.reason for skipped in result.skipped] == [SkipReason.A_MARKER] * len(later) == \
        [SkipReason.A_MARKER] * (len(written) + 1)
    with pytest.raises(ConfigurationError, match=r"is of table Likes's stream, and the models given \(Invite\)"):
        count_expiries(later[-1:], models=[Invite], table="Likes")  # not its table: refused, nothing written
    exact()


def test_a_deletion_by_ttl_taken_by_both_paths_writes_two_markers_that_do_not_collide() -> None:
    posts("POST#p1")
    past = datetime(2026, 1, 1, tzinfo=timezone.utc)
    Invite(user_id="USER#u1", post_id="POST#p1", expires_at=past).save()  # in its transaction: invites 1
    first = stream("Invites")
    count(first, "Invites", [Invite])
    expired = expire("Invites", [{"user_id": {"S": "USER#u1"}, "post_id": {"S": "POST#p1"}}])
    later = ttl_marked(stream("Invites", after=last(first)), expired)
    result = count(later, "Invites", [Invite])
    assert result == {"batchItemFailures": []} and result.expiries is not None
    (removal,) = [record["eventID"] for record in later if record["eventName"] == "REMOVE"]
    assert result.counted == result.expiries.counted == (removal,)
    post = Post.get("POST#p1", consistent_read=True)
    assert (post.invites, post.invites_seen) == (0, 0)
    assert sorted(item["user_id"]["S"].split("#")[0] for item in markers("Invites")) == \
        ["_cexpiry", "_cstream", "_cstream"]  # the insert's, and the deletion's by each path
    replay = count(later, "Invites", [Invite])
    assert replay.counted == () and replay.expiries is not None and replay.expiries.counted == ()
    assert Post.get("POST#p1", consistent_read=True).invites_seen == 0


# -- a move between the child's own partition and another --------------------------------------------------------
def test_a_move_between_its_own_partition_and_another_counts_each_part_by_its_own_mechanism() -> None:
    for pk in ("THREAD#t1", "THREAD#t2"):
        Thread(pk=pk, sk="META").save()
    Reply(pk="THREAD#t1", sk="REPLY#1", thread="THREAD#t1").save()  # its own thread: by the mark
    reply = Reply.get("THREAD#t1", "REPLY#1")
    reply.thread = "THREAD#t2"
    reply.save()  # moved: off its own thread (the mark), onto another (a marker)
    records = stream("Threads")
    result = count(records, "Threads", [Reply])
    assert result == {"batchItemFailures": []} and len(result.counted) == 2
    client = raw_client(None)
    own = client.get_item(TableName="Threads", Key={"pk": {"S": "THREAD#t1"}, "sk": {"S": "META"}})["Item"]
    other = client.get_item(TableName="Threads", Key={"pk": {"S": "THREAD#t2"}, "sk": {"S": "META"}})["Item"]
    assert (own["replies"], other["replies"]) == ({"N": "0"}, {"N": "1"})
    assert [name for name in own if name.startswith("_cstream")] == ["_cstream:replies<prefix=REPLY#"]
    assert not [name for name in other if name.startswith("_cstream")]
    assert other["_cfeed"]["SS"] == ["replies<outside;prefix=REPLY#"]  # counted from outside its partition
    assert [item["pk"]["S"] for item in markers("Threads")] == [STREAM_MARKER + records[-1]["eventID"]]
    again = count(records, "Threads", [Reply])
    assert again.counted == () and Thread.get("THREAD#t2", "META", consistent_read=True).replies == 1


# -- signals and cost ---------------------------------------------------------------------------------------------
def test_signals_fire_once_for_each_record_counted() -> None:
    posts()
    Like(user_id="USER#u1", post_id="POST#p1").save()
    Like(user_id="USER#u1", post_id="POST#p1").delete()
    heard: List[Tuple[str, Tuple[str, ...], Any]] = []

    def hear(name: str) -> Any:
        return lambda sender, instance, changes, result, **_: heard.append(
            (name, tuple(sorted(change.attribute for change in changes)), type(result)))

    with signals.child_added.connected_to(hear("added"), sender=Like), \
            signals.child_removed.connected_to(hear("removed"), sender=Like):
        count(stream())
        count(stream())  # delivered again: nothing counted, nothing sent
    counters = ("like_count", "likes", "stars")
    assert heard == [("added", counters, StreamResult), ("removed", counters, StreamResult)]
    exact()


def test_each_record_costs_its_markers_two_units_and_each_parent_item_one_transactional_update() -> None:
    posts("POST#p1")
    for n in range(10):
        Like(user_id=f"USER#u{n}", post_id="POST#p1").save()
    result = count(stream())
    assert result.updates == 2  # the post and the day, once each
    assert result.write_units == 10 * 2 + 2 * 2
    assert sorted((change.attribute, change.delta) for change in result.changes) == \
        [("like_count", 10), ("likes", 10), ("stars", 10)]
    exact("POST#p1")
