"""
Sending: the one way every TransactWriteItems of the library (counted writes, repairs, reshards) reaches DynamoDB,
and every UpdateItem of a count from the stream (:func:`send_update`).

* :func:`send` sends one request, retried under a :class:`RetryPolicy` with jittered exponential backoff, every
  attempt carrying the same ``ClientRequestToken``;
* through a botocore client configured as the model's PynamoDB connection configures its own
  (:func:`transact_client`), with botocore's own retries off, so that every attempt is seen here;
* with PynamoDB's ``pre_dynamodb_send`` before each attempt and ``post_dynamodb_send`` after one that succeeds,
  as PynamoDB's own ``dispatch()`` sends them, so that an application's instrumentation sees counted writes as
  PynamoDB's own;
* and answers with :class:`Sent`: the response, or the cancellation that retrying cannot fix.

Which failures are transient, and which may have committed, is decided by :func:`classify` (pure).
"""
from __future__ import annotations

import logging
import random
import threading
import time
import uuid
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Type

import botocore.config
import botocore.exceptions
from pynamodb.constants import TRANSACT_WRITE_ITEMS, UPDATE_ITEM
from pynamodb.signals import post_dynamodb_send, pre_dynamodb_send

from ..exceptions import ConfigurationError, IdempotencyMismatchError, RetriesExhaustedError, TransactionError

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.models import Model

__all__ = ["DEFAULT_RETRY_POLICY", "RETRYABLE_REASONS", "Failure", "RetryPolicy", "Sent", "classify", "client_of",
           "pynamodb_connection", "send", "send_update", "transact_client", "Updated"]

log = logging.getLogger(__name__)

# Error codes DynamoDB answers when it did not apply the request and a later attempt may succeed.
THROTTLING_CODES = frozenset({
    "ThrottlingException", "ProvisionedThroughputExceededException", "RequestLimitExceeded",
    "LimitExceededException",
})
# Cancellation reason codes that mean "try again", as long as no ConditionalCheckFailed came with them.
RETRYABLE_REASONS = frozenset({"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded",
                               "None"})


@dataclass(frozen=True)
class Failure:
    """A transient failure of one attempt.

    :ivar reason: a short description (an error code or exception name), for logs and errors.
    :ivar ambiguous: ``True`` when the server may have committed the attempt (the response was lost or the server
      failed mid-request), ``False`` when it certainly did not.
    """

    reason: str
    ambiguous: bool


def classify(error: BaseException) -> Optional[Failure]:
    """Classify an exception from one TransactWriteItems attempt.

    :returns: a :class:`Failure` when retrying may succeed, ``None`` when it cannot (a cancellation with a
      condition failure, a validation error, a missing table, denied access...).
    """
    if isinstance(error, botocore.exceptions.ClientError):
        response: Mapping[str, Any] = error.response
        code = response.get("Error", {}).get("Code", "")
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        if code == "TransactionCanceledException":
            reasons: Sequence[Mapping[str, Any]] = response.get("CancellationReasons") or []
            codes = {reason.get("Code", "None") for reason in reasons}
            if codes and codes <= RETRYABLE_REASONS and codes != {"None"}:
                return Failure(",".join(sorted(codes - {"None"})), ambiguous=False)
            return None
        if code == "TransactionInProgressException":
            return Failure(code, ambiguous=True)
        if code in THROTTLING_CODES:
            return Failure(code, ambiguous=False)
        if isinstance(status, int) and status >= 500:
            return Failure(code or f"HTTP {status}", ambiguous=True)
        return None
    if isinstance(error, botocore.exceptions.ConnectionError):
        # connect timeouts, refused or unreachable endpoints: the request never reached the server
        return Failure(type(error).__name__, ambiguous=False)
    if isinstance(error, botocore.exceptions.HTTPClientError):
        # read timeouts, connections closed mid-response: the server may have committed
        return Failure(type(error).__name__, ambiguous=True)
    return None


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded, fully jittered exponential backoff for counted writes.

    Every attempt reuses the write's ``ClientRequestToken``.

    :param max_attempts: requests per write, the first included (at least 1): a counted write sent again after a
      recovery (``_recoveries``) continues the count of its earlier rounds.
    :param base_delay: seconds; after failed attempt *n* (from 1) the wait is a random time in
      ``[0, min(max_delay, base_delay * 2**(n - 1))]``.
    :param max_delay: the cap on one wait, in seconds.
    :param sleep: how to wait (tests pass a recorder).
    """

    max_attempts: int = 8
    base_delay: float = 0.025
    max_delay: float = 1.0
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ConfigurationError(f"RetryPolicy.max_attempts must be at least 1, not {self.max_attempts}")
        if self.base_delay < 0 or self.max_delay < 0:
            raise ConfigurationError("RetryPolicy delays cannot be negative")

    def delay(self, attempt: int, rng: Optional[random.Random] = None) -> float:
        """The wait after failed attempt number ``attempt`` (1-based)."""
        ceiling = min(self.max_delay, self.base_delay * (2 ** (attempt - 1)))
        return (rng or _rng).uniform(0.0, ceiling)


_rng = random.Random()

DEFAULT_RETRY_POLICY = RetryPolicy()


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


_clients: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_clients_lock = threading.Lock()


def transact_client(model: Type[Model]) -> Any:
    """A botocore DynamoDB client configured as ``model``'s PynamoDB connection configures its own (endpoint,
    region, credentials, parameter validation off, timeouts, pool size, extra headers and its ``before-send``
    hook), but for botocore's retries, which are off.

    Counted writes retry in one place (``send``) so that every attempt is seen:
    a hidden retry after a lost response would look like a duplicate.
    """
    return client_of(pynamodb_connection(model))


def client_of(connection: Any) -> Any:
    """:func:`transact_client` for a PynamoDB connection (``pynamodb.connection.Connection``): made once, then
    found without taking the lock."""
    client = _clients.get(connection)
    if client is not None:
        return client
    with _clients_lock:
        client = _clients.get(connection)
        if client is None:
            config = botocore.config.Config(
                parameter_validation=False,  # as PynamoDB: the request is built by PynamoDB itself
                connect_timeout=connection._connect_timeout_seconds,
                read_timeout=connection._read_timeout_seconds,
                max_pool_connections=connection._max_pool_connections,
                retries={"mode": "standard", "total_max_attempts": 1},
            )
            client = connection.session.create_client("dynamodb", connection.region, endpoint_url=connection.host,
                                                      config=config)
            before_send = getattr(connection, "_before_send", None)  # PynamoDB 6: Meta.extra_headers
            if before_send is not None:
                client.meta.events.register_first("before-send.*.*", before_send)
            elif getattr(connection, "_extra_headers", None):  # PynamoDB 5 adds them as it sends
                client.meta.events.register_first("before-send.*.*", _HeaderAdder(connection._extra_headers))
            _clients[connection] = client
        return client


def pynamodb_connection(model: Type[Model]) -> Any:
    """``model``'s PynamoDB connection (``pynamodb.connection.Connection``): the sender of PynamoDB's
    ``pre_dynamodb_send`` / ``post_dynamodb_send`` signals for its requests."""
    return model._get_connection().connection


class _HeaderAdder:
    """A botocore ``before-send`` hook adding a connection's ``Meta.extra_headers`` to each request."""

    def __init__(self, headers: Dict[str, str]) -> None:
        self.headers = dict(headers)

    def __call__(self, request: Any, **_: Any) -> None:
        request.headers.update(self.headers)


def _signal(signal: Any, sender: Any, request: Optional[uuid.UUID], operation: str = TRANSACT_WRITE_ITEMS,
            table: Optional[str] = None) -> None:
    """PynamoDB's ``pre_dynamodb_send`` or ``post_dynamodb_send``, as its own ``dispatch()`` sends them (a
    TransactWriteItems names no single table); a receiver's error is logged, as PynamoDB does."""
    if not signal.receivers:
        return
    try:
        signal.send(sender, operation_name=operation, table_name=table, req_uuid=request)
    except Exception:
        log.exception("a %s receiver raised", signal.name)


def _sender_and_client(model: Type[Model]) -> Tuple[Any, Any]:
    """``model``'s PynamoDB connection (the signals' sender) and its client (:func:`client_of`).

    :raises TransactionError: the client cannot be made (no region, bad credentials settings...).
    """
    sender = pynamodb_connection(model)
    try:
        return sender, client_of(sender)
    except botocore.exceptions.BotoCoreError as error:
        raise TransactionError(f"cannot create a DynamoDB client for {model.__name__}: {error}", error) from error


def send(model: Type[Model], items: List[Dict[str, Any]], token: str, *, policy: Optional[RetryPolicy] = None,
         made: int = 0, return_consumed_capacity: str = "TOTAL",
         on_request: Optional[Callable[[], None]] = None) -> Sent:
    """Send ``items`` as one TransactWriteItems through ``model``'s connection settings.

    Transient failures (TransactionConflict cancellations, throttling, TransactionInProgress, 5xx, connection
    errors and timeouts) are retried under ``policy`` with the same token.

    :param made: the requests the same write made before (its earlier rounds, refused and recovered): they count
      against ``policy.max_attempts``, this send making at least one.
    :param on_request: called once per request made (each attempt that botocore answered or failed with its own
      error), whatever the outcome: how a caller counts requests, failed ones included.
    :raises TransactionError: a failure retrying cannot fix (validation, missing table, credentials...).
    :raises RetriesExhaustedError: transient failures outlasted ``policy.max_attempts`` (its ``attempts``: the
      write's requests, ``made`` included).
    """
    policy = policy or DEFAULT_RETRY_POLICY
    sender, client = _sender_and_client(model)
    ambiguous = False
    last: Optional[BaseException] = None
    last_attempt = max(policy.max_attempts, made + 1)
    for attempt in range(made + 1, last_attempt + 1):
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
                    return Sent(None, list(error.response.get("CancellationReasons") or []), error,
                                attempt - made, ambiguous)
                if isinstance(error, botocore.exceptions.ClientError) and \
                        error.response.get("Error", {}).get("Code") == "IdempotentParameterMismatchException":
                    raise IdempotencyMismatchError(f"token {token!r} was used within 10 minutes for a different "
                                                   f"request: {error}", error) from error
                raise TransactionError(f"DynamoDB rejected the transaction: {error}", error) from error
            ambiguous = ambiguous or failure.ambiguous
            last = error
            log.info("counted write %s: attempt %d/%d failed (%s%s)", token, attempt, last_attempt,
                     failure.reason, ", may have committed" if failure.ambiguous else "")
        else:
            if on_request is not None:
                on_request()
            _signal(post_dynamodb_send, sender, request)
            return Sent(response, None, None, attempt - made, ambiguous)
        if attempt < last_attempt:
            policy.sleep(policy.delay(attempt))
    outcome = "may or may not have been applied" if ambiguous else "was not applied"
    raise RetriesExhaustedError(
        f"counted write gave up after {last_attempt} attempts (last: {last}); it {outcome}. Counters stay "
        f"exact either way: the same write can be retried safely", last, attempts=last_attempt,
        ambiguous=ambiguous, token=token)


@dataclass(frozen=True)
class Updated:
    """What :func:`send_update` got: the response of an UpdateItem applied, or the item its failed condition
    returned.

    :ivar response: the UpdateItem response, when it was applied.
    :ivar refused: when its condition failed, the item as stored (``ALL_OLD``), ``{}`` where absent.
    :ivar attempts: how many requests were made.
    """

    response: Optional[Dict[str, Any]]
    refused: Optional[Dict[str, Any]]
    attempts: int


def send_update(model: Type[Model], request: Dict[str, Any], *, policy: Optional[RetryPolicy] = None) -> Updated:
    """Send ``request`` (a transaction's Update action: table, key, expressions) as one UpdateItem through
    ``model``'s connection settings, returning the new item (``ALL_NEW``) and its consumed capacity; a failed
    condition returns the stored item. Transient failures are retried under ``policy``, as :func:`send` retries
    them, with PynamoDB's send signals around each attempt. The caller's update must be safe to apply twice over a
    lost response: its condition must refuse it once applied.

    :raises TransactionError: a failure retrying cannot fix (validation, missing table, credentials...).
    :raises RetriesExhaustedError: transient failures outlasted ``policy.max_attempts``.
    """
    policy = policy or DEFAULT_RETRY_POLICY
    sender, client = _sender_and_client(model)
    table = request.get("TableName")
    ambiguous = False
    last: Optional[BaseException] = None
    for attempt in range(1, policy.max_attempts + 1):
        signalled = uuid.uuid4() if pre_dynamodb_send.receivers or post_dynamodb_send.receivers else None
        _signal(pre_dynamodb_send, sender, signalled, UPDATE_ITEM, table)
        try:
            response: Dict[str, Any] = client.update_item(**request, ReturnValues="ALL_NEW",
                                                          ReturnConsumedCapacity="TOTAL")
        except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as error:
            failure = classify(error)
            if failure is None:
                if isinstance(error, botocore.exceptions.ClientError) and \
                        error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                    return Updated(None, dict(error.response.get("Item") or {}), attempt)
                raise TransactionError(f"DynamoDB rejected the update of {table}: {error}", error) from error
            ambiguous = ambiguous or failure.ambiguous
            last = error
            log.info("update of %s: attempt %d/%d failed (%s%s)", table, attempt, policy.max_attempts,
                     failure.reason, ", may have been applied" if failure.ambiguous else "")
        else:
            _signal(post_dynamodb_send, sender, signalled, UPDATE_ITEM, table)
            return Updated(response, None, attempt)
        if attempt < policy.max_attempts:
            policy.sleep(policy.delay(attempt))
    outcome = "may or may not have been applied" if ambiguous else "was not applied"
    raise RetriesExhaustedError(f"update of {table} gave up after {policy.max_attempts} attempts (last: {last}); it "
                                f"{outcome}", last, attempts=policy.max_attempts, ambiguous=ambiguous, token=None)
