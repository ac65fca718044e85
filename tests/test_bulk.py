"""Bulk counted writes: chunks of at most 100 actions, deltas merged per parent, refusals reported per child."""
from __future__ import annotations

from typing import Any, List

import pytest

from pynamodb_counters import bulk_delete, bulk_save, bulk_write, signals, skip_counting
from pynamodb_counters._chunks import plan_chunks
from pynamodb_counters._shards import choose_shard
from pynamodb_counters.exceptions import (
    CountingBypassError,
    DuplicateChildError,
    InvalidTransactionError,
    MissingChildError,
    ParentKeyError,
    ParentNotFoundError,
)
from tests.factories import like, likes, post, snapshot, tally
from tests.models import Bookmark, Comment, Post, User, Video, View


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
