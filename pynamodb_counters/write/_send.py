"""
Sending: how every TransactWriteItems of the library (counted writes, repairs, reshards) and every UpdateItem of a
count from the stream is asked of DynamoDB, as decision loops of the port (``transport``): :func:`transact` and
:func:`update` yield the request, and a driver sends it; :func:`send` and :func:`send_update` run them on the sync
driver.

* one request, retried by the port's one loop (``transport._resend.resend``) under a :class:`RetryPolicy` with
  jittered exponential backoff, every attempt carrying the same ``ClientRequestToken``;
* through a client configured as the model's PynamoDB connection configures its own, with botocore's own retries
  off, so that every attempt is seen here, and PynamoDB's ``pre_dynamodb_send`` / ``post_dynamodb_send`` around
  each attempt (the drivers send them);
* answered with :class:`Sent`: the response, or the cancellation that retrying cannot fix.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Type

import botocore.exceptions
from pynamodb.constants import TRANSACT_WRITE_ITEMS, UPDATE_ITEM

from ..exceptions import IdempotencyMismatchError, TransactionError
from ..transport._calls import Call, Steps
from ..transport._exchange import pynamodb_connection
from ..transport._resend import DEFAULT_RETRY_POLICY, RETRYABLE_REASONS, Failure, RetryPolicy, classify, resend
from ..transport._sync import client_of, run, transact_client

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.models import Model

__all__ = ["DEFAULT_RETRY_POLICY", "RETRYABLE_REASONS", "Failure", "RetryPolicy", "Sent", "classify", "client_of",
           "pynamodb_connection", "send", "send_update", "transact", "transact_client", "update", "Updated"]


@dataclass(frozen=True)
class Sent:
    """What the last attempt at sending a plan returned: a response, or a cancellation that retrying cannot fix.

    :ivar response: the TransactWriteItems response, when it committed.
    :ivar cancellation_reasons: the ``CancellationReasons`` of a cancelled transaction (``None`` if it committed).
    :ivar error: the cancellation error itself.
    :ivar attempts: how many requests were made.
    :ivar ambiguous: whether an earlier attempt may have committed although its response was lost.
    """

    response: Optional[Dict[str, Any]]
    cancellation_reasons: Optional[List[Dict[str, Any]]]
    error: Optional[botocore.exceptions.ClientError]
    attempts: int
    ambiguous: bool


def transact(model: Type[Model], items: List[Dict[str, Any]], token: str, *, policy: Optional[RetryPolicy] = None,
             made: int = 0, return_consumed_capacity: str = "TOTAL",
             on_request: Optional[Callable[[], None]] = None) -> Steps[Sent]:
    """Ask for ``items`` as one TransactWriteItems through ``model``'s connection settings.

    Transient failures (TransactionConflict cancellations, throttling, TransactionInProgress, 5xx, connection
    errors and timeouts) are asked again under ``policy`` with the same token.

    :param made: the requests the same write made before (its earlier rounds, refused and recovered): they count
      against ``policy.max_attempts``, this send making at least one.
    :param on_request: called once per request made (each attempt that was answered or failed with botocore's
      own error), whatever the outcome: how a caller counts requests, failed ones included.
    :raises TransactionError: a failure retrying cannot fix (validation, missing table, credentials...).
    :raises RetriesExhaustedError: transient failures outlasted ``policy.max_attempts`` (its ``attempts``: the
      write's requests, ``made`` included).
    """
    call = Call(model, TRANSACT_WRITE_ITEMS, dict(TransactItems=items, ClientRequestToken=token,
                                                  ReturnConsumedCapacity=return_consumed_capacity))
    resent = yield from resend(call, policy or DEFAULT_RETRY_POLICY, "counted write", made=made,
                               on_request=on_request, token=token, advice=SAFE_TO_RETRY)
    error = resent.answer.error
    if error is None:
        return Sent(resent.answer.response, None, None, resent.attempts, resent.ambiguous)
    code = error.response.get("Error", {}).get("Code") \
        if isinstance(error, botocore.exceptions.ClientError) else None
    if code == "TransactionCanceledException":
        assert isinstance(error, botocore.exceptions.ClientError)
        return Sent(None, list(error.response.get("CancellationReasons") or []), error, resent.attempts,
                    resent.ambiguous)
    if code == "IdempotentParameterMismatchException":
        raise IdempotencyMismatchError(f"token {token!r} was used within 10 minutes for a different request: {error}",
                                       error) from error
    raise TransactionError(f"DynamoDB rejected the transaction: {error}", error) from error


SAFE_TO_RETRY = ". Counters stay exact either way: the same write can be retried safely"
"""What a counted write's ``RetriesExhaustedError`` adds."""


def send(model: Type[Model], items: List[Dict[str, Any]], token: str, *, policy: Optional[RetryPolicy] = None,
         made: int = 0, return_consumed_capacity: str = "TOTAL",
         on_request: Optional[Callable[[], None]] = None) -> Sent:
    """:func:`transact`, sent by the sync driver."""
    return run(transact(model, items, token, policy=policy, made=made,
                        return_consumed_capacity=return_consumed_capacity, on_request=on_request))


@dataclass(frozen=True)
class Updated:
    """What :func:`update` got: the response of an UpdateItem applied, or the item its failed condition returned.

    :ivar response: the UpdateItem response, when it was applied.
    :ivar refused: when its condition failed, the item as stored (``ALL_OLD``), ``{}`` where absent.
    :ivar attempts: how many requests were made.
    """

    response: Optional[Dict[str, Any]]
    refused: Optional[Dict[str, Any]]
    attempts: int


def update(model: Type[Model], request: Dict[str, Any], *, policy: Optional[RetryPolicy] = None) -> Steps[Updated]:
    """Ask for ``request`` (a transaction's Update action: table, key, expressions) as one UpdateItem through
    ``model``'s connection settings, returning the new item (``ALL_NEW``) and its consumed capacity; a failed
    condition returns the stored item. Transient failures are asked again under ``policy``, as :func:`transact`
    does. The caller's update must be safe to apply twice over a lost response: its condition must refuse it once
    applied.

    :raises TransactionError: a failure retrying cannot fix (validation, missing table, credentials...).
    :raises RetriesExhaustedError: transient failures outlasted ``policy.max_attempts``.
    """
    table = request.get("TableName")
    call = Call(model, UPDATE_ITEM, dict(request, ReturnValues="ALL_NEW", ReturnConsumedCapacity="TOTAL"))
    resent = yield from resend(call, policy or DEFAULT_RETRY_POLICY, f"update of {table}")
    error = resent.answer.error
    if error is None:
        return Updated(resent.answer.response, None, resent.attempts)
    if isinstance(error, botocore.exceptions.ClientError) and \
            error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
        return Updated(None, dict(error.response.get("Item") or {}), resent.attempts)
    raise TransactionError(f"DynamoDB rejected the update of {table}: {error}", error) from error


def send_update(model: Type[Model], request: Dict[str, Any], *, policy: Optional[RetryPolicy] = None) -> Updated:
    """:func:`update`, sent by the sync driver."""
    return run(update(model, request, policy=policy))
