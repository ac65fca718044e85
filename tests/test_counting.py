"""Counted saves and deletes on moto in-process: the behaviour users see."""
from __future__ import annotations

import pytest

from pynamodb_counters import WriteResult, skip_counting
from pynamodb_counters.exceptions import (
    CounterUnderflowError,
    DuplicateChildError,
    MissingChildError,
    ParentKeyError,
    ParentNotFoundError,
)
from tests.support.factories import LIKED_AT, bookmarks, like, post, snapshot, stored, tally
from tests.support.models import Board, Bookmark, Card, Comment, Doc, Edit, Like, Post, Reply, User

pytestmark = pytest.mark.usefixtures("dynamodb")


def test_save_counts_the_child_and_stores_it_with_its_write_id() -> None:
    post()
    result = like(liked_at=LIKED_AT).save()
    assert isinstance(result, WriteResult)
    assert tally() == 1
    stored_like = Like.get("POST#a91f", "LIKE#USER#7c20")
    assert stored_like.liked_at == 1750636800
    raw = [item for item in stored("Social") if item["sk"]["S"].startswith("LIKE#")][0]
    assert raw["_cwid"] == {"S": result.token}
    assert [(c.parent, c.key, c.attribute, c.delta) for c in result.changes] == [
        (Post, ("POST#a91f", "META"), "like_tally", 1)]


def test_a_new_parent_starts_at_zero() -> None:
    post()
    assert tally() == 0
    assert Post(pk="POST#new", sk="META").like_tally == 0


def test_delete_uncounts_the_child() -> None:
    post()
    like("a").save()
    like("b").save()
    result = Like.get("POST#a91f", "LIKE#USER#a").delete()
    assert tally() == 1
    assert [c.delta for c in result.changes] == [-1]
    with pytest.raises(Like.DoesNotExist):
        Like.get("POST#a91f", "LIKE#USER#a")


def test_duplicate_save_changes_nothing_and_carries_the_stored_item() -> None:
    post()
    like(liked_at=LIKED_AT).save()
    before = snapshot()
    duplicate = Like(pk="POST#a91f", sk="LIKE#USER#7c20", liked_at=99)
    with pytest.raises(DuplicateChildError) as caught:
        duplicate.save()
    assert snapshot() == before
    assert caught.value.item is not None and caught.value.item.liked_at == 1750636800
    assert caught.value.raw_item["liked_at"] == {"N": "1750636800"}
    assert caught.value.model is Like and caught.value.key == ("POST#a91f", "LIKE#USER#7c20")


def test_duplicate_can_be_a_quiet_no_op() -> None:
    post()
    like().save()
    before = snapshot()
    result = like().save(ignore_duplicate=True)
    assert result.duplicate and result.changes == ()
    assert snapshot() == before
    assert tally() == 1


def test_deleting_an_absent_child_changes_nothing() -> None:
    post()
    like("a").save()
    before = snapshot()
    with pytest.raises(MissingChildError):
        like("b").delete()
    assert snapshot() == before
    result = like("b").delete(ignore_missing=True)
    assert result.missing
    assert snapshot() == before


def test_missing_parent_writes_nothing() -> None:
    before = snapshot()
    with pytest.raises(ParentNotFoundError) as caught:
        like(pk="POST#gone").save()
    assert caught.value.model is Post and caught.value.key == ("POST#gone", "META")
    assert snapshot() == before  # no like, and no phantom post holding only a counter


def test_a_counter_never_goes_below_zero() -> None:
    post()
    from pynamodb_counters import skip_counting

    with skip_counting():  # a like written without counting: the counter has drifted to 0 < 1 child
        like().save()
    before = snapshot()
    with pytest.raises(CounterUnderflowError) as caught:
        Like.get("POST#a91f", "LIKE#USER#7c20").delete()
    assert caught.value.attribute == "like_tally" and caught.value.stored == 0
    assert snapshot() == before


def test_caller_condition_is_combined_with_the_guard() -> None:
    from pynamodb_counters.exceptions import ConditionFailedError

    post()
    before = snapshot()
    with pytest.raises(ConditionFailedError):
        like().save(condition=Like.liked_at == 5)  # the item does not exist, so this condition fails
    assert snapshot() == before
    like().save(condition=Like.liked_at.does_not_exist())
    assert tally() == 1


def test_one_child_counted_on_two_parents_in_two_tables() -> None:
    post()
    User(user_id="U1").save()
    Bookmark(pk="POST#a91f", sk="BOOKMARK#USER#U1", user_id="U1").save()
    Bookmark(pk="POST#a91f", sk="BOOKMARK#USER#U2", user_id="U1").save()
    assert Post.get("POST#a91f", "META").bookmark_count == 2
    assert User.get("U1").bookmarks == 2
    Bookmark.get("POST#a91f", "BOOKMARK#USER#U1").delete()
    assert Post.get("POST#a91f", "META").bookmark_count == 1
    assert User.get("U1").bookmarks == 1


def test_a_missing_second_parent_sinks_the_whole_write() -> None:
    post()
    before = snapshot()
    with pytest.raises(ParentNotFoundError) as caught:
        Bookmark(pk="POST#a91f", sk="BOOKMARK#USER#U9", user_id="U9").save()
    assert caught.value.model is User
    assert snapshot() == before


def test_a_model_that_is_both_parent_and_child() -> None:
    post()
    Comment(pk="POST#a91f", sk="COMMENT#c1", text="first").save()
    Reply(pk="POST#a91f", sk="REPLY#c1#r1", comment_sk="COMMENT#c1").save()
    Reply(pk="POST#a91f", sk="REPLY#c1#r2", comment_sk="COMMENT#c1").save()
    assert Post.get("POST#a91f", "META").comment_count == 1
    assert Comment.get("POST#a91f", "COMMENT#c1").reply_count == 2


def test_single_table_discriminator_guards_the_parent() -> None:
    Board(pk="B1", sk="BOARD").save()
    Card(pk="B1", sk="CARD#1").save()
    assert Board.get("B1", "BOARD").card_count == 1
    from pynamodb_counters import skip_counting

    with skip_counting():  # a card stored where board B2 would be
        Card(pk="B2", sk="BOARD").save()
    before = snapshot()
    with pytest.raises(ParentNotFoundError) as caught:
        Card(pk="B2", sk="CARD#1").save()  # its parent key holds a Card, not a Board
    assert "holds a 'Card' item" in str(caught.value)
    assert snapshot() == before


def test_version_attributes_on_parent_and_child() -> None:
    Doc(doc_id="D1", title="draft").save()
    parent = Doc.get("D1")
    edit = Edit(doc_id="D1", seq=1)
    edit.save()
    assert edit.version == 1
    Edit(doc_id="D1", seq=2).save()
    parent.title = "final"
    parent.save()  # the loaded version still matches: counting does not bump the parent's version
    assert Doc.get("D1").edit_count == 2 and Doc.get("D1").version == 2
    Edit.get("D1", 1).delete()
    assert Doc.get("D1").edit_count == 1


def test_deleting_an_absent_child_of_a_drifted_parent_is_missing_not_underflow() -> None:
    post()  # like_tally 0, as if every like had been written uncounted
    before = snapshot()
    with pytest.raises(MissingChildError):
        like("nobody").delete()
    assert like("nobody").delete(ignore_missing=True).missing
    assert snapshot() == before


# -- a counted delete counts off the stored child's parents, whatever the instance holds ----------------------------
def test_delete_of_an_edited_instance_counts_off_the_stored_parent(bookmarked: None) -> None:
    b = Bookmark.get("POST#a91f", "BOOKMARK#USER#7c20")
    b.user_id = "U2"  # edited in memory, never saved
    result = b.delete()
    assert (bookmarks("U1"), bookmarks("U2")) == (0, 1)
    assert Post.get("POST#a91f", "META").bookmark_count == 1
    assert sorted((c.key, c.delta) for c in result.changes if c.attribute == "bookmarks") == [(("U1",), -1)]
    with pytest.raises(Bookmark.DoesNotExist):
        Bookmark.get("POST#a91f", "BOOKMARK#USER#7c20")


def test_delete_of_a_key_only_instance_counts_off_the_stored_parent(bookmarked: None) -> None:
    Bookmark(pk="POST#a91f", sk="BOOKMARK#USER#7c20").delete()
    assert (bookmarks("U1"), bookmarks("U2")) == (0, 1)
    assert Post.get("POST#a91f", "META").bookmark_count == 1


def test_key_only_delete_of_an_absent_child_is_missing_and_writes_nothing(bookmarked: None) -> None:
    before = snapshot()
    with pytest.raises(MissingChildError):
        Bookmark(pk="POST#a91f", sk="BOOKMARK#USER#nobody").delete()
    assert Bookmark(pk="POST#a91f", sk="BOOKMARK#USER#nobody").delete(ignore_missing=True).missing
    assert snapshot() == before


def test_key_only_delete_of_a_stored_child_whose_parent_cannot_be_named_is_a_clear_error(bookmarked: None) -> None:
    Bookmark._get_connection().put_item("POST#a91f", "BOOKMARK#USER#ghost")  # written by hand, without a user
    before = snapshot()
    with pytest.raises(ParentKeyError):
        Bookmark(pk="POST#a91f", sk="BOOKMARK#USER#ghost").delete()
    assert snapshot() == before


def test_a_stale_delete_keeps_the_version_check(dynamodb: None) -> None:
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
