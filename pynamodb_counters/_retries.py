"""
How counted writes retry: which failures are transient, which may have committed, and how long to wait.

Pure: no I/O. The sender (``_connection``) applies it.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

import botocore.exceptions

from .exceptions import ConfigurationError

__all__ = ["DEFAULT_RETRY_POLICY", "Failure", "RetryPolicy", "classify"]

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

    :param max_attempts: requests per write, the first included (at least 1).
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
