"""
The async driver: runs a decision loop (``_calls``) on the running event loop, sending each request through an
aiobotocore client (the ``async`` extra) configured as the model's PynamoDB connection configures its own.

Clients are made on first use in each event loop, one per PynamoDB connection, and never used from another loop.
They are closed by :func:`aclose`, or else as the loop is shut down (``asyncio.run()`` closes the loop's
asynchronous generators at its end: each loop's clients are held by one, :func:`_closer`).
"""
from __future__ import annotations

import asyncio
import inspect
import time
import weakref
from typing import TYPE_CHECKING, Any, AsyncIterator, List, Optional, Type, TypeVar

import botocore.exceptions

from ..exceptions import MissingExtraError
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

__all__ = ["aclose", "client_of", "request", "run"]

T = TypeVar("T")

INSTALL = 'pip install "pynamodb-counters[async]"'


async def run(steps: Steps[T]) -> T:
    """Run ``steps`` to its end on the running loop: each call sent (:func:`request`), each wait awaited."""
    answer = None
    while True:
        try:
            step = steps.send(answer)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        if isinstance(step, Wait):
            await _wait(step)
            answer = None
        else:
            answer = await request(step)


async def _wait(step: Wait) -> None:
    if step.sleep is time.sleep:  # the default: never block the loop
        await asyncio.sleep(step.seconds)
        return
    waited = step.sleep(step.seconds)
    if inspect.isawaitable(waited):
        await waited


async def request(call: Call) -> Answer:
    """Send ``call`` once, with PynamoDB's send signals around it and the seam's interceptors
    (``_exchange.Exchange``).

    :raises MissingExtraError: aiobotocore is not installed (naming the install command).
    :raises TransactionError: the client cannot be made (no region, bad credentials settings...).
    """
    sender = pynamodb_connection(call.model)
    client = await client_of(call.model, sender)
    exchange = Exchange(call, sender)
    if exchange.answer is not None:
        return exchange.answer
    try:
        response = await getattr(client, method_of(call.operation))(**call.parameters)
    except BOTOCORE_ERRORS as error:
        return exchange.failed(error)
    return exchange.received(response)


class _LoopClients:
    """The clients one event loop made, by PynamoDB connection, with what closes them."""

    def __init__(self) -> None:
        self.clients: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        self.contexts: List[Any] = []  # each client's context, exited to close it
        self.lock = asyncio.Lock()
        self.closer: Optional[AsyncIterator[None]] = None

    async def aclose(self) -> None:
        contexts, self.contexts = self.contexts, []
        self.clients = weakref.WeakKeyDictionary()
        for context in reversed(contexts):
            await context.__aexit__(None, None, None)


_loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopClients] = weakref.WeakKeyDictionary()


async def client_of(model: Type[Model], connection: Any) -> Any:
    """The running loop's aiobotocore client for ``connection`` (``model``'s PynamoDB connection), made on first
    use: its settings are the sync client's (``_exchange.client_settings``), its credentials the connection's
    ``Meta`` ones where given, else aiobotocore's own chain (resolved without blocking the loop)."""
    loop = asyncio.get_running_loop()
    held = _loops.get(loop)
    if held is not None:
        client = held.clients.get(connection)
        if client is not None:
            return client
    else:
        held = _loops[loop] = _LoopClients()
    async with held.lock:
        client = held.clients.get(connection)
        if client is None:
            client = await _made(model, connection, held)
        return client


async def _made(model: Type[Model], connection: Any, held: _LoopClients) -> Any:
    try:
        from aiobotocore.config import AioConfig
        from aiobotocore.session import AioSession
    except ImportError as error:
        raise MissingExtraError(f"the async methods send through aiobotocore, which is not installed: {INSTALL}",
                                error) from error
    if held.closer is None:
        held.closer = _closer(held)
        await held.closer.__anext__()  # the loop now holds it: it closes it (and so the clients) as it shuts down
    session = AioSession()
    key, secret = getattr(connection, "_aws_access_key_id", None), getattr(connection, "_aws_secret_access_key", None)
    if key and secret:
        session.set_credentials(key, secret, getattr(connection, "_aws_session_token", None))
    try:
        context = session.create_client("dynamodb", region_name=connection.region, endpoint_url=connection.host,
                                        config=AioConfig(**client_settings(connection)))
        client = await context.__aenter__()
    except botocore.exceptions.BotoCoreError as error:
        raise not_made(model, error) from error
    hook = extra_headers_hook(connection)
    if hook is not None:
        client.meta.events.register_first("before-send.*.*", hook)
    held.contexts.append(context)
    held.clients[connection] = client
    return client


async def _closer(held: _LoopClients) -> AsyncIterator[None]:
    """Held by the loop (its asynchronous generators are closed as ``asyncio.run()`` ends): closes the loop's
    clients then, where :func:`aclose` did not."""
    try:
        yield
    finally:
        await held.aclose()


async def aclose() -> None:
    """Close the clients the running event loop opened (the next async call opens new ones)."""
    held = _loops.get(asyncio.get_running_loop())
    if held is not None:
        await held.aclose()
