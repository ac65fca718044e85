"""Bad input and bad environments: a clear error, and nothing written or leaked."""
from __future__ import annotations

import logging
from typing import Any

import pytest
from pynamodb.attributes import UnicodeAttribute
from pynamodb.exceptions import PutError

from pynamodb_counters import CountedTransaction, RetryPolicy, skip_counting
from pynamodb_counters.exceptions import RetriesExhaustedError, TransactionError
from tests.support.factories import like, post, snapshot
from tests.support.models import Like, Post

SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"


@pytest.mark.usefixtures("dynamodb")
@pytest.mark.parametrize("condition", ["liked_at = :x", 5, True, {"liked_at": 1}])
def test_a_condition_that_is_not_a_pynamodb_condition(condition: Any) -> None:
    post()
    before = snapshot()
    with pytest.raises(TypeError, match="must be a PynamoDB condition"):
        like().save(condition=condition)
    with pytest.raises(TypeError, match="must be a PynamoDB condition"):
        like().delete(condition=condition)
    assert snapshot() == before


@pytest.mark.usefixtures("dynamodb")
def test_a_token_longer_than_dynamodb_allows() -> None:
    with pytest.raises(ValueError, match="1 to 36 characters"):
        like().save(token="x" * 37)


@pytest.mark.usefixtures("dynamodb")
def test_a_missing_table_is_a_clear_error() -> None:
    class Stray(Like):
        class Meta:
            table_name = "NoSuchTable"
            region = "us-east-1"

    post()
    before = snapshot()
    with pytest.raises(TransactionError, match="NoSuchTable.*create_table") as caught:
        Stray(pk="POST#a91f", sk="LIKE#USER#1", liked_at=1).save()
    assert caught.value.cause_response_code == "ResourceNotFoundException"
    assert snapshot() == before


def test_an_unreachable_endpoint_gives_up_without_leaking_credentials(caplog: pytest.LogCaptureFixture,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    for model in (Like, Post):
        monkeypatch.setattr(model.Meta, "host", "http://127.0.0.1:9")  # nothing listens on the discard port
        monkeypatch.setattr(model.Meta, "aws_access_key_id", "AKIAEXAMPLEEXAMPLE")
        monkeypatch.setattr(model.Meta, "aws_secret_access_key", SECRET)
        monkeypatch.setattr(model, "_connection", None)
    with caplog.at_level(logging.DEBUG, logger="pynamodb_counters"):
        with pytest.raises(RetriesExhaustedError) as caught:
            like().save(retry=RetryPolicy(max_attempts=3, base_delay=0))
    assert caught.value.attempts == 3 and not caught.value.ambiguous
    assert "127.0.0.1:9" in str(caught.value)
    assert SECRET not in str(caught.value) and SECRET not in repr(caught.value.cause)
    assert SECRET not in caplog.text
    for model in (Like, Post):
        model._connection = None


@pytest.mark.usefixtures("dynamodb")
def test_another_region_has_no_such_table(monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as patch:  # undone before the backend deletes its tables, in their own region
        for model in (Like, Post):
            patch.setattr(model.Meta, "region", "eu-west-1")
            patch.setattr(model, "_connection", None)
        with pytest.raises(TransactionError, match="ResourceNotFoundException"):
            like().save()
        for model in (Like, Post):
            model._connection = None


def test_an_empty_transaction_is_refused() -> None:
    from pynamodb_counters.exceptions import InvalidTransactionError

    with pytest.raises(InvalidTransactionError, match="empty"):
        CountedTransaction().commit()


@pytest.mark.usefixtures("dynamodb")
def test_an_item_over_400_kb_is_refused_and_nothing_is_written() -> None:
    from tests.support.models import Comment

    post()
    before = snapshot()
    with pytest.raises(TransactionError) as caught:
        Comment(pk="POST#a91f", sk="COMMENT#big", text="x" * 410_000).save()
    assert caught.value.cause_response_code == "ValidationException"
    assert "size" in str(caught.value).lower()
    assert snapshot() == before


class BigLike(Like):
    """A like with a free-text note, to reach DynamoDB's item size limit."""

    note = UnicodeAttribute(null=True)


def largest_note() -> int:
    """The longest note a plain Put of a BigLike accepts (found on the engine: moto sizes items its own way)."""
    low, high = 0, 420 * 1024
    while low < high:
        middle = (low + high + 1) // 2
        try:
            with skip_counting():
                BigLike(pk="POST#probe", sk="LIKE#USER#probe", liked_at=1, note="x" * middle).save()
            low = middle
        except PutError:
            high = middle - 1
    with skip_counting():
        BigLike(pk="POST#probe", sk="LIKE#USER#probe").delete()
    return low


@pytest.mark.slow
@pytest.mark.usefixtures("dynamodb")
def test_an_item_too_large_only_with_the_write_id_says_so() -> None:
    post("POST#big")
    big = BigLike(pk="POST#big", sk="LIKE#USER#big", liked_at=1, note="x" * largest_note())
    before = snapshot()
    with pytest.raises(TransactionError) as caught:
        big.save()
    message = str(caught.value)
    assert "BigLike ('POST#big', 'LIKE#USER#big')" in message and "write id" in message and "_cwid" in message
    assert "Nothing was written" in message and caught.value.cause_response_code == "ValidationException"
    assert snapshot() == before


@pytest.mark.usefixtures("dynamodb")
def test_a_child_saved_without_its_key_is_told_so_about_its_own_key() -> None:
    from pynamodb_counters.exceptions import InvalidArgumentError

    post()
    before = snapshot()
    with pytest.raises(InvalidArgumentError, match="Like.pk"):
        Like(liked_at=1).save()
    with pytest.raises(InvalidArgumentError, match="Like.sk"):
        Like(pk="POST#a91f", liked_at=1).save()
    assert snapshot() == before


@pytest.mark.usefixtures("dynamodb")
def test_a_parent_edited_and_counted_into_in_one_transaction_is_told_what_collides() -> None:
    from pynamodb_counters.exceptions import InvalidTransactionError
    from tests.support.models import Comment, Reply

    post()
    Comment(pk="POST#a91f", sk="COMMENT#c1", text="first").save()
    edited = Comment.get("POST#a91f", "COMMENT#c1")
    edited.text = "edited"
    before = snapshot()
    with pytest.raises(InvalidTransactionError) as caught:
        with CountedTransaction() as transaction:
            transaction.save(edited)
            transaction.save(Reply(pk="POST#a91f", sk="REPLY#c1#r1", comment_sk="COMMENT#c1"))
    assert "counted on itself" not in str(caught.value)
    assert "written and counted into" in str(caught.value) and "two transactions" in str(caught.value)
    assert snapshot() == before


@pytest.mark.usefixtures("dynamodb")
def test_a_refused_counted_update_says_it_was_an_update() -> None:
    from pynamodb_counters.exceptions import ConditionFailedError
    from tests.support.models import Message, Thread

    Thread(pk="THREAD#t1", sk="META").save()
    Message(pk="MSG#1", sk="MSG", thread_id="THREAD#t1").save()
    stored = Message.get("MSG#1", "MSG")
    with pytest.raises(ConditionFailedError, match="the condition on updating Message"):
        stored.update(actions=[Message.status.set("published")], condition=Message.title.exists())


@pytest.mark.usefixtures("dynamodb")
def test_a_childs_own_key_over_dynamodbs_key_limit_is_named_as_such() -> None:
    from pynamodb_counters.exceptions import InvalidArgumentError

    post()
    before = snapshot()
    with pytest.raises(InvalidArgumentError, match="1024 bytes") as caught:
        Like(pk="POST#a91f", sk="LIKE#" + "u" * 1100, liked_at=1).save()
    assert "too large" not in str(caught.value)  # not mistaken for an item too large
    from tests.support.models import Message

    with pytest.raises(InvalidArgumentError, match="2048 bytes"):
        Message(pk="MSG#" + "m" * 2100, sk="MSG", thread_id="THREAD#t1").save()
    assert snapshot() == before
