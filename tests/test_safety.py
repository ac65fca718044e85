"""Data safety: the cases of a hostile but realistic user (issue 10), each named after its case.

Every test shows the damage it guards against would be visible: counts read back from the table, items present or
gone, and nothing written when the library refuses.
"""
from __future__ import annotations

from typing import Any, Dict, List

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.connection import Connection
from pynamodb.models import Model
from pynamodb.transactions import TransactWrite

from pynamodb_counters import CountedTransaction, CounterMixin, signals, skip_counting
from pynamodb_counters.exceptions import (
    CountingBypassError,
    InvalidTransactionError,
    MissingChildError,
    ParentKeyError,
)
from tests.factories import post, snapshot
from tests.models import REGION, Bookmark, Doc, Edit, Like, Post, Video, View

pytestmark = pytest.mark.usefixtures("dynamodb")


def _user(user_id: str) -> Any:
    from tests.models import User

    User(user_id=user_id).save()
    return User


def _bookmarks(user_id: str) -> int:
    from tests.models import User

    return User.get(user_id, consistent_read=True).bookmarks


def _bookmark(user_id: str = "U1") -> Bookmark:
    return Bookmark(pk="POST#a91f", sk="BOOKMARK#USER#7c20", user_id=user_id)


# -- case 2: a counted delete counts off the stored item's parent ----------------------------------------------
@pytest.fixture
def bookmarked() -> None:
    post()
    _user("U1")
    _user("U2")
    _bookmark("U1").save()
    Bookmark(pk="POST#a91f", sk="BOOKMARK#USER#other", user_id="U2").save()  # U2 holds one bookmark of its own


def test_case2_delete_of_an_edited_instance_counts_off_the_stored_parent(bookmarked: None) -> None:
    b = Bookmark.get("POST#a91f", "BOOKMARK#USER#7c20")
    b.user_id = "U2"  # edited in memory, never saved
    result = b.delete()
    assert (_bookmarks("U1"), _bookmarks("U2")) == (0, 1)
    assert Post.get("POST#a91f", "META").bookmark_count == 1
    assert sorted((c.key, c.delta) for c in result.changes if c.attribute == "bookmarks") == [(("U1",), -1)]
    with pytest.raises(Bookmark.DoesNotExist):
        Bookmark.get("POST#a91f", "BOOKMARK#USER#7c20")


def test_case2_delete_of_a_key_only_instance_counts_off_the_stored_parent(bookmarked: None) -> None:
    Bookmark(pk="POST#a91f", sk="BOOKMARK#USER#7c20").delete()
    assert (_bookmarks("U1"), _bookmarks("U2")) == (0, 1)
    assert Post.get("POST#a91f", "META").bookmark_count == 1


def test_case2_key_only_delete_of_an_absent_child_is_missing_and_writes_nothing(bookmarked: None) -> None:
    before = snapshot()
    with pytest.raises(MissingChildError):
        Bookmark(pk="POST#a91f", sk="BOOKMARK#USER#nobody").delete()
    assert Bookmark(pk="POST#a91f", sk="BOOKMARK#USER#nobody").delete(ignore_missing=True).missing
    assert snapshot() == before


def test_case2_a_key_only_stored_child_whose_parent_cannot_be_named_is_a_clear_error(bookmarked: None) -> None:
    Bookmark._get_connection().put_item("POST#a91f", "BOOKMARK#USER#ghost")  # written by hand, without a user
    before = snapshot()
    with pytest.raises(ParentKeyError):
        Bookmark(pk="POST#a91f", sk="BOOKMARK#USER#ghost").delete()
    assert snapshot() == before


def test_case2_counted_transaction_delete_counts_off_the_stored_parent(bookmarked: None) -> None:
    b = Bookmark.get("POST#a91f", "BOOKMARK#USER#7c20")
    b.user_id = "U2"
    with CountedTransaction() as transaction:
        transaction.delete(b)
        transaction.save(Like(pk="POST#a91f", sk="LIKE#USER#1", liked_at=1))
    assert (_bookmarks("U1"), _bookmarks("U2")) == (0, 1)
    assert Post.get("POST#a91f", "META").like_tally == 1
    assert transaction.result is not None and not transaction.result.uncertain


def test_case2_a_stale_delete_keeps_the_version_check(dynamodb: None) -> None:
    Doc(doc_id="D1").save()
    Edit(doc_id="D1", seq=1).save()
    stale = Edit.get("D1", 1)
    with skip_counting(Edit):
        fresh = Edit.get("D1", 1)
        fresh.save()  # the version moves on
    from pynamodb_counters.exceptions import ConditionFailedError

    with pytest.raises(ConditionFailedError):
        stale.delete()
    assert Doc.get("D1").edit_count == 1
    assert Edit.get("D1", 1)


# -- case 4: PynamoDB's TransactWrite cannot bypass counting ----------------------------------------------------
def _connection() -> Connection:
    return Connection(region=REGION)


def test_case4_transact_write_save_of_a_counted_child_is_refused(dynamodb: None) -> None:
    post()
    before = snapshot()
    with pytest.raises(CountingBypassError, match="CountedTransaction"):
        with TransactWrite(connection=_connection()) as tw:
            tw.save(Like(pk="POST#a91f", sk="LIKE#USER#1", liked_at=1))
            tw.update(Post.get("POST#a91f", "META"), actions=[Post.like_tally.add(5)])
    assert snapshot() == before


def test_case4_transact_write_update_of_a_counter_is_refused(dynamodb: None) -> None:
    post()
    before = snapshot()
    with pytest.raises(CountingBypassError, match="CountedTransaction"):
        with TransactWrite(connection=_connection()) as tw:
            tw.update(Post.get("POST#a91f", "META"), actions=[Post.like_tally.add(5)])
    assert snapshot() == before


def test_case4_transact_write_save_of_a_parent_is_refused(dynamodb: None) -> None:
    post()
    Like(pk="POST#a91f", sk="LIKE#USER#1", liked_at=1).save()
    before = snapshot()
    with pytest.raises(CountingBypassError, match="CountedTransaction"):
        with TransactWrite(connection=_connection()) as tw:
            tw.save(Post(pk="POST#a91f", sk="META", title="reset?"))
    assert snapshot() == before
    assert Post.get("POST#a91f", "META").like_tally == 1


def test_case4_transact_write_delete_of_a_counted_child_is_refused(dynamodb: None) -> None:
    post()
    Like(pk="POST#a91f", sk="LIKE#USER#1", liked_at=1).save()
    before = snapshot()
    with pytest.raises(CountingBypassError, match="CountedTransaction"):
        with TransactWrite(connection=_connection()) as tw:
            tw.delete(Like.get("POST#a91f", "LIKE#USER#1"))
    assert snapshot() == before


def test_case4_transact_write_delete_of_a_sharded_parent_is_refused(dynamodb: None) -> None:
    Video(pk="VIDEO#v1", sk="META").save()
    View(pk="VIDEO#v1", sk="VIEW#USER#1").save()
    before = snapshot()
    with pytest.raises(CountingBypassError, match="CountedTransaction"):
        with TransactWrite(connection=_connection()) as tw:
            tw.delete(Video.get("VIDEO#v1", "META"))
    assert snapshot() == before


def test_case4_transact_write_keeps_uncounted_writes_and_the_parents_other_attributes(dynamodb: None) -> None:
    post()
    Like(pk="POST#a91f", sk="LIKE#USER#1", liked_at=1).save()
    with TransactWrite(connection=_connection()) as tw:
        tw.update(Post.get("POST#a91f", "META"), actions=[Post.title.set("edited")])
        tw.update(Like.get("POST#a91f", "LIKE#USER#1"), actions=[Like.liked_at.set(2)])
    stored_post = Post.get("POST#a91f", "META")
    assert (stored_post.title, stored_post.like_tally) == ("edited", 1)
    assert Like.get("POST#a91f", "LIKE#USER#1").liked_at == 2


def test_case4_transact_write_inside_skip_counting_is_plain_pynamodb(dynamodb: None) -> None:
    post()
    with skip_counting(Like):
        with TransactWrite(connection=_connection()) as tw:
            tw.save(Like(pk="POST#a91f", sk="LIKE#USER#1", liked_at=1))
    assert Like.get("POST#a91f", "LIKE#USER#1").liked_at == 1
    assert Post.get("POST#a91f", "META").like_tally == 0


# -- case 8: a transaction commits once ---------------------------------------------------------------------------
def test_case8_commit_inside_the_block_is_not_sent_again_on_exit(dynamodb: None) -> None:
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


def test_case8_a_committed_delete_is_not_reported_missing_on_exit(dynamodb: None) -> None:
    post()
    Like(pk="POST#a91f", sk="LIKE#USER#1", liked_at=1).save()
    with CountedTransaction() as transaction:
        transaction.delete(Like.get("POST#a91f", "LIKE#USER#1"))
        transaction.commit()
    assert Post.get("POST#a91f", "META").like_tally == 0


def test_case8_a_second_commit_is_a_clear_error_and_sends_nothing(dynamodb: None) -> None:
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


# -- case 12: on a model without counters, the mixin is invisible -------------------------------------------------
class Plain(CounterMixin, Model):
    class Meta:
        table_name = "Plain"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)
    n = NumberAttribute(null=True)


class Bare(Model):
    class Meta:
        table_name = "Plain"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)
    n = NumberAttribute(null=True)


@pytest.fixture
def plain_table(dynamodb: None) -> None:
    Plain.create_table(billing_mode="PAY_PER_REQUEST")


def _error_of(call: Any) -> str:
    with pytest.raises(TypeError) as raised:
        call()
    return str(raised.value)


@pytest.mark.parametrize("keyword", ["token", "retry", "ignore_duplicate"])
def test_case12_save_rejects_counting_options_on_a_plain_model(plain_table: None, keyword: str) -> None:
    message = _error_of(lambda: Plain(pk="a").save(**{keyword: "x"}))
    assert keyword in message
    with pytest.raises(Plain.DoesNotExist):
        Plain.get("a")


@pytest.mark.parametrize("keyword", ["token", "retry", "ignore_missing"])
def test_case12_delete_rejects_counting_options_on_a_plain_model(plain_table: None, keyword: str) -> None:
    Plain(pk="a").save()
    assert keyword in _error_of(lambda: Plain(pk="a").delete(**{keyword: "x"}))
    assert Plain.get("a")


def test_case12_update_with_a_non_list_raises_pynamodbs_own_type_error(plain_table: None) -> None:
    Plain(pk="a").save()
    Bare(pk="b").save()
    expected = _error_of(lambda: Bare.get("b").update(actions={"not": "a list"}))  # type: ignore[arg-type]
    assert _error_of(lambda: Plain.get("a").update(actions={"not": "a list"})) == expected  # type: ignore
    assert _error_of(lambda: Plain.get("a").update(actions=[])) == expected


def test_case2_bulk_delete_counts_off_the_stored_parents(bookmarked: None) -> None:
    from pynamodb_counters import bulk_delete

    edited = Bookmark.get("POST#a91f", "BOOKMARK#USER#7c20")
    edited.user_id = "U2"  # edited in memory: the stored bookmark is U1's
    key_only = Bookmark(pk="POST#a91f", sk="BOOKMARK#USER#other")  # U2's, built from its key alone
    absent = Bookmark(pk="POST#a91f", sk="BOOKMARK#USER#nobody")
    result = bulk_delete([edited, key_only, absent])
    assert [o.status for o in result.outcomes] == ["removed", "removed", "rejected"]
    assert isinstance(result.outcomes[2].error, MissingChildError)
    assert (_bookmarks("U1"), _bookmarks("U2")) == (0, 0)
    assert Post.get("POST#a91f", "META").bookmark_count == 0
    assert [b.sk for b in Bookmark.scan(Bookmark.sk.startswith("BOOKMARK#"))] == []


def test_case2_bulk_delete_of_a_child_whose_parent_cannot_be_named_writes_nothing(bookmarked: None) -> None:
    from pynamodb_counters import bulk_delete

    Bookmark._get_connection().put_item("POST#a91f", "BOOKMARK#USER#ghost")  # written by hand, without a user
    before = snapshot()
    with pytest.raises(ParentKeyError):
        bulk_delete([Bookmark(pk="POST#a91f", sk="BOOKMARK#USER#7c20"),
                     Bookmark(pk="POST#a91f", sk="BOOKMARK#USER#ghost")])
    assert snapshot() == before


def test_case7_reshard_of_a_non_integer_shard_is_a_clear_error_and_writes_nothing(dynamodb: None) -> None:
    from pynamodb_counters import reshard
    from pynamodb_counters._shards import shard_key
    from pynamodb_counters.exceptions import CorruptCounterError
    from tests.factories import raw_client

    Video(pk="VIDEO#v1", sk="META").save()
    hash_key, range_key = shard_key(("VIDEO#v1", "META"), 15)
    raw_client(None).update_item(TableName="Videos", Key={"pk": {"S": hash_key}, "sk": {"S": range_key}},
                                 UpdateExpression="ADD view_count :half",
                                 ExpressionAttributeValues={":half": {"N": "0.5"}})  # by hand
    before = snapshot()
    with pytest.raises(CorruptCounterError, match="VIDEO#v1"):
        reshard(Video.view_count, 8, parents=[("VIDEO#v1", "META")])
    assert snapshot() == before
