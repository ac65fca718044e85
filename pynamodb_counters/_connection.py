"""
The sender: the TransactWriteItems of every counted write, repair and reshard. One request, retried with
jittered exponential backoff, every attempt carrying the same ``ClientRequestToken`` and sent the PynamoDB way:
a client configured as the model's PynamoDB connection configures its own, and PynamoDB's
``pre_dynamodb_send`` / ``post_dynamodb_send`` signals around each attempt, so that an application's
instrumentation sees counted writes as PynamoDB's own.
"""
from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Type

import botocore.exceptions
from pynamodb.constants import TRANSACT_WRITE_ITEMS
from pynamodb.signals import post_dynamodb_send, pre_dynamodb_send

from ._compat import client_of, pynamodb_connection
from ._plans import Sent
from ._retries import DEFAULT_RETRY_POLICY, RetryPolicy, classify
from .exceptions import IdempotencyMismatchError, RetriesExhaustedError, TransactionError

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.models import Model

__all__ = ["send"]

log = logging.getLogger(__name__)


def _signal(signal: Any, sender: Any, request: Optional[uuid.UUID]) -> None:
    """PynamoDB's ``pre_dynamodb_send`` or ``post_dynamodb_send``, as its own ``dispatch()`` sends them for a
    TransactWriteItems (which names no single table); a receiver's error is logged, as PynamoDB does."""
    if not signal.receivers:
        return
    try:
        signal.send(sender, operation_name=TRANSACT_WRITE_ITEMS, table_name=None, req_uuid=request)
    except Exception:
        log.exception("a %s receiver raised", signal.name)


def send(model: Type[Model], items: List[Dict[str, Any]], token: str, *, policy: Optional[RetryPolicy] = None,
         return_consumed_capacity: str = "TOTAL", on_request: Optional[Callable[[], None]] = None) -> Sent:
    """Send ``items`` as one TransactWriteItems through ``model``'s connection settings.

    Transient failures (TransactionConflict cancellations, throttling, TransactionInProgress, 5xx, connection
    errors and timeouts) are retried under ``policy`` with the same token.

    :param on_request: called once per request made (each attempt that botocore answered or failed with its own
      error), whatever the outcome: how a caller counts requests, failed ones included.
    :raises TransactionError: a failure retrying cannot fix (validation, missing table, credentials...).
    :raises RetriesExhaustedError: transient failures outlasted ``policy.max_attempts``.
    """
    policy = policy or DEFAULT_RETRY_POLICY
    sender = pynamodb_connection(model)
    try:
        client = client_of(sender)
    except botocore.exceptions.BotoCoreError as error:
        raise TransactionError(f"cannot create a DynamoDB client for {model.__name__}: {error}", error) from error
    ambiguous = False
    last: Optional[BaseException] = None
    for attempt in range(1, policy.max_attempts + 1):
        request = uuid.uuid4() if pre_dynamodb_send.receivers or post_dynamodb_send.receivers else None
        _signal(pre_dynamodb_send, sender, request)
        try:
            response: Dict[str, Any] = client.transact_write_items(
                TransactItems=items, ClientRequestToken=token, ReturnConsumedCapacity=return_consumed_capacity)
        except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as error:
            if on_request is not None:
                on_request()
            failure = classify(error)
            if failure is None:
                if isinstance(error, botocore.exceptions.ClientError) and \
                        error.response.get("Error", {}).get("Code") == "TransactionCanceledException":
                    return Sent(None, list(error.response.get("CancellationReasons") or []), error, attempt,
                                ambiguous)
                if isinstance(error, botocore.exceptions.ClientError) and \
                        error.response.get("Error", {}).get("Code") == "IdempotentParameterMismatchException":
                    raise IdempotencyMismatchError(f"token {token!r} was used within 10 minutes for a different "
                                                   f"request: {error}", error) from error
                raise TransactionError(f"DynamoDB rejected the transaction: {error}", error) from error
            ambiguous = ambiguous or failure.ambiguous
            last = error
            log.info("counted write %s: attempt %d/%d failed (%s%s)", token, attempt, policy.max_attempts,
                     failure.reason, ", may have committed" if failure.ambiguous else "")
        else:
            if on_request is not None:
                on_request()
            _signal(post_dynamodb_send, sender, request)
            return Sent(response, None, None, attempt, ambiguous)
        if attempt < policy.max_attempts:
            policy.sleep(policy.delay(attempt))
    outcome = "may or may not have been applied" if ambiguous else "was not applied"
    raise RetriesExhaustedError(
        f"counted write gave up after {policy.max_attempts} attempts (last: {last}); it {outcome}. Counters stay "
        f"exact either way: the same write can be retried safely", last, attempts=policy.max_attempts,
        ambiguous=ambiguous, token=token)
