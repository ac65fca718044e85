"""
:class:`CountedTransaction`: counted saves and deletes, and any other PynamoDB writes, committed as one
TransactWriteItems.

It collects writes; :meth:`~CountedTransaction.plan` shows the request (no I/O, see ``_plan`` for what a plan
guarantees) and :meth:`~CountedTransaction.commit` sends it through the commit (``_commit``), as ``save()`` and
``delete()`` do.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Optional, Sequence, Type

from ._write_results import WriteResult
from .exceptions import InvalidTransactionError
from .transport._async import run as arun
from .transport._calls import Steps
from .transport._sync import run
from .write._commit import Rejected, UnitOfWork, committing, policy_for
from .write._plan import MAX_ACTIONS, Plan
from .write._send import RetryPolicy
from .write._writes import Write, check_token, check_write, delete_write, save_write, update_write

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.expressions.condition import Condition
    from pynamodb.expressions.update import Action
    from pynamodb.models import Model

__all__ = ["MAX_ACTIONS", "CountedTransaction"]


class CountedTransaction:
    """Counted saves and deletes, and any other PynamoDB writes, committed as one TransactWriteItems.

    ::

        with CountedTransaction() as transaction:
            transaction.save(Like(pk="POST#a91f", sk="LIKE#USER#7c20", liked_at=1750636800))
            transaction.delete(old_like)
            transaction.update(post, actions=[Post.title.set("Edited")])
        transaction.result.changes

    Deltas on the same parent merge into one Update; the whole transaction commits or nothing does. Nothing is
    sent before :meth:`commit` (called when the ``with`` block ends without an exception).

    :param retry: the retry policy (defaults to the first counted model's ``Meta.counter_retry``, else
      :data:`~pynamodb_counters.DEFAULT_RETRY_POLICY`).
    :param token: the ``ClientRequestToken`` (a fresh UUID by default; at most 36 characters).
    :param return_consumed_capacity: ``"TOTAL"`` (default), ``"INDEXES"`` or ``"NONE"``.
    """

    def __init__(self, *, retry: Optional[RetryPolicy] = None, token: Optional[str] = None,
                 return_consumed_capacity: str = "TOTAL") -> None:
        self.token = check_token(token)
        self.retry = retry
        self.return_consumed_capacity = return_consumed_capacity
        self.result: Optional[WriteResult] = None
        self._pending: List[Write] = []
        self._sent = False

    # -- collecting ------------------------------------------------------------------------------------------
    def save(self, instance: Model, condition: Optional[Condition] = None) -> None:
        """Add ``instance``: counted (a guarded Put plus its counter deltas) when its model is a counted child,
        otherwise an ordinary Put (a parent's counters are never overwritten: see :meth:`update`)."""
        self._check_open()
        self._pending.append(save_write(instance, condition))

    def delete(self, instance: Model, condition: Optional[Condition] = None, *,
               add_version_condition: bool = True) -> None:
        """Delete ``instance``: counted (a guarded Delete plus negative deltas) when its model is a counted
        child, otherwise an ordinary Delete.

        The deltas go to the parents of the stored child: the Delete is conditioned on the attributes that decide
        them holding the instance's values, and :meth:`commit` learns the stored ones from a refusal (or, for an
        instance built from its key alone, from one strongly consistent GetItem) and sends again."""
        self._check_open()
        self._pending.append(delete_write(instance, condition, add_version_condition=add_version_condition))

    def update(self, instance: Model, actions: Sequence[Action], condition: Optional[Condition] = None, *,
               add_version_condition: bool = True) -> None:
        """Update ``instance`` with PynamoDB ``actions``. On a parent that also receives deltas here, the actions
        join its counter Update.

        :raises CountingBypassError: an action on a counter, on a counted child's key, or on an attribute its
          relations read to find the parent.
        """
        self._check_open()
        self._pending.append(update_write(instance, actions, condition, add_version_condition=add_version_condition))

    def condition_check(self, model: Type[Model], hash_key: Any, range_key: Any = None, *,
                        condition: Condition) -> None:
        """Require ``condition`` on an item for the transaction to commit."""
        self._check_open()
        key = (hash_key,) if range_key is None else (hash_key, range_key)
        self._pending.append(check_write(model, key, condition))

    def __len__(self) -> int:
        return len(self._pending)

    def _check_open(self) -> None:
        if self._sent:
            raise InvalidTransactionError("this transaction was already committed (or its commit failed); a "
                                          "transaction is sent once: start a new CountedTransaction")

    # -- planning (no I/O) -----------------------------------------------------------------------------------
    def plan(self) -> Plan:
        """Build the request: reads the models, sends nothing, changes nothing this transaction holds.

        :raises TransactionTooLargeError: more than 100 actions.
        :raises InvalidTransactionError: an empty transaction, one item named twice, a child counted on itself.
        :raises ParentKeyError: a relation's key function gave an unusable parent key.
        """
        return UnitOfWork(self._pending, self.token).plan()

    # -- committing (I/O) ------------------------------------------------------------------------------------
    def commit(self) -> WriteResult:
        """Plan, send with retries, and report. Sends the signals of each counted child. A transaction is sent
        once: inside a ``with`` block, calling it makes the block's end commit nothing more.

        :raises CountedWriteError: a subclass naming what DynamoDB refused; nothing was written.
        :raises RetriesExhaustedError: transient failures outlasted the retry policy.
        :raises InvalidTransactionError: the transaction was already sent.
        """
        return run(self._committing())

    async def acommit(self) -> WriteResult:
        """:meth:`commit`, awaited: the same transaction, sent through aiobotocore (the ``async`` extra) on the
        running event loop; what ``async with`` calls when its block ends without an exception."""
        return await arun(self._committing())

    def _committing(self) -> Steps[WriteResult]:
        self._check_open()
        self._sent = True
        outcome = yield from committing(self._pending, self.token, self.retry_policy(),
                                        return_consumed_capacity=self.return_consumed_capacity)
        assert outcome is not None  # see committing()
        if isinstance(outcome, Rejected):
            self.token = outcome.plan.token
            outcome.raise_error()
        self.result = outcome.result
        self.token = outcome.result.token
        return outcome.result

    def retry_policy(self) -> Optional[RetryPolicy]:
        """The retry policy this transaction uses: its own, else the first model's ``Meta.counter_retry``."""
        return policy_for(self._pending, self.retry)

    def __enter__(self) -> CountedTransaction:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None and not self._sent:  # committed once, by commit() inside the block or here
            self.commit()

    async def __aenter__(self) -> CountedTransaction:
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None and not self._sent:  # committed once, by acommit() inside the block or here
            await self.acommit()
