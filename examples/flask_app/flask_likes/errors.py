"""
JSON error responses, and what the library's errors mean to an HTTP client.
"""
from __future__ import annotations

import logging

from flask import Flask
from flask.typing import ResponseReturnValue
from pynamodb_counters.exceptions import CounterUnderflowError, RetriesExhaustedError, TransactionError
from werkzeug.exceptions import HTTPException

__all__ = ["register_error_handlers"]

log = logging.getLogger(__name__)


def http_error(error: HTTPException) -> ResponseReturnValue:
    """Any ``abort()``: ``{"error": description}`` with its status."""
    return {"error": error.description}, error.code or 500


def retries_exhausted(error: RetriesExhaustedError) -> ResponseReturnValue:
    """503: DynamoDB stayed busy. The client may retry, with the same ``Idempotency-Key`` if it sent one."""
    body = {"error": "DynamoDB is busy; retry", "may_have_committed": error.ambiguous}
    return body, 503, {"Retry-After": "1"}


def transaction_rejected(error: TransactionError) -> ResponseReturnValue:
    """422 for an ``Idempotency-Key`` reused for another request (DynamoDB only); 500 otherwise."""
    if error.cause_response_code == "IdempotentParameterMismatchException":
        return {"error": "this Idempotency-Key was used for a different request"}, 422
    log.error("counted write rejected: %s", error)
    return {"error": "internal error"}, 500


def counter_underflow(error: CounterUnderflowError) -> ResponseReturnValue:
    """500: a counter has drifted below its children; an operator must recount and ``set_counter()``."""
    log.error("counter drift on %s %s: %s", error.model.__name__ if error.model else "?", error.key, error)
    return {"error": "internal error"}, 500


def register_error_handlers(app: Flask) -> None:
    """Install the handlers above on ``app``."""
    app.register_error_handler(HTTPException, http_error)
    app.register_error_handler(RetriesExhaustedError, retries_exhausted)
    app.register_error_handler(TransactionError, transaction_rejected)
    app.register_error_handler(CounterUnderflowError, counter_underflow)
