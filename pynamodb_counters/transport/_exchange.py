"""
What both drivers do around each request, written once: PynamoDB's send signals and the seam's interceptors
(:class:`Exchange`), the client settings read from the model's PynamoDB connection, and the error for a client
that cannot be made. A driver only makes the client and sends.
"""
from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple, Type

import botocore.exceptions
from botocore import xform_name
from pynamodb.signals import post_dynamodb_send, pre_dynamodb_send

from ..exceptions import TransactionError
from ._calls import Answer, Call
from ._intercept import on_request, on_response

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.models import Model

__all__ = ["BOTOCORE_ERRORS", "Exchange", "announce", "client_settings", "extra_headers_hook", "method_of",
           "not_made", "pynamodb_connection", "settled"]

log = logging.getLogger("pynamodb_counters.write._send")


BOTOCORE_ERRORS: Tuple[Type[Exception], ...] = (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError)
"""What a request may fail with, under either driver (aiobotocore raises botocore's exceptions)."""


class Exchange:
    """One request's bookkeeping, the same under both drivers. Made once the client is (a client that cannot be
    made raises before any signal): it sends PynamoDB's ``pre_dynamodb_send`` and asks the seam's interceptors;
    where one answered or failed the request unsent, :attr:`answer` holds that. Else the driver sends
    :attr:`call` and hands over the response (:meth:`received`) or the botocore error (:meth:`failed`).
    """

    __slots__ = ("call", "sender", "ticket", "answer")

    def __init__(self, call: Call, sender: Any) -> None:
        self.call = call
        self.sender = sender
        self.ticket = announce(sender, call)
        self.answer: Optional[Answer] = None
        try:
            canned = on_request(call)
        except BOTOCORE_ERRORS as error:
            self.answer = Answer(error=error)
        else:
            if canned is not None:
                self.answer = self._settled(canned)

    def received(self, response: Dict[str, Any]) -> Answer:
        """The answer to a response DynamoDB sent, as the interceptors pass it on (one may lose it)."""
        try:
            response = on_response(self.call, response)
        except BOTOCORE_ERRORS as error:
            return Answer(error=error)
        return self._settled(response)

    @staticmethod
    def failed(error: BaseException) -> Answer:
        """The answer to a request that raised a botocore error (PynamoDB sends no ``post_dynamodb_send``)."""
        return Answer(error=error)

    def _settled(self, response: Dict[str, Any]) -> Answer:
        settled(self.sender, self.call, self.ticket)
        return Answer(response)


def pynamodb_connection(model: Type[Model]) -> Any:
    """``model``'s PynamoDB connection (``pynamodb.connection.Connection``): the sender of PynamoDB's
    ``pre_dynamodb_send`` / ``post_dynamodb_send`` signals for its requests, and what its clients' settings are
    read from."""
    return model._get_connection().connection


def client_settings(connection: Any) -> Dict[str, Any]:
    """A client's settings (botocore's ``Config`` arguments) as ``connection`` (a PynamoDB connection) configures
    its own, but for botocore's retries, which are off: the library retries in one place (``_resend``) so that
    every attempt is seen, a hidden retry after a lost response looking like a duplicate."""
    return dict(
        parameter_validation=False,  # as PynamoDB: the request is built by PynamoDB itself
        connect_timeout=connection._connect_timeout_seconds,
        read_timeout=connection._read_timeout_seconds,
        max_pool_connections=connection._max_pool_connections,
        retries={"mode": "standard", "total_max_attempts": 1},
    )


def extra_headers_hook(connection: Any) -> Any:
    """The botocore ``before-send`` hook adding ``connection``'s ``Meta.extra_headers``, or ``None``: PynamoDB 6's
    own hook, or one that adds them as PynamoDB 5 does as it sends."""
    before_send = getattr(connection, "_before_send", None)
    if before_send is not None:
        return before_send
    headers = getattr(connection, "_extra_headers", None)
    return _HeaderAdder(headers) if headers else None


class _HeaderAdder:
    """A botocore ``before-send`` hook adding a connection's ``Meta.extra_headers`` to each request."""

    def __init__(self, headers: Dict[str, str]) -> None:
        self.headers = dict(headers)

    def __call__(self, request: Any, **_: Any) -> None:
        request.headers.update(self.headers)


_methods: Dict[str, str] = {}


def method_of(operation: str) -> str:
    """botocore's client method for ``operation`` (``TransactWriteItems``: ``transact_write_items``)."""
    method = _methods.get(operation)
    if method is None:
        method = _methods[operation] = xform_name(operation)
    return method


def not_made(model: Type[Model], error: Exception) -> TransactionError:
    """The error of a client that cannot be made (no region, bad credentials settings...)."""
    return TransactionError(f"cannot create a DynamoDB client for {model.__name__}: {error}", error)


def announce(sender: Any, call: Call) -> Optional[uuid.UUID]:
    """Send PynamoDB's ``pre_dynamodb_send`` for ``call`` as its own ``dispatch()`` does (a transaction names no
    single table), and return the request's id for :func:`settled` (``None`` where nobody listens)."""
    if not (pre_dynamodb_send.receivers or post_dynamodb_send.receivers):
        return None
    request = uuid.uuid4()
    _signal(pre_dynamodb_send, sender, call, request)
    return request


def settled(sender: Any, call: Call, request: Optional[uuid.UUID]) -> None:
    """Send PynamoDB's ``post_dynamodb_send`` for ``call``, answered with a response (PynamoDB sends none for a
    request that raised)."""
    if request is not None:
        _signal(post_dynamodb_send, sender, call, request)


def _signal(signal: Any, sender: Any, call: Call, request: uuid.UUID) -> None:
    """A receiver's error is logged, as PynamoDB does."""
    if not signal.receivers:
        return
    try:
        signal.send(sender, operation_name=call.operation, table_name=call.table, req_uuid=request)
    except Exception:
        log.exception("a %s receiver raised", signal.name)
