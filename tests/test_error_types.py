"""The errors' types: a refused counted write is also PynamoDB's ``TransactWriteError``, with PynamoDB's typed
``cancellation_reasons``; every error reads the DynamoDB code and message of its cause; a bad argument is an
``InvalidArgumentError``, which ``except ValueError`` and ``except TypeError`` still catch."""
from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, List, Type

import botocore.exceptions
import pytest
from pynamodb.exceptions import CancellationReason, PynamoDBException, TransactWriteError, UpdateError

from pynamodb_counters.exceptions import (
    ConditionFailedError,
    ConfigurationError,
    CountedWriteError,
    CounterError,
    CounterUnderflowError,
    DuplicateChildError,
    InvalidArgumentError,
    MissingChildError,
    ParentNotFoundError,
    RetriesExhaustedError,
    TransactionError,
)
from tests.support.client_hooks import recorded
from tests.support.factories import POST, like, likes, post, snapshot, stored, tally
from tests.support.models import Like, Post

#: a stored like, as DynamoDB returns it with ``ReturnValuesOnConditionCheckFailure``
ITEM = {"pk": {"S": POST}, "sk": {"S": "LIKE#USER#7c20"}, "liked_at": {"N": "1"}}

#: the raw ``CancellationReasons`` of a refused like: its Put failed, the post's Update did not object, a third
#: action was in conflict
RAW_REASONS: List[Dict[str, Any]] = [
    {"Code": "ConditionalCheckFailed", "Message": "The conditional request failed", "Item": ITEM},
    {"Code": "None"},
    {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"},
]

#: each refused-write class, with the keywords only it takes
COUNTED_WRITE_ERRORS: List[Any] = [
    (CountedWriteError, {}),
    (DuplicateChildError, {"raw_item": ITEM, "item": None}),
    (MissingChildError, {}),
    (ParentNotFoundError, {"shard": 2}),
    (CounterUnderflowError, {"attribute": "like_tally", "stored": 0}),
    (ConditionFailedError, {}),
]


def client_error(code: str = "TransactionCanceledException", message: str = "Transaction cancelled, please "
                 "refer cancellation reasons for specific reasons [ConditionalCheckFailed, None]",
                 reasons: Any = None) -> botocore.exceptions.ClientError:
    """A botocore ``ClientError`` as the client raises it for a refused TransactWriteItems."""
    response: Dict[str, Any] = {"Error": {"Code": code, "Message": message}}
    if reasons is not None:
        response["CancellationReasons"] = reasons
    return botocore.exceptions.ClientError(response, "TransactWriteItems")  # type: ignore[arg-type]


def ids(case: Any) -> str:
    return str(case[0].__name__)


@pytest.mark.parametrize("case", COUNTED_WRITE_ERRORS, ids=ids)
def test_a_refused_counted_write_is_a_pynamodb_transact_write_error(case: Any) -> None:
    kind, extra = case
    cause = client_error(reasons=RAW_REASONS)
    error = kind("refused", cause, model=Like, key=(POST, "LIKE#USER#7c20"), cancellation_reasons=RAW_REASONS,
                 **extra)
    assert isinstance(error, TransactWriteError) and isinstance(error, PynamoDBException)
    assert isinstance(error, CountedWriteError) and isinstance(error, CounterError)
    # PynamoDB's __init__ sets cause to None: the cause given must survive it, and the message too
    assert error.cause is cause and error.msg == "refused" and str(error) == "refused"
    assert error.model is Like and error.key == (POST, "LIKE#USER#7c20")
    for name, value in extra.items():
        assert getattr(error, name) == value
    for catch in (TransactWriteError, PynamoDBException, CounterError):
        with pytest.raises(catch) as caught:
            raise error
        assert caught.value is error


@pytest.mark.parametrize("case", COUNTED_WRITE_ERRORS, ids=ids)
def test_each_refused_write_class_keeps_its_default_message(case: Any) -> None:
    kind, _ = case
    error = kind()
    assert error.msg == kind.msg and str(error) == kind.msg and error.cause is None
    assert error.cancellation_reasons == [] and error.raw_cancellation_reasons == []
    assert error.model is None and error.key == ()


@pytest.mark.parametrize("kind", [CounterError, ConfigurationError, TransactionError, RetriesExhaustedError,
                                  InvalidArgumentError])
def test_only_refused_counted_writes_are_pynamodb_errors(kind: Type[CounterError]) -> None:
    assert not isinstance(kind("no", client_error()), PynamoDBException)


def test_cancellation_reasons_are_pynamodbs_typed_reasons_one_per_action() -> None:
    error = DuplicateChildError("refused", client_error(reasons=RAW_REASONS), cancellation_reasons=RAW_REASONS)
    reasons = error.cancellation_reasons
    assert len(reasons) == 3 and reasons[1] is None
    refused, conflict = reasons[0], reasons[2]
    assert isinstance(refused, CancellationReason) and isinstance(conflict, CancellationReason)
    assert refused.code == "ConditionalCheckFailed" and refused.message == "The conditional request failed"
    assert refused.raw_item == ITEM
    assert conflict.code == "TransactionConflict" and conflict.message == "Transaction is ongoing for the item"
    assert conflict.raw_item is None


def test_the_raw_reasons_are_kept_as_given() -> None:
    given = [dict(reason) for reason in RAW_REASONS]
    error = CountedWriteError("refused", cancellation_reasons=given)
    assert error.raw_cancellation_reasons == RAW_REASONS
    assert error.raw_cancellation_reasons is not given  # a list of its own
    assert error.raw_cancellation_reasons[0]["Item"] == ITEM


def test_the_reasons_come_from_the_raw_list_not_from_the_cause() -> None:
    """A botocore ``ClientError`` cause (what the library's client raises) has no typed reasons: PynamoDB's
    ``TransactWriteError`` would list none. The error's own list is what counts."""
    error = ConditionFailedError("refused", client_error(reasons=[{"Code": "None"}]),
                                 cancellation_reasons=[{"Code": "None"}, {"Code": "ConditionalCheckFailed"}])
    assert [reason and reason.code for reason in error.cancellation_reasons] == [None, "ConditionalCheckFailed"]
    assert error.cancellation_reasons[1] is not None and error.cancellation_reasons[1].message is None


def test_cause_response_code_and_message_from_a_botocore_error() -> None:
    cause = client_error("TransactionCanceledException", "Transaction cancelled [ConditionalCheckFailed]")
    for error in (CounterError("x", cause), TransactionError("x", cause),
                  DuplicateChildError("x", cause, cancellation_reasons=RAW_REASONS)):
        assert error.cause_response_code == "TransactionCanceledException"
        assert error.cause_response_message == "Transaction cancelled [ConditionalCheckFailed]"


def test_cause_response_code_and_message_through_a_wrapped_pynamodb_error() -> None:
    """``set_counter()`` wraps PynamoDB's ``UpdateError``, which wraps botocore's error."""
    cause = UpdateError("update failed", client_error("ConditionalCheckFailedException", "The conditional request "
                                                                                         "failed"))
    error = ConditionFailedError("counter moved", cause)
    assert error.cause_response_code == "ConditionalCheckFailedException"
    assert error.cause_response_message == "The conditional request failed"
    assert error.cancellation_reasons == []


@pytest.mark.parametrize("cause", [None, ConnectionError("connection refused"), KeyError("pk"),
                                   botocore.exceptions.EndpointConnectionError(endpoint_url="http://127.0.0.1:9")])
def test_cause_response_code_and_message_are_none_without_an_aws_answer(cause: Any) -> None:
    for error in (RetriesExhaustedError("gave up", cause), CountedWriteError("refused", cause)):
        assert error.cause_response_code is None and error.cause_response_message is None


def test_an_invalid_argument_is_also_a_value_error_and_a_type_error() -> None:
    error = InvalidArgumentError("a ClientRequestToken is a string of 1 to 36 characters, not 'x' * 37")
    assert isinstance(error, CounterError) and isinstance(error, ValueError) and isinstance(error, TypeError)
    assert str(error) == error.msg and error.cause is None and InvalidArgumentError().msg == "invalid argument"
    for catch in (ValueError, TypeError, CounterError):
        with pytest.raises(catch):
            raise error


@contextlib.contextmanager
def requests_of(model: type) -> Iterator[List[Dict[str, Any]]]:
    """The parameters of each TransactWriteItems that ``model``'s counted writes send (through the transport
    seam), listed as the block ends."""
    sent: List[Dict[str, Any]] = []
    with recorded() as calls:
        yield sent
    sent.extend(dict(call.parameters) for call in calls
                if call.operation == "TransactWriteItems" and call.model is model)


@pytest.mark.usefixtures("dynamodb")
def test_a_duplicate_like_is_caught_as_a_pynamodb_transact_write_error() -> None:
    post()
    like().save()
    before = snapshot()
    with requests_of(Like) as sent:
        try:
            like().save()
        except TransactWriteError as error:
            caught: Any = error
        else:
            pytest.fail("a duplicate like was saved")
    assert isinstance(caught, DuplicateChildError)
    assert caught.cause_response_code == "TransactionCanceledException"
    assert isinstance(caught.cause_response_message, str) and caught.cause_response_message
    actions = sent[-1]["TransactItems"]
    reasons = caught.cancellation_reasons
    # one reason per action: the like's Put and the post's Update
    assert len(reasons) == len(actions) == len(caught.raw_cancellation_reasons) == 2
    put = next(position for position, action in enumerate(actions) if "Put" in action)
    refused = reasons[put]
    assert refused is not None and refused.code == "ConditionalCheckFailed"
    stored_like = next(item for item in stored(Like.Meta.table_name) if item["sk"] == {"S": "LIKE#USER#7c20"})
    assert refused.raw_item == stored_like == caught.raw_item
    assert all(reason is None for position, reason in enumerate(reasons) if position != put)  # the post's Update
    assert "Update" in actions[1 - put] and actions[1 - put]["Update"]["TableName"] == Post.Meta.table_name
    # nothing written twice
    assert snapshot() == before and tally() == 1 and likes() == 1
