"""
The sync driver: runs a decision loop (``_calls``), sending each request through a botocore client configured as
the model's PynamoDB connection configures its own (:func:`client_of`), on the calling thread.
"""
from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any, Type, TypeVar

import botocore.config
import botocore.exceptions

from ._calls import Answer, Call, Steps, Wait
from ._exchange import (
    BOTOCORE_ERRORS,
    Exchange,
    client_settings,
    extra_headers_hook,
    method_of,
    not_made,
    pynamodb_connection,
)

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.models import Model

__all__ = ["client_of", "request", "run", "transact_client"]

T = TypeVar("T")


def run(steps: Steps[T]) -> T:
    """Run ``steps`` to its end: each call sent (:func:`request`), each wait slept; returns what it returns."""
    answer = None
    while True:
        try:
            step = steps.send(answer)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        if isinstance(step, Wait):
            step.sleep(step.seconds)
            answer = None
        else:
            answer = request(step)


def request(call: Call) -> Answer:
    """Send ``call`` once, with PynamoDB's send signals around it and the seam's interceptors
    (``_exchange.Exchange``).

    :raises TransactionError: the client cannot be made (no region, bad credentials settings...).
    """
    sender = pynamodb_connection(call.model)
    client = _client(call.model, sender)
    exchange = Exchange(call, sender)
    if exchange.answer is not None:
        return exchange.answer
    try:
        response = getattr(client, method_of(call.operation))(**call.parameters)
    except BOTOCORE_ERRORS as error:
        return exchange.failed(error)
    return exchange.received(response)


_clients: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_clients_lock = threading.Lock()


def transact_client(model: Type[Model]) -> Any:
    """The botocore DynamoDB client the library sends ``model``'s requests with: configured as its PynamoDB
    connection configures its own (endpoint, region, credentials, parameter validation off, timeouts, pool size,
    extra headers and its ``before-send`` hook), but for botocore's retries, which are off (see
    ``_exchange.client_settings``)."""
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
            client = connection.session.create_client("dynamodb", connection.region, endpoint_url=connection.host,
                                                      config=botocore.config.Config(
                                                          **client_settings(connection)))
            hook = extra_headers_hook(connection)
            if hook is not None:
                client.meta.events.register_first("before-send.*.*", hook)
            _clients[connection] = client
        return client


def _client(model: Type[Model], connection: Any) -> Any:
    client = _clients.get(connection)
    if client is not None:
        return client
    try:
        return client_of(connection)
    except botocore.exceptions.BotoCoreError as error:
        raise not_made(model, error) from error
