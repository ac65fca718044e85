"""Bulk counted writes: chunks of at most 100 actions (sized with every action, shard items included), deltas
merged per parent, refusals reported per child as a single write's, and always a report of what committed."""
from __future__ import annotations

from typing import Any, Dict, Iterator, List

import pytest
from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

from pynamodb_counters import (
    CounterField,
    CounterMixin,
    RetryPolicy,
    bulk_delete,
    bulk_save,
    bulk_write,
    counted_by,
    signals,
    skip_counting,
)
from pynamodb_counters.declare._shards import choose_shard
from pynamodb_counters.declare._stored_names import SHARD
from pynamodb_counters.exceptions import (
    BulkWriteError,
    CountingBypassError,
    DuplicateChildError,
    InvalidTransactionError,
    MissingChildError,
    ParentKeyError,
    ParentNotFoundError,
    TransactionError,
    TransactionTooLargeError,
)
from pynamodb_counters.write._chunks import plan_chunks
from tests.support.client_hooks import hooked, transact_requests
from tests.support.factories import bookmarks, like, likes, post, snapshot, stored, tally
from tests.support.faults import LOSE_RESPONSE, RESET_BEFORE, SERVER_ERROR, THROTTLE, FaultProxy, answer
from tests.support.models import REGION, Bookmark, Comment, Like, Post, User, Video, View


def test_ten_thousand_likes_across_a_hundred_posts_take_about_a_hundred_transactions() -> None:
    likes = [("save", like(n, pk=f"POST#{n % 100:03d}")) for n in range(10_000)]
    chunks = plan_chunks(likes, 100)
    assert all(len(chunk) + len({c[2].pk for c in chunk}) <= 100 for chunk in chunks)
    assert len(chunks) <= 102  # 99 likes and 1 parent Update per transaction, give or take the boundaries
    updates = sum(len({c[2].pk for c in chunk}) for chunk in chunks)
    wcu_per_like = (2 * len(likes) + 2 * updates) / len(likes)  # transactional writes of items under 1 KB
    assert wcu_per_like < 2.05  # against 4 for one transaction per like


@pytest.mark.usefixtures("dynamodb")
def test_bulk_save_counts_every_child() -> None:
    for pk in ("POST#a", "POST#b", "POST#c"):
        post(pk)
    batch = [like(n, pk=("POST#a", "POST#b", "POST#c")[n % 3]) for n in range(250)]
    result = bulk_save(batch)
    assert [o.status for o in result.outcomes] == ["added"] * 250
    assert [o.instance for o in result.outcomes] == batch  # in input order
    assert len(result.results) == 3 and result.requests == 3
    for pk in ("POST#a", "POST#b", "POST#c"):
        assert tally(pk) == likes(pk) > 80


@pytest.mark.usefixtures("dynamodb")
def test_refusals_inside_a_chunk_do_not_sink_the_others() -> None:
    post("POST#a")
    like(1, "POST#a").save()
    like(2, "POST#a").save()
    batch = [like(n, "POST#a") for n in range(6)] + [like(n, "POST#gone") for n in range(3)]
    rejected: List[Any] = []
    with signals.duplicate_rejected.connected_to(lambda sender, **kw: rejected.append(kw["instance"])):
        result = bulk_save(batch)
    statuses = {(o.instance.pk, o.instance.sk): (o.status, type(o.error).__name__) for o in result.outcomes}
    assert statuses == {
        **{("POST#a", f"LIKE#USER#{n}"): ("added", "NoneType") for n in (0, 3, 4, 5)},
        **{("POST#a", f"LIKE#USER#{n}"): ("rejected", "DuplicateChildError") for n in (1, 2)},
        **{("POST#gone", f"LIKE#USER#{n}"): ("rejected", "ParentNotFoundError") for n in range(3)},
    }
    assert {(r.pk, r.sk) for r in rejected} == {("POST#a", "LIKE#USER#1"), ("POST#a", "LIKE#USER#2")}
    assert tally("POST#a") == likes("POST#a") == 6
    assert likes("POST#gone") == 0
    assert result.requests == 2  # one refused transaction naming every refusal, then the rest


@pytest.mark.usefixtures("dynamodb")
def test_bulk_delete_and_mixed_writes() -> None:
    post("POST#a")
    bulk_save([like(n, "POST#a") for n in range(5)])
    result = bulk_write(saves=[like(9, "POST#a")], deletes=[like(0, "POST#a"), like(1, "POST#a"), like(7, "POST#a")])
    assert sorted((o.instance.sk, o.status) for o in result.outcomes) == [
        ("LIKE#USER#0", "removed"), ("LIKE#USER#1", "removed"), ("LIKE#USER#7", "rejected"),
        ("LIKE#USER#9", "added")]
    assert isinstance(result.rejected[0].error, MissingChildError)
    assert tally("POST#a") == likes("POST#a") == 4
    result = bulk_delete([like(n, "POST#a") for n in (2, 3, 4, 9)])
    assert [o.status for o in result.outcomes] == ["removed"] * 4 and tally("POST#a") == 0


@pytest.mark.usefixtures("dynamodb")
def test_children_counted_twice_and_small_chunks() -> None:
    post("POST#a")
    User(user_id="U1").save()
    marks = [Bookmark(pk="POST#a", sk=f"BOOKMARK#USER#{n}", user_id="U1") for n in range(7)]
    result = bulk_save(marks, max_actions=4)  # 2 children + 2 parents per transaction
    assert len(result.results) == 4 and not result.rejected
    assert Post.get("POST#a", "META").bookmark_count == 7 and User.get("U1").bookmarks == 7


@pytest.mark.usefixtures("dynamodb")
def test_bad_input_is_refused_before_anything_is_written() -> None:
    post("POST#a")
    before = snapshot()
    with pytest.raises(InvalidTransactionError, match="twice"):
        bulk_save([like(1, "POST#a"), like(2, "POST#a"), like(1, "POST#a")])
    with pytest.raises(CountingBypassError, match="set by hand"):
        bulk_save([like(3, "POST#a"), Comment(pk="POST#a", sk="COMMENT#1", text="x", reply_count=5)])
    with pytest.raises(CountingBypassError, match="no counted_by relation"):
        bulk_save([like(3, "POST#a"), User(user_id="U9")])
    with pytest.raises(ParentKeyError):
        bulk_save([like(3, "POST#a"), Bookmark(pk="POST#a", sk="BOOKMARK#USER#x")])  # no user_id
    with pytest.raises(ValueError):
        bulk_save([like(3, "POST#a")], max_actions=101)
    assert snapshot() == before


@pytest.mark.usefixtures("dynamodb")
def test_a_drifted_parent_rejects_only_its_own_likes() -> None:
    post("POST#a")
    post("POST#b")
    with skip_counting():
        like(1, "POST#a").save()  # drift: POST#a's counter is 0 with one like
    like(1, "POST#b").save()
    result = bulk_delete([like(1, "POST#a"), like(1, "POST#b")])
    outcome = {o.instance.pk: o for o in result.outcomes}
    assert outcome["POST#b"].status == "removed"
    assert outcome["POST#a"].status == "rejected" and type(outcome["POST#a"].error).__name__ == \
        "CounterUnderflowError"
    assert likes("POST#a") == 1 and tally("POST#b") == likes("POST#b") == 0
    assert DuplicateChildError and ParentNotFoundError  # imported for the type names above


@pytest.mark.usefixtures("dynamodb")
def test_a_missing_child_does_not_get_its_siblings_rejected_for_underflow() -> None:
    post("POST#a")
    like(0, "POST#a").save()  # an exact counter of 1
    result = bulk_delete([like(0, "POST#a"), like(1, "POST#a")])  # the second never existed
    assert [(o.instance.sk, o.status, type(o.error).__name__) for o in result.outcomes] == [
        ("LIKE#USER#0", "removed", "NoneType"), ("LIKE#USER#1", "rejected", "MissingChildError")]
    assert tally("POST#a") == likes("POST#a") == 0


@pytest.mark.usefixtures("dynamodb")
def test_a_missing_shard_is_recreated_and_every_child_counted() -> None:
    """Bulk writes go through the same commit pipeline as save(): a shard item lost (or never created) is
    created again, and the chunk is sent again once."""
    Video(pk="VIDEO#v1", sk="META").save()
    Video._get_connection().delete_item("VIDEO#v1#SHARD5", range_key="META")  # one shard item lost
    views = [View(pk="VIDEO#v1", sk=f"VIEW#USER#{n}") for n in range(64)]
    on_lost = {view.sk for view in views if choose_shard(view, Video.view_count.shards) == 5}
    assert on_lost and len(on_lost) < len(views)
    result = bulk_save(views)
    assert result.rejected == [] and result.failed == []
    assert {view.sk for view in result.added} == {view.sk for view in views}
    stored_views = View.count("VIDEO#v1", View.sk.startswith("VIEW#"), consistent_read=True)
    assert Video.view_count.total(("VIDEO#v1", "META")) == stored_views == len(views)
    assert Video._get_connection().get_item("VIDEO#v1#SHARD5", range_key="META", consistent_read=True)["Item"]


@pytest.mark.usefixtures("dynamodb")
def test_a_child_that_cannot_be_written_fails_alone_and_the_rest_of_its_chunk_commits() -> None:
    from pynamodb_counters.exceptions import TransactionError

    post()
    batch = [like(f"{n:03d}") for n in range(120)]
    big = Comment(pk="POST#a91f", sk="COMMENT#big", text="x" * 410_000)  # over DynamoDB's 400 KB
    result = bulk_save(batch[:60] + [big] + batch[60:])
    statuses = [(o.status, type(o.error).__name__) for o in result.outcomes]
    assert statuses.count(("added", "NoneType")) == 120
    assert [(o.instance, o.status) for o in result.outcomes if o.status != "added"] == [(big, "failed")]
    assert isinstance(result.outcomes[60].error, TransactionError) and "too large" in str(result.outcomes[60].error)
    assert tally() == likes() == 120


# -- bulk deletes count off the stored children's parents -----------------------------------------------------------
def test_bulk_delete_counts_off_the_stored_parents(bookmarked: None) -> None:
    from pynamodb_counters import bulk_delete

    edited = Bookmark.get("POST#a91f", "BOOKMARK#USER#7c20")
    edited.user_id = "U2"  # edited in memory: the stored bookmark is U1's
    key_only = Bookmark(pk="POST#a91f", sk="BOOKMARK#USER#other")  # U2's, built from its key alone
    absent = Bookmark(pk="POST#a91f", sk="BOOKMARK#USER#nobody")
    result = bulk_delete([edited, key_only, absent])
    assert [o.status for o in result.outcomes] == ["removed", "removed", "rejected"]
    assert isinstance(result.outcomes[2].error, MissingChildError)
    assert (bookmarks("U1"), bookmarks("U2")) == (0, 0)
    assert Post.get("POST#a91f", "META").bookmark_count == 0
    assert [b.sk for b in Bookmark.scan(Bookmark.sk.startswith("BOOKMARK#"))] == []


def test_bulk_delete_of_a_child_whose_parent_cannot_be_named_writes_nothing(bookmarked: None) -> None:
    from pynamodb_counters import bulk_delete

    Bookmark._get_connection().put_item("POST#a91f", "BOOKMARK#USER#ghost")  # written by hand, without a user
    before = snapshot()
    with pytest.raises(ParentKeyError):
        bulk_delete([Bookmark(pk="POST#a91f", sk="BOOKMARK#USER#7c20"),
                     Bookmark(pk="POST#a91f", sk="BOOKMARK#USER#ghost")])
    assert snapshot() == before


# -- chunks sized with every action; a bulk call always reports what committed --------------------------------------
class Album(CounterMixin, Model):
    """A parent in a table whose name sorts after ``Social``, so that its children's chunks come after likes."""

    class Meta:
        table_name = "Tracks"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)  # "ALBUM#a"
    sk = UnicodeAttribute(range_key=True)  # "META"
    track_count = CounterField()


class Track(CounterMixin, Model):
    """Both a counted child (of its album) and a sharded parent (its plays, over 4 items)."""

    class Meta:
        table_name = "Tracks"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)  # "ALBUM#a"
    sk = UnicodeAttribute(range_key=True)  # "TRACK#7"
    play_count = CounterField(shards=4)
    album = counted_by(Album.track_count, key=lambda track: (track.pk, "META"), prefix="TRACK#")


@pytest.fixture
def tracks(dynamodb: None) -> Iterator[None]:
    Album.create_table(billing_mode="PAY_PER_REQUEST")
    Album(pk="ALBUM#a", sk="META").save()
    yield


def test_chunks_count_the_shard_items_of_children_that_are_sharded_parents() -> None:
    children = [("save", Track(pk="ALBUM#a", sk=f"TRACK#{n}")) for n in range(150)]
    children += [("save", like(n)) for n in range(98)]
    for chunk in plan_chunks(children, 100):
        own = sum(4 if isinstance(child, Track) else 1 for _, _, child in chunk)
        parents = {(type(child).__name__, child.pk) for _, _, child in chunk}
        assert own + len(parents) <= 100, (own, parents)


def test_an_edit_of_a_child_that_is_a_sharded_parent_is_sized_as_the_one_update_it_is(tracks: None) -> None:
    """A stored track saved again is an edit: one Update, its shard items untouched. Sized as a new track (4
    actions) it was refused at max_actions=2, which its plan (the edit and its album's Update) fits."""
    Album(pk="ALBUM#a", sk="META").save()
    Track(pk="ALBUM#a", sk="TRACK#1").save()
    stored = Track.get("ALBUM#a", "TRACK#1", consistent_read=True)
    result = bulk_save([stored], max_actions=2)
    assert [o.status for o in result.outcomes] == ["changed"]
    assert Album.get("ALBUM#a", "META", consistent_read=True).track_count == 1


def test_bulk_sizes_chunks_with_shard_items_and_commits_everything(tracks: None) -> None:
    post()
    batch: List[Model] = [like(n) for n in range(98)] + [Track(pk="ALBUM#a", sk=f"TRACK#{n}") for n in range(60)]
    with transact_requests(Like, Track) as sent:
        result = bulk_save(batch)
    assert [o.status for o in result.outcomes] == ["added"] * len(batch)
    assert (tally(), likes()) == (98, 98)
    assert Album.get("ALBUM#a", "META", consistent_read=True).track_count == 60
    assert Track.count("ALBUM#a", Track.sk.startswith("TRACK#"), consistent_read=True) == 60
    shard_items = [item for item in stored("Tracks") if SHARD.attr_name in item]
    assert len(shard_items) == 60 * 3  # every track's own shard items 1..3, written with its Put
    assert result.requests == len(sent) == len(result.results)


def test_a_child_too_large_for_any_chunk_is_refused_before_anything_is_sent(tracks: None) -> None:
    post()
    before = snapshot()
    with pytest.raises(TransactionTooLargeError, match="Nothing was sent"):
        bulk_save([like(1), like(2), like(3), Track(pk="ALBUM#a", sk="TRACK#1")], max_actions=4)  # 4 + 1 > 4
    assert snapshot() == before
    assert stored("Tracks") == [item for item in stored("Tracks") if item["sk"]["S"] == "META"]


def test_an_unexpected_error_in_a_later_chunk_carries_what_committed(tracks: None) -> None:
    post()
    batch: List[Model] = [like(n) for n in range(98)] + [Track(pk="ALBUM#a", sk=f"TRACK#{n}") for n in range(60)]
    calls: List[int] = []

    def explode_on_second_request(**_: Any) -> None:
        calls.append(1)
        if len(calls) == 2:
            raise ValueError("a before-call hook broke")

    with hooked("before-call.dynamodb.TransactWriteItems", explode_on_second_request, Like, Track), \
            pytest.raises(BulkWriteError, match="a before-call hook broke") as raised:
        bulk_save(batch)
    result = raised.value.result
    assert isinstance(raised.value.__cause__, ValueError)
    statuses: Dict[str, int] = {}
    for outcome in result.outcomes:
        statuses[outcome.status] = statuses.get(outcome.status, 0) + 1
    assert result.added == batch[:98] and statuses["added"] == 98
    failed = [o for o in result.outcomes if o.status == "failed"]
    assert failed and all(o.error is raised.value for o in failed)
    assert statuses["failed"] + statuses["unsent"] == 60
    assert (tally(), likes()) == (98, 98)  # what the result says committed, did
    assert Album.get("ALBUM#a", "META", consistent_read=True).track_count == \
        Track.count("ALBUM#a", Track.sk.startswith("TRACK#"), consistent_read=True) == 0
    assert result.requests == 1  # the second request never left: the hook raised before it was built


def test_a_transaction_error_in_a_later_chunk_is_reported_per_child(dynamodb: None) -> None:
    post()
    batch: List[Model] = [like(n) for n in range(98)] + [Track(pk="ALBUM#a", sk=f"TRACK#{n}") for n in range(3)]
    result = bulk_save(batch)  # the Tracks table does not exist
    assert result.added == batch[:98] and (tally(), likes()) == (98, 98)
    assert [o.instance for o in result.failed] == batch[98:]
    assert all(isinstance(o.error, TransactionError) for o in result.failed)


# -- BulkResult.requests, and bulk refusals ranked as a single write's ----------------------------------------------
@pytest.mark.served
def test_bulk_requests_match_the_requests_on_the_wire(proxy: FaultProxy) -> None:
    post("POST#a")
    post("POST#b")
    policy = RetryPolicy(max_attempts=6, base_delay=0.0, max_delay=0.0)
    proxy.inject(THROTTLE, times=2)  # the first chunk: throttled twice, then refused for good, as a whole and
    # in halves until each child fails alone: [0, 1, 2], then [0], then [1, 2], then [1] and [2]
    proxy.inject(answer(400, "ValidationException", "refused on purpose"), times=5)
    proxy.inject(SERVER_ERROR)  # the second chunk: a 5xx, a reset, a lost response (recovered), then done
    proxy.inject(RESET_BEFORE)
    proxy.inject(LOSE_RESPONSE)
    batch = [like(n, "POST#a") for n in range(3)] + [like(n, "POST#b") for n in range(3)]
    with transact_requests(Like) as sent:
        result = bulk_save(batch, retry=policy, max_actions=4)  # 3 likes and their post per transaction
    assert [o.status for o in result.outcomes] == ["failed"] * 3 + ["added"] * 3
    assert isinstance(result.failed[0].error, TransactionError)
    assert result.requests == len(sent) == 11  # 7 for the first chunk, 4 for the second
    assert tally("POST#b") == likes("POST#b") == 3 and likes("POST#a") == 0


@pytest.mark.usefixtures("dynamodb")
def test_a_missing_child_of_a_missing_post_is_parent_not_found_in_bulk_as_alone() -> None:
    with pytest.raises(ParentNotFoundError):
        like(1, "POST#gone").delete()
    post("POST#here")
    like(1, "POST#here").save()
    result = bulk_delete([like(2, "POST#gone"), like(3, "POST#gone"), like(1, "POST#here"), like(4, "POST#here")])
    outcomes = {o.instance.sk + o.instance.pk: o for o in result.outcomes}
    for sk in ("LIKE#USER#2", "LIKE#USER#3"):
        assert type(outcomes[sk + "POST#gone"].error) is ParentNotFoundError
    assert outcomes["LIKE#USER#1POST#here"].status == "removed"
    assert type(outcomes["LIKE#USER#4POST#here"].error) is MissingChildError
    assert tally("POST#here") == likes("POST#here") == 0


# -- kinds and statuses: enums that still equal their text ----------------------------------------------------------
@pytest.mark.usefixtures("dynamodb")
def test_outcomes_carry_enums_that_equal_their_text() -> None:
    from pynamodb_counters.bulk import BulkOperation, ChildStatus

    post("POST#a")
    like(1, "POST#a").save()
    result = bulk_write(saves=[like(1, "POST#a"), like(2, "POST#a")], deletes=[like(3, "POST#a")])
    first, second, third = result.outcomes
    assert (first.operation, first.status) == (BulkOperation.SAVE, ChildStatus.REJECTED)
    assert (second.operation, second.status) == (BulkOperation.SAVE, ChildStatus.ADDED)
    assert (third.operation, third.status) == (BulkOperation.DELETE, ChildStatus.REJECTED)
    assert (second.operation, second.status) == ("save", "added") and third.operation == "delete"  # as text
    assert second.status in ("added", "changed") and {second.status: 1}["added"] == 1  # hashed as its text
    assert (str(second.status), f"{third.operation}", f"{second.status:>6}") == ("added", "delete", " added")
    assert [status.value for status in ChildStatus] == ["added", "changed", "removed", "rejected", "failed", "unsent"]
    assert [operation.value for operation in BulkOperation] == ["save", "delete"]
