"""Handlers on the botocore clients that the counted writes send with: to count the ``TransactWriteItems``
requests made, or to break a request on purpose."""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Dict, Iterator, List, Optional

from pynamodb.signals import pre_dynamodb_send

from pynamodb_counters.transport import Call, Interceptor, intercepting
from pynamodb_counters.write._send import transact_client
from tests.support.models import Like


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


@contextlib.contextmanager
def unlike_before_the_first_query(pk: str) -> Iterator[List[str]]:
    """A counted unlike of ``pk``'s first like, sent just before the next Query of the children (a PynamoDB
    ``pre_dynamodb_send`` hook): the counter and the children both drop by one between the audit's read of the
    parent and its count."""
    done: List[str] = []

    def unlike(sender: Any, operation_name: str, **_: Any) -> None:
        if operation_name == "Query" and not done:
            done.append(pk)
            Like.get(pk, "LIKE#USER#0").delete()

    pre_dynamodb_send.connect(unlike, weak=False)
    try:
        yield done
    finally:
        pre_dynamodb_send.disconnect(unlike)


class BeforeTransactions(Interceptor):
    """Records the token of each TransactWriteItems the write under test sends, and runs ``before[n]`` (another
    writer's work) just before its n-th; the other writer's own requests pass untouched."""

    def __init__(self, before: Dict[int, Callable[[], None]]) -> None:
        self.before = before
        self.tokens: List[str] = []
        self.busy = False

    def watch(self, before: Dict[int, Callable[[], None]]) -> List[str]:
        """Count afresh from the next TransactWriteItems, running ``before[n]`` before the n-th; the tokens."""
        self.before = before
        self.tokens = []
        return self.tokens

    def request(self, call: Call) -> Optional[Dict[str, Any]]:
        if call.operation != "TransactWriteItems" or self.busy:
            return None
        self.tokens.append(call.parameters["ClientRequestToken"])
        other = self.before.get(len(self.tokens))
        if other is not None:
            self.busy = True
            try:
                other()
            finally:
                self.busy = False
        return None


@contextlib.contextmanager
def before_transactions(before: Dict[int, Callable[[], None]]) -> Iterator[List[str]]:
    """The tokens of the TransactWriteItems the write under test sends, ``before[n]`` run just before its n-th
    (:class:`BeforeTransactions`, installed through the transport seam)."""
    seen = BeforeTransactions(before)
    with intercepting(seen):
        yield seen.tokens


class Recording(Interceptor):
    """Every request the library sends (under either driver), as it is sent."""

    def __init__(self) -> None:
        self.calls: List[Call] = []

    def request(self, call: Call) -> Optional[Dict[str, Any]]:
        self.calls.append(call)
        return None


@contextlib.contextmanager
def recorded() -> Iterator[List[Call]]:
    """The requests the library sends while the block runs (:class:`Recording`, through the transport seam)."""
    recording = Recording()
    with intercepting(recording):
        yield recording.calls
