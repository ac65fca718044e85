"""Retries, idempotency and capacity reporting, with botocore's Stubber answering as DynamoDB would.

moto meters no capacity and raises no real conflicts, so these answers are scripted at the client: the Stubber
replaces the HTTP exchange, and everything above it (the library's retry loop, its reading of cancellation
reasons) runs for real.
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, List

import pytest
from botocore.stub import Stubber

from pynamodb_counters import CountedTransaction, RetryPolicy, signals
from pynamodb_counters.exceptions import (
    ConfigurationError,
    DuplicateChildError,
    RetriesExhaustedError,
    TransactionError,
)
from pynamodb_counters.write._send import classify, transact_client
from tests.support.factories import like
from tests.support.models import Like

pytestmark = pytest.mark.usefixtures("dynamodb")

TOKEN = "0f5e2c4a-5b7e-4d0a-9a53-6a1f8c2b7d10"


class Sleeps:
    def __init__(self) -> None:
        self.waits: List[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture
def stubber() -> Iterator[Stubber]:
    with Stubber(transact_client(Like)) as stub:
        yield stub
        stub.assert_no_pending_responses()


def items_of(child: Like) -> List[Dict[str, Any]]:
    transaction = CountedTransaction(token=TOKEN)
    transaction.save(child)
    return transaction.plan().items


def save(policy: RetryPolicy) -> Any:
    transaction = CountedTransaction(token=TOKEN, retry=policy)
    transaction.save(like())
    return transaction.commit()


def cancelled(stub: Stubber, *reasons: Dict[str, Any]) -> None:
    stub.add_client_error("transact_write_items", "TransactionCanceledException", "Transaction cancelled",
                          modeled_fields={"CancellationReasons": list(reasons)})


CONFLICT = {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}
NONE = {"Code": "None"}


def test_consumed_capacity_reaches_the_result_and_the_signal(stubber: Stubber) -> None:
    capacity = [{"TableName": "Social", "CapacityUnits": 4.0, "WriteCapacityUnits": 4.0}]
    stubber.add_response("transact_write_items", {"ConsumedCapacity": capacity},
                         expected_params={"TransactItems": items_of(like()),
                                          "ClientRequestToken": TOKEN, "ReturnConsumedCapacity": "TOTAL"})
    seen: List[Any] = []
    with signals.child_added.connected_to(lambda sender, **kw: seen.append(kw), sender=Like):
        result = save(RetryPolicy())
    assert result.consumed_capacity == tuple(capacity) and result.capacity_units == 4.0
    assert seen[0]["result"] is result and seen[0]["consumed_capacity"] == tuple(capacity)


def test_conflicts_are_retried_with_the_same_token_and_jittered_backoff(stubber: Stubber) -> None:
    for _ in range(3):
        cancelled(stubber, CONFLICT, NONE)
    stubber.add_response("transact_write_items", {}, expected_params={
        "TransactItems": items_of(like()), "ClientRequestToken": TOKEN,
        "ReturnConsumedCapacity": "TOTAL"})
    sleeps = Sleeps()
    result = save(RetryPolicy(max_attempts=5, base_delay=0.1, max_delay=0.3, sleep=sleeps))
    assert result.attempts == 4 and not result.recovered
    assert len(sleeps.waits) == 3
    assert all(0 <= wait <= cap for wait, cap in zip(sleeps.waits, [0.1, 0.2, 0.3]))


@pytest.mark.parametrize("code, status, ambiguous", [
    ("ThrottlingException", 400, False),
    ("ProvisionedThroughputExceededException", 400, False),
    ("InternalServerError", 500, True),
    ("TransactionInProgressException", 400, True),
])
def test_transient_errors_are_retried_within_the_bound(stubber: Stubber, code: str, status: int,
                                                       ambiguous: bool) -> None:
    for _ in range(3):
        stubber.add_client_error("transact_write_items", code, "try again", http_status_code=status)
    with pytest.raises(RetriesExhaustedError) as caught:
        save(RetryPolicy(max_attempts=3, base_delay=0, sleep=Sleeps()))
    assert caught.value.attempts == 3 and caught.value.ambiguous is ambiguous
    assert caught.value.cause_response_code == code


def test_a_lost_commit_is_recognised_by_the_write_id(stubber: Stubber) -> None:
    # attempt 1: the server committed but answered 500; attempt 2: the guard finds the child, and the item it
    # returns carries this write's token: the write is ours, so it is a success, not a duplicate.
    stubber.add_client_error("transact_write_items", "InternalServerError", "oops", http_status_code=500)
    stored = {"pk": {"S": "POST#a91f"}, "sk": {"S": "LIKE#USER#7c20"}, "liked_at": {"N": "1"},
              "_cwid": {"S": TOKEN}}
    cancelled(stubber, {"Code": "ConditionalCheckFailed", "Item": stored}, NONE)
    duplicates: List[Any] = []
    with signals.duplicate_rejected.connected_to(lambda sender, **kw: duplicates.append(kw)):
        result = save(RetryPolicy(base_delay=0))
    assert result.recovered and result.attempts == 2 and len(result.changes) == 1
    assert duplicates == []


def test_someone_elses_child_is_a_duplicate(stubber: Stubber) -> None:
    stored = {"pk": {"S": "POST#a91f"}, "sk": {"S": "LIKE#USER#7c20"}, "liked_at": {"N": "1"},
              "_cwid": {"S": "another-write"}}
    cancelled(stubber, {"Code": "ConditionalCheckFailed", "Item": stored}, NONE)
    with pytest.raises(DuplicateChildError):
        save(RetryPolicy())


def test_non_retryable_errors_fail_at_once(stubber: Stubber) -> None:
    stubber.add_client_error("transact_write_items", "ValidationException", "Item size has exceeded the maximum")
    with pytest.raises(TransactionError, match="Item size has exceeded"):
        save(RetryPolicy(sleep=Sleeps()))


def test_a_retry_policy_must_allow_one_attempt() -> None:
    with pytest.raises(ConfigurationError):
        RetryPolicy(max_attempts=0)


def test_classification_of_connection_failures() -> None:
    import botocore.exceptions as be

    assert classify(be.EndpointConnectionError(endpoint_url="http://127.0.0.1:9")).ambiguous is False
    assert classify(be.ConnectTimeoutError(endpoint_url="http://127.0.0.1:9")).ambiguous is False
    assert classify(be.ReadTimeoutError(endpoint_url="http://127.0.0.1:9")).ambiguous is True
    assert classify(be.ConnectionClosedError(endpoint_url="http://127.0.0.1:9")).ambiguous is True
    assert classify(be.NoCredentialsError()) is None


def test_a_cancellation_naming_no_cause_is_a_clear_error(stubber: Stubber) -> None:
    cancelled(stubber, NONE, NONE)
    with pytest.raises(TransactionError, match="without naming a cause"):
        save(RetryPolicy())


def test_a_duplicate_flagged_beside_a_conflict_is_still_a_duplicate(stubber: Stubber) -> None:
    stored = {"pk": {"S": "POST#a91f"}, "sk": {"S": "LIKE#USER#7c20"}, "liked_at": {"N": "1"}}
    cancelled(stubber, {"Code": "ConditionalCheckFailed", "Item": stored}, CONFLICT)
    transaction = CountedTransaction(token=TOKEN, retry=RetryPolicy(sleep=Sleeps()))
    transaction.save(like())
    with pytest.raises(DuplicateChildError):
        transaction.commit()


def test_exhausted_retries_carry_the_token_to_retry_with(stubber: Stubber) -> None:
    stubber.add_client_error("transact_write_items", "InternalServerError", "oops", http_status_code=500)
    with pytest.raises(RetriesExhaustedError) as caught:
        save(RetryPolicy(max_attempts=1))
    assert caught.value.token == TOKEN and caught.value.ambiguous


def test_a_token_reused_for_another_request_has_its_own_error(stubber: Stubber) -> None:
    from pynamodb_counters.exceptions import IdempotencyMismatchError

    stubber.add_client_error("transact_write_items", "IdempotentParameterMismatchException", "token reused")
    with pytest.raises(IdempotencyMismatchError) as caught:
        save(RetryPolicy(sleep=Sleeps()))
    assert isinstance(caught.value, TransactionError)
    assert caught.value.cause_response_code == "IdempotentParameterMismatchException"
