"""
The port's vocabulary: what a decision loop asks of DynamoDB, and what it is answered.

A decision loop (a commit, a recovery, a reshape, a read of shard items) is a generator. It yields a :class:`Call`
(one request it needs) or a :class:`Wait` (a backoff), and is sent back an :class:`Answer` (the response, or the
error the request raised) or ``None`` after a wait; it never sends anything itself. A driver runs it: the sync one
(``_sync.run``) through botocore, the async one (``_async.run``) through aiobotocore. Every decision (what to ask,
whether to retry, what a refusal means) is written once, in the loop; the drivers only carry requests.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, Generator, Mapping, NamedTuple, Optional, Type, TypeVar, Union

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.models import Model

__all__ = ["Answer", "Call", "Step", "Steps", "Wait"]

T = TypeVar("T")


class Call(NamedTuple):
    """One DynamoDB request (a named tuple: made once per request, on every counted write's path).

    :ivar model: the model whose PynamoDB connection settings send it (endpoint, region, credentials, timeouts,
      headers), and whose connection sends PynamoDB's ``pre_dynamodb_send`` / ``post_dynamodb_send`` for it.
    :ivar operation: DynamoDB's name for it (``"TransactWriteItems"``, ``"UpdateItem"``, ``"GetItem"``...), as
      PynamoDB's ``dispatch()`` names it to the signals' receivers.
    :ivar parameters: the request's parameters, as botocore takes them.
    """

    model: Type[Model]
    operation: str
    parameters: Mapping[str, Any]

    @property
    def table(self) -> Optional[str]:
        """The table it names (``None`` for a transaction, as PynamoDB tells its signals)."""
        table = self.parameters.get("TableName")
        return table if isinstance(table, str) else None


class Wait(NamedTuple):
    """A backoff of ``seconds`` before the next request, with the retry policy's ``sleep`` (the sync driver calls
    it; the async driver awaits ``asyncio.sleep`` for the default ``time.sleep`` and calls any other, awaiting
    what it returns if it is awaitable)."""

    seconds: float
    sleep: Callable[[float], Any]


class Answer(NamedTuple):
    """What a :class:`Call` got: its ``response``, or the ``error`` it raised (a botocore ``ClientError`` or
    ``BotoCoreError``: both drivers raise botocore's exceptions)."""

    response: Optional[Dict[str, Any]] = None
    error: Optional[BaseException] = None


Step = Union[Call, Wait]
Steps = Generator[Step, Optional[Answer], T]
"""A decision loop returning ``T``: it yields steps and is sent each one's answer (``None`` after a wait)."""
