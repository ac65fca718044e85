"""
Resending: the one loop by which every request of the library is retried (counted writes, counts from the
stream, reads of shard items and stored children, reshards), under a :class:`RetryPolicy` with jittered
exponential backoff; the same request every time (a transaction keeps its ``ClientRequestToken``).

Which failures are transient, and which may have been applied, is decided by :func:`classify` (pure). The loop is
a decision loop of the port (``_calls``): it yields the request and the waits, and a driver sends them.
"""
from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, NamedTuple, Optional, Sequence

import botocore.exceptions

from ..exceptions import ConfigurationError, RetriesExhaustedError
from ._calls import Answer, Call, Steps, Wait

__all__ = ["DEFAULT_RETRY_POLICY", "RETRYABLE_REASONS", "Failure", "Resent", "RetryPolicy", "classify", "resend"]

log = logging.getLogger("pynamodb_counters.write._send")  # where the library has always logged its retries

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
    :ivar ambiguous: ``True`` when the server may have applied the attempt (the response was lost or the server
      failed mid-request), ``False`` when it certainly did not.
    """

    reason: str
    ambiguous: bool


def classify(error: BaseException) -> Optional[Failure]:
    """Classify an exception from one attempt.

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
        # read timeouts, connections closed mid-response: the server may have applied it
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
    :param sleep: how to wait (tests pass a recorder). The async methods await ``asyncio.sleep`` for the default
      (``time.sleep``), and call any other, awaiting what it returns where it is awaitable.
    """

    max_attempts: int = 8
    base_delay: float = 0.025
    max_delay: float = 1.0
    sleep: Callable[[float], Any] = field(default=time.sleep, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ConfigurationError(f"RetryPolicy.max_attempts must be at least 1, not {self.max_attempts}")
        if self.base_delay < 0 or self.max_delay < 0:
            raise ConfigurationError("RetryPolicy delays cannot be negative")

    def delay(self, attempt: int, rng: Optional[random.Random] = None) -> float:
        """The wait after failed attempt number ``attempt`` (1-based)."""
        ceiling = min(self.max_delay, self.base_delay * (2 ** (attempt - 1)))
        return (rng or _rng).uniform(0.0, ceiling)

    def wait(self, attempt: int) -> Wait:
        """The backoff after failed attempt number ``attempt``, as a step of a decision loop."""
        return Wait(self.delay(attempt), self.sleep)


_rng = random.Random()

DEFAULT_RETRY_POLICY = RetryPolicy()


class Resent(NamedTuple):
    """What :func:`resend` ended with.

    :ivar answer: the last answer: a response, or an error retrying cannot fix.
    :ivar attempts: the requests this resend made.
    :ivar ambiguous: whether an earlier attempt may have been applied although its response was lost.
    """

    answer: Answer
    attempts: int
    ambiguous: bool


def resend(call: Call, policy: RetryPolicy, what: str, *, made: int = 0,
           on_request: Optional[Callable[[], None]] = None, token: Optional[str] = None,
           advice: str = "") -> Steps[Resent]:
    """Ask for ``call`` until it is answered with a response or an error retrying cannot fix (:func:`classify`),
    within ``policy``: transient failures are asked again after the policy's backoff.

    :param what: what the request is, for the log and the error (``"counted write"``, ``"update of <table>"``).
    :param made: the requests the same write made before (its earlier rounds): they count against
      ``policy.max_attempts``, this resend making at least one.
    :param on_request: called once per request answered (with a response or an error), whatever the outcome.
    :param token: the request's ``ClientRequestToken``, named in the log and carried by the error.
    :param advice: what the error adds after saying whether the request may have been applied.
    :raises RetriesExhaustedError: transient failures outlasted ``policy.max_attempts``.
    """
    ambiguous = False
    last: Optional[BaseException] = None
    last_attempt = max(policy.max_attempts, made + 1)
    for attempt in range(made + 1, last_attempt + 1):
        answer = yield call
        assert answer is not None
        if on_request is not None:
            on_request()
        failure = None if answer.error is None else classify(answer.error)
        if failure is None:
            return Resent(answer, attempt - made, ambiguous)
        ambiguous = ambiguous or failure.ambiguous
        last = answer.error
        log.info("%s%s: attempt %d/%d failed (%s%s)", what, "" if token is None else f" {token}", attempt,
                 last_attempt, failure.reason, ", may have been applied" if failure.ambiguous else "")
        if attempt < last_attempt:
            yield policy.wait(attempt)
    outcome = "may or may not have been applied" if ambiguous else "was not applied"
    raise RetriesExhaustedError(f"{what} gave up after {last_attempt} attempts (last: {last}); it {outcome}{advice}",
                                last, attempts=last_attempt, ambiguous=ambiguous, token=token)
