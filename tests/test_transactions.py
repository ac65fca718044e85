"""The planner and CountedTransaction: request shapes, merged deltas, limits, mixed writes, deletes counted off
the stored child, and one commit."""
from __future__ import annotations

import re
from typing import Any, Dict, List

import pytest

from pynamodb_counters import CountedTransaction, signals, skip_counting
from pynamodb_counters.exceptions import DuplicateChildError, InvalidTransactionError, TransactionTooLargeError
from tests.support.factories import LIKED_AT, bookmarks, like, post, snapshot
from tests.support.models import Board, Bookmark, Card, Comment, Like, Post, User


def expand(request: dict, field: str) -> str:
    """An expression with its #name and :value placeholders written out, e.g. ``ADD like_tally -1``."""
    names = request.get("ExpressionAttributeNames", {})
    values = request.get("ExpressionAttributeValues", {})
    text = re.sub(r"#\w+", lambda m: names[m.group(0)], request[field])
    def value(match: re.Match[str]) -> str:
        written = next(iter(values[match.group(0)].values()))
        return written if isinstance(written, str) else "{" + ", ".join(sorted(written)) + "}"  # a set

    return re.sub(r":\w+", value, text)


def test_a_like_is_the_documented_transaction() -> None:
    transaction = CountedTransaction(token="t" * 36)
    transaction.save(like("7c20", liked_at=LIKED_AT))
    plan = transaction.plan()
    put, update = plan.items
    assert put["Put"]["TableName"] == "Social"
    assert put["Put"]["Item"] == {"pk": {"S": "POST#a91f"}, "sk": {"S": "LIKE#USER#7c20"},
                                  "liked_at": {"N": "1750636800"}, "_cwid": {"S": "t" * 36}}
    assert expand(put["Put"], "ConditionExpression") == "attribute_not_exists (pk)"
    assert put["Put"]["ReturnValuesOnConditionCheckFailure"] == "ALL_OLD"
    assert update["Update"]["Key"] == {"pk": {"S": "POST#a91f"}, "sk": {"S": "META"}}
    assert expand(update["Update"], "UpdateExpression") == \
        "ADD like_tally 1, _cseq 1, _cfeed {like_tally<prefix=LIKE#}"
    assert expand(update["Update"], "ConditionExpression") == "attribute_exists (pk)"
    assert [type(action).__name__ for action in plan.actions] == ["ChildPut", "ParentUpdate"]


def test_an_unlike_is_the_mirror_with_a_floor_of_zero() -> None:
    transaction = CountedTransaction()
    transaction.delete(like("7c20"))
    delete, update = transaction.plan().items
    assert expand(delete["Delete"], "ConditionExpression") == "attribute_exists (pk)"
    assert expand(update["Update"], "UpdateExpression") == \
        "ADD like_tally -1, _cseq 1, _cfeed {like_tally<prefix=LIKE#}"
    assert expand(update["Update"], "ConditionExpression") == \
        "(attribute_exists (pk) AND (like_tally >= 1 OR _cshards > 1))"  # the floor, but for a pending shard fold


def test_deltas_on_one_parent_merge_into_one_update() -> None:
    transaction = CountedTransaction()
    for user in "abc":
        transaction.save(like(user))
    transaction.delete(like("z"))
    transaction.save(Bookmark(pk="POST#a91f", sk="BOOKMARK#USER#U1", user_id="U1"))
    plan = transaction.plan()
    updates = [item["Update"] for item in plan.items if "Update" in item]
    assert len(updates) == 2  # the post (likes and bookmarks merged) and the user
    post_update = next(u for u in updates if u["TableName"] == "Social")
    assert expand(post_update, "UpdateExpression") == (
        "ADD like_tally 2, bookmarkCount 1, _cseq 1, "
        "_cfeed {bookmarkCount<prefix=BOOKMARK#, like_tally<prefix=LIKE#}")
    assert len(plan.items) == 5 + 2


def test_deltas_that_net_to_zero_still_guard_the_parent_and_move_its_sequence() -> None:
    transaction = CountedTransaction()
    transaction.save(like("a"))
    transaction.delete(like("b"))
    update = transaction.plan().items[-1]["Update"]
    assert expand(update, "UpdateExpression") == "ADD _cseq 1, _cfeed {like_tally<prefix=LIKE#}"
    assert expand(update, "ConditionExpression") == "attribute_exists (pk)"


def test_a_polymorphic_parent_is_guarded_by_its_discriminator() -> None:
    transaction = CountedTransaction()
    transaction.save(Card(pk="B1", sk="CARD#1"))
    update = transaction.plan().items[-1]["Update"]
    assert expand(update, "ConditionExpression") == "(attribute_exists (pk) AND kind IN (Board))"


def test_more_than_100_actions_is_refused_before_sending() -> None:
    transaction = CountedTransaction()
    for n in range(100):
        transaction.save(like(f"u{n}"))
    with pytest.raises(TransactionTooLargeError, match="101 actions"):
        transaction.plan()


def test_one_item_twice_is_refused() -> None:
    transaction = CountedTransaction()
    transaction.save(like("a"))
    transaction.delete(like("a"))
    with pytest.raises(InvalidTransactionError, match="appears twice"):
        transaction.plan()


def test_a_child_counted_on_itself_is_refused() -> None:
    transaction = CountedTransaction()
    transaction.save(Like(pk="POST#x", sk="META", liked_at=1))  # its parent key is its own key
    with pytest.raises(InvalidTransactionError, match="counted on itself"):
        transaction.plan()


@pytest.mark.usefixtures("dynamodb")
def test_counted_writes_join_other_writes_in_one_transaction() -> None:
    post()
    post("POST#b")
    like("old").save()
    with CountedTransaction() as transaction:
        transaction.save(like("a"))
        transaction.save(like("b"))
        transaction.delete(like("old"))
        transaction.save(like("c", pk="POST#b"))
        transaction.update(Post.get("POST#a91f", "META"), actions=[Post.title.set("busy")])
        transaction.save(User(user_id="U7"))
    assert transaction.result is not None and len(transaction.result.changes) == 4
    first = Post.get("POST#a91f", "META", consistent_read=True)
    assert first.like_tally == 2 and first.title == "busy"
    assert Post.get("POST#b", "META").like_tally == 1
    assert User.get("U7").bookmarks == 0


@pytest.mark.usefixtures("dynamodb")
def test_one_duplicate_sinks_the_whole_transaction() -> None:
    post()
    like("a").save()
    before = snapshot()
    transaction = CountedTransaction()
    transaction.save(like("b"))
    transaction.save(like("a"))
    with pytest.raises(DuplicateChildError) as caught:
        transaction.commit()
    assert caught.value.key == ("POST#a91f", "LIKE#USER#a")
    assert snapshot() == before


@pytest.mark.usefixtures("dynamodb")
def test_a_parent_and_its_child_can_be_created_together_only_in_order() -> None:
    transaction = CountedTransaction()
    transaction.save(Post(pk="POST#n", sk="META"))
    transaction.save(like("a", pk="POST#n"))
    with pytest.raises(InvalidTransactionError, match="both written and counted"):
        transaction.plan()


@pytest.mark.usefixtures("dynamodb")
def test_skip_counting_applies_inside_a_transaction() -> None:
    post()
    with skip_counting(Like), CountedTransaction() as transaction:
        transaction.save(like("a"))
        transaction.save(Comment(pk="POST#a91f", sk="COMMENT#1", text="hi"))
    assert Post.get("POST#a91f", "META").like_tally == 0
    assert Post.get("POST#a91f", "META").comment_count == 1
    assert Board  # imported for the discriminator test above


def test_a_counted_transaction_delete_counts_off_the_stored_parent(bookmarked: None) -> None:
    b = Bookmark.get("POST#a91f", "BOOKMARK#USER#7c20")
    b.user_id = "U2"
    with CountedTransaction() as transaction:
        transaction.delete(b)
        transaction.save(Like(pk="POST#a91f", sk="LIKE#USER#1", liked_at=1))
    assert (bookmarks("U1"), bookmarks("U2")) == (0, 1)
    assert Post.get("POST#a91f", "META").like_tally == 1
    assert transaction.result is not None and not transaction.result.uncertain


# -- a transaction commits once -------------------------------------------------------------------------------------
def test_commit_inside_the_block_is_not_sent_again_on_exit(dynamodb: None) -> None:
    post()
    added: List[Dict[str, Any]] = []

    def receiver(sender: Any, **kwargs: Any) -> None:
        added.append(kwargs)

    with signals.child_added.connected_to(receiver):
        with CountedTransaction() as transaction:
            transaction.save(Like(pk="POST#a91f", sk="LIKE#USER#1", liked_at=1))
            transaction.commit()
    assert len(added) == 1
    assert Post.get("POST#a91f", "META").like_tally == 1


def test_a_committed_delete_is_not_reported_missing_on_exit(dynamodb: None) -> None:
    post()
    Like(pk="POST#a91f", sk="LIKE#USER#1", liked_at=1).save()
    with CountedTransaction() as transaction:
        transaction.delete(Like.get("POST#a91f", "LIKE#USER#1"))
        transaction.commit()
    assert Post.get("POST#a91f", "META").like_tally == 0


def test_a_second_commit_is_a_clear_error_and_sends_nothing(dynamodb: None) -> None:
    post()
    transaction = CountedTransaction()
    transaction.save(Like(pk="POST#a91f", sk="LIKE#USER#1", liked_at=1))
    transaction.commit()
    before = snapshot()
    with pytest.raises(InvalidTransactionError, match="already committed"):
        transaction.commit()
    with pytest.raises(InvalidTransactionError, match="already committed"):
        transaction.save(Like(pk="POST#a91f", sk="LIKE#USER#2", liked_at=1))
    assert snapshot() == before
