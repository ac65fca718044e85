"""No silent bypass: what the library refuses, with a clear error and nothing written."""
from __future__ import annotations

import pytest
from pynamodb.connection import Connection
from pynamodb.transactions import TransactWrite

from pynamodb_counters import counted_by, set_counter, skip_counting
from pynamodb_counters.exceptions import (
    ConditionFailedError,
    ConfigurationError,
    CountingBypassError,
    ParentKeyError,
    ParentNotFoundError,
)
from tests.support.factories import like, post, snapshot
from tests.support.models import REGION, Bookmark, Like, Post, User, Video, View

pytestmark = pytest.mark.usefixtures("dynamodb")


def test_saving_a_parent_loses_no_likes() -> None:
    post(title="draft")
    loaded = Post.get("POST#a91f", "META")
    like("a").save()
    like("b").save()  # likes land after the post was loaded
    loaded.title = "final"
    loaded.save()
    fresh = Post.get("POST#a91f", "META", consistent_read=True)
    assert fresh.title == "final" and fresh.like_tally == 2
    assert loaded.like_tally == 2  # the instance was refreshed from the stored item


def test_saving_a_parent_can_remove_an_attribute() -> None:
    post(title="draft")
    loaded = Post.get("POST#a91f", "META")
    loaded.title = None
    loaded.save()
    assert Post.get("POST#a91f", "META").title is None


def test_a_counter_set_by_hand_is_refused() -> None:
    post()
    before = snapshot()
    loaded = Post.get("POST#a91f", "META")
    loaded.like_tally = 40
    with pytest.raises(CountingBypassError, match="like_tally was set by hand"):
        loaded.save()
    with pytest.raises(CountingBypassError):
        Post(pk="POST#b", sk="META", like_tally=3).save()
    assert snapshot() == before


def test_update_refuses_counters_and_child_keys() -> None:
    post()
    like().save()
    before = snapshot()
    with pytest.raises(CountingBypassError, match="Post.like_tally is a counter"):
        Post.get("POST#a91f", "META").update(actions=[Post.like_tally.set(9)])
    stored_like = Like.get("POST#a91f", "LIKE#USER#7c20")
    with pytest.raises(CountingBypassError, match="key"):
        stored_like.update(actions=[Like.sk.set("LIKE#USER#other")])
    assert snapshot() == before
    stored_like.update(actions=[Like.liked_at.set(5)])  # other attributes are fine
    assert Like.get("POST#a91f", "LIKE#USER#7c20").liked_at == 5


def test_update_of_an_attribute_a_key_function_reads_moves_the_count_or_is_refused() -> None:
    User(user_id="U1").save()
    post()
    bookmark = Bookmark(pk="POST#a91f", sk="BOOKMARK#USER#U1", user_id="U1")
    bookmark.save()
    before = snapshot()
    with pytest.raises(CountingBypassError, match="decides what the child counts for"):
        bookmark.update(actions=[Bookmark.user_id.set(Bookmark.pk)])  # detected by running the key function
    with pytest.raises(ParentNotFoundError):
        bookmark.update(actions=[Bookmark.user_id.set("U2")])  # a known value, but no such user: nothing written
    assert snapshot() == before
    User(user_id="U2").save()
    bookmark.update(actions=[Bookmark.user_id.set("U2")])  # the count moves with it, in the same transaction
    assert (User.get("U1").bookmarks, User.get("U2").bookmarks) == (0, 1)


def test_declared_reads_are_protected_too() -> None:
    class Tagged(Like):
        tag = counted_by(Post.comment_count, key=lambda t: (t.pk, "META"), reads=["liked_at"])

    with pytest.raises(CountingBypassError, match="liked_at"):
        Tagged(pk="POST#a91f", sk="LIKE#x", liked_at=1).update(actions=[Tagged.liked_at.add(2)])


def test_batch_write_is_refused_on_counted_models() -> None:
    with pytest.raises(CountingBypassError, match="batch_write"):
        Like.batch_write()
    with pytest.raises(CountingBypassError):
        Post.batch_write()


def test_skip_counting_makes_plain_writes_for_backfills() -> None:
    post()
    with skip_counting(Like):
        with Like.batch_write() as batch:
            batch.save(like("a"))
            batch.save(like("b"))
        like("c").save()
    assert Post.get("POST#a91f", "META").like_tally == 0  # nothing counted: a repair is due
    assert Like.count("POST#a91f", Like.sk.startswith("LIKE#")) == 3
    like("d").save()  # outside the block, counting resumes
    assert Post.get("POST#a91f", "META").like_tally == 1


def test_skip_counting_is_scoped_to_the_models_named() -> None:
    post()
    User(user_id="U1").save()
    with skip_counting(Bookmark):
        like("a").save()
    assert Post.get("POST#a91f", "META").like_tally == 1


def test_set_counter_is_the_explicit_repair_path() -> None:
    post()
    with skip_counting():
        like("a").save()
        like("b").save()
    set_counter(Post.like_tally, ("POST#a91f", "META"), 2, expected=0)
    assert Post.get("POST#a91f", "META").like_tally == 2
    before = snapshot()
    with pytest.raises(ConditionFailedError, match="no longer holds 0"):
        set_counter(Post.like_tally, ("POST#a91f", "META"), 5, expected=0)
    with pytest.raises(ConditionFailedError, match="does not exist"):
        set_counter(Post.like_tally, ("POST#gone", "META"), 5)
    with pytest.raises(ValueError):
        set_counter(Post.like_tally, ("POST#a91f", "META"), -1)
    assert snapshot() == before


@pytest.mark.parametrize("key, message", [
    (lambda like: like.pk, r"is a \(hash, range\) tuple"),
    (lambda like: (like.pk, "META", "extra"), r"is a \(hash, range\) tuple"),
    (lambda like: (like.pk, None), "gave None for Post.sk"),
    (lambda like: (like.pk, 7), "not a valid key value"),
    (lambda like: (like.missing_attribute, "META"), "the key function failed"),
])
def test_a_bad_key_function_is_a_clear_error_and_writes_nothing(key: object, message: str) -> None:
    class Odd(Like):
        odd = counted_by(Post.comment_count, key=key)  # type: ignore[arg-type]

    post()
    before = snapshot()
    with pytest.raises(ParentKeyError, match=message):
        Odd(pk="POST#a91f", sk="LIKE#odd", liked_at=1).save()
    assert snapshot() == before


def test_a_child_without_the_attributes_its_key_needs() -> None:
    User(user_id="U1").save()
    post()
    before = snapshot()
    with pytest.raises(ParentKeyError, match="gave None for User.user_id"):
        Bookmark(pk="POST#a91f", sk="BOOKMARK#USER#U1").save()
    assert snapshot() == before


def test_declarations_are_checked_when_the_class_is_built() -> None:
    with pytest.raises(ConfigurationError, match="needs a parent's CounterField"):
        counted_by(Post.title, key=lambda c: c.pk)
    with pytest.raises(ConfigurationError, match="callable"):
        counted_by(Post.like_tally, key="pk")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="not a string"):
        counted_by(Post.like_tally, key=lambda c: c.pk, reads="pk")


def test_a_relation_is_immutable() -> None:
    with pytest.raises(AttributeError):
        Like.post._key = lambda like: like  # type: ignore[misc]


def test_counters_and_relations_need_the_mixin_before_model() -> None:
    from pynamodb.attributes import UnicodeAttribute
    from pynamodb.models import Model

    from pynamodb_counters import CounterField, CounterMixin

    # Python before 3.12 wraps an error raised in __set_name__ in a RuntimeError; ours is its cause
    with pytest.raises((ConfigurationError, RuntimeError)) as plain:
        class Plain(Model):
            class Meta:
                table_name = "Social"
            pk = UnicodeAttribute(hash_key=True)
            tally = CounterField()

    with pytest.raises((ConfigurationError, RuntimeError)) as backwards:
        class Backwards(Model, CounterMixin):  # type: ignore[misc]
            class Meta:
                table_name = "Social"
            pk = UnicodeAttribute(hash_key=True)
            post = counted_by(Post.like_tally, key=lambda c: (c.pk, "META"))

    for caught in (plain.value, backwards.value):
        error = caught.__cause__ if isinstance(caught, RuntimeError) else caught
        assert isinstance(error, ConfigurationError)
        assert "must list CounterMixin before Model" in str(error)


def test_pynamodb_5_positional_settings_are_refused_on_counted_writes() -> None:
    post()
    before = snapshot()
    with pytest.raises(TypeError, match="per-call settings"):
        like().delete(None, object())
    with pytest.raises(TypeError, match="per-call settings"):
        Post.get("POST#a91f", "META").save(None, object())
    assert snapshot() == before


def test_set_counter_errors_name_the_dynamodb_code() -> None:
    with pytest.raises(ConditionFailedError) as caught:
        set_counter(Post.like_tally, ("POST#gone", "META"), 1)
    assert caught.value.cause_response_code == "ConditionalCheckFailedException"


def test_inside_skip_counting_a_transaction_may_write_counters() -> None:
    from pynamodb_counters import CountedTransaction

    with skip_counting(), CountedTransaction() as transaction:
        transaction.save(Post(pk="POST#migrated", sk="META", like_tally=12))
    assert Post.get("POST#migrated", "META").like_tally == 12


# -- an uncounted update never creates a counted child -------------------------------------------------------------
def _deleted_meanwhile() -> Like:
    post()
    like("a").save()
    stale = Like.get("POST#a91f", "LIKE#USER#a", consistent_read=True)
    Like.get("POST#a91f", "LIKE#USER#a").delete()  # unliked elsewhere
    return stale


def test_an_update_of_a_stale_copy_of_a_deleted_child_is_refused_not_created_uncounted() -> None:
    from pynamodb_counters.exceptions import MissingChildError

    stale = _deleted_meanwhile()
    before = snapshot()
    with pytest.raises(MissingChildError, match="does not exist"):
        stale.update(actions=[Like.liked_at.set(5)])
    with pytest.raises(MissingChildError, match="does not exist"):
        like("never").update(actions=[Like.liked_at.set(5)])  # never saved at all
    assert snapshot() == before


def test_pynamodbs_transact_write_update_of_a_deleted_child_is_refused() -> None:
    from pynamodb.connection import Connection
    from pynamodb.exceptions import TransactWriteError
    from pynamodb.transactions import TransactWrite

    stale = _deleted_meanwhile()
    before = snapshot()
    with pytest.raises(TransactWriteError):
        with TransactWrite(connection=Connection(region="us-east-1")) as transaction:
            transaction.update(stale, actions=[Like.liked_at.set(5)])
    assert snapshot() == before


def test_a_counted_transactions_update_of_a_missing_child_is_refused() -> None:
    from pynamodb_counters import CountedTransaction
    from pynamodb_counters.exceptions import MissingChildError

    stale = _deleted_meanwhile()
    before = snapshot()
    with pytest.raises(MissingChildError, match="does not exist"):
        with CountedTransaction() as transaction:
            transaction.update(stale, [Like.liked_at.set(5)])
    assert snapshot() == before


def test_an_update_refused_by_the_callers_condition_is_still_pynamodbs_error() -> None:
    from pynamodb.exceptions import UpdateError

    post()
    like("a").save()
    stored = Like.get("POST#a91f", "LIKE#USER#a", consistent_read=True)
    with pytest.raises(UpdateError) as caught:
        stored.update(actions=[Like.liked_at.set(5)], condition=Like.liked_at == 99)
    assert caught.value.cause_response_code == "ConditionalCheckFailedException"
    stored.update(actions=[Like.liked_at.set(5)])
    assert Like.get("POST#a91f", "LIKE#USER#a", consistent_read=True).liked_at == 5


# -- PynamoDB's TransactWrite cannot bypass counting ----------------------------------------------------------------
def _connection() -> Connection:
    return Connection(region=REGION)


def test_transact_write_save_of_a_counted_child_is_refused(dynamodb: None) -> None:
    post()
    before = snapshot()
    with pytest.raises(CountingBypassError, match="CountedTransaction"):
        with TransactWrite(connection=_connection()) as tw:
            tw.save(Like(pk="POST#a91f", sk="LIKE#USER#1", liked_at=1))
            tw.update(Post.get("POST#a91f", "META"), actions=[Post.like_tally.add(5)])
    assert snapshot() == before


def test_transact_write_update_of_a_counter_is_refused(dynamodb: None) -> None:
    post()
    before = snapshot()
    with pytest.raises(CountingBypassError, match="CountedTransaction"):
        with TransactWrite(connection=_connection()) as tw:
            tw.update(Post.get("POST#a91f", "META"), actions=[Post.like_tally.add(5)])
    assert snapshot() == before


def test_transact_write_save_of_a_parent_is_refused(dynamodb: None) -> None:
    post()
    Like(pk="POST#a91f", sk="LIKE#USER#1", liked_at=1).save()
    before = snapshot()
    with pytest.raises(CountingBypassError, match="CountedTransaction"):
        with TransactWrite(connection=_connection()) as tw:
            tw.save(Post(pk="POST#a91f", sk="META", title="reset?"))
    assert snapshot() == before
    assert Post.get("POST#a91f", "META").like_tally == 1


def test_transact_write_delete_of_a_counted_child_is_refused(dynamodb: None) -> None:
    post()
    Like(pk="POST#a91f", sk="LIKE#USER#1", liked_at=1).save()
    before = snapshot()
    with pytest.raises(CountingBypassError, match="CountedTransaction"):
        with TransactWrite(connection=_connection()) as tw:
            tw.delete(Like.get("POST#a91f", "LIKE#USER#1"))
    assert snapshot() == before


def test_transact_write_delete_of_a_sharded_parent_is_refused(dynamodb: None) -> None:
    Video(pk="VIDEO#v1", sk="META").save()
    View(pk="VIDEO#v1", sk="VIEW#USER#1").save()
    before = snapshot()
    with pytest.raises(CountingBypassError, match="CountedTransaction"):
        with TransactWrite(connection=_connection()) as tw:
            tw.delete(Video.get("VIDEO#v1", "META"))
    assert snapshot() == before


def test_transact_write_keeps_uncounted_writes_and_the_parents_other_attributes(dynamodb: None) -> None:
    post()
    Like(pk="POST#a91f", sk="LIKE#USER#1", liked_at=1).save()
    with TransactWrite(connection=_connection()) as tw:
        tw.update(Post.get("POST#a91f", "META"), actions=[Post.title.set("edited")])
        tw.update(Like.get("POST#a91f", "LIKE#USER#1"), actions=[Like.liked_at.set(2)])
    stored_post = Post.get("POST#a91f", "META")
    assert (stored_post.title, stored_post.like_tally) == ("edited", 1)
    assert Like.get("POST#a91f", "LIKE#USER#1").liked_at == 2


def test_transact_write_inside_skip_counting_is_plain_pynamodb(dynamodb: None) -> None:
    post()
    with skip_counting(Like):
        with TransactWrite(connection=_connection()) as tw:
            tw.save(Like(pk="POST#a91f", sk="LIKE#USER#1", liked_at=1))
    assert Like.get("POST#a91f", "LIKE#USER#1").liked_at == 1
    assert Post.get("POST#a91f", "META").like_tally == 0
