"""Handlers on the botocore clients that the counted writes send with: to count the ``TransactWriteItems``
requests made, or to break a request on purpose."""
from __future__ import annotations

import contextlib
from typing import Any, Iterator, List

from pynamodb_counters._send import transact_client


@contextlib.contextmanager
def transact_requests(*models: type) -> Iterator[List[str]]:
    """Every TransactWriteItems request the counted writes' clients send for ``models``, as botocore's
    ``before-send`` sees it (once per HTTP attempt, whatever the answer)."""
    sent: List[str] = []

    def record(**_: Any) -> None:
        sent.append("TransactWriteItems")

    with hooked("before-send.dynamodb.TransactWriteItems", record, *models):
        yield sent


@contextlib.contextmanager
def hooked(event: str, handler: Any, *models: type) -> Iterator[None]:
    """``handler`` registered for ``event`` on the counted writes' clients of ``models``."""
    clients = {id(client): client for client in (transact_client(model) for model in models)}
    for client in clients.values():
        client.meta.events.register(event, handler)
    try:
        yield
    finally:
        for client in clients.values():
            client.meta.events.unregister(event, handler)
