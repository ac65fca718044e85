"""
Bulk counted writes: many children saved or deleted in transactions of up to 100 actions, with every delta for
one parent merged into a single Update per transaction.

::

    result = bulk_save(likes)             # 10,000 likes across 100 posts: 102 transactions
    result.added, result.rejected, result.failed, result.requests

Children are grouped by parent, so a transaction of 99 likes of one post is 99 Puts and one Update: about 2 WCU a
like instead of 4. A chunk is sized with every action it carries: a child that is itself a parent with sharded
counters brings its shard items along (a Track with ``CounterField(shards=4)`` is 4 actions, plus its parent's
Update). Every chunk is planned before the first is sent, so an error in the input (a bypass, a bad key, a child
too large for any chunk) is raised with nothing written.

**Atomicity is per transaction**: each chunk commits or not as a whole, never the whole call. A duplicate (or a
missing child, a missing parent, an underflow) inside a chunk does not sink the others: the refused children are
reported and the rest of the chunk is sent again, without them, as a new transaction. A chunk DynamoDB rejects as
a whole (``ValidationException``: a child too large, a value its attribute cannot hold) is sent again in halves,
until the child that cannot be written fails alone and the rest commit. A refused child is
reported with the error its own single write would raise (a missing child of a missing post is a
``ParentNotFoundError``, as ``delete()`` raises; :doc:`errors` gives the order).

**The call always reports what committed.** A chunk that fails with a library error (retries exhausted, a
request DynamoDB rejects) is reported per child as ``"failed"`` and the next chunks are still sent; any other
exception stops the call as :class:`BulkWriteError`, whose ``result`` holds every committed child.
:attr:`BulkResult.requests` counts the ``TransactWriteItems`` requests made, every attempt included.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import Enum
from itertools import chain
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from pynamodb.models import Model

from ._write_results import WriteResult
from .declare._spec import spec_of
from .exceptions import (
    BulkWriteError,
    CountedWriteError,
    CounterError,
    InvalidArgumentError,
    MissingChildError,
    TransactionError,
    TransactionTooLargeError,
)
from .write._actions import ChildEdit
from .write._chunks import BulkOperation, Entry, plan_chunks
from .write._commit import Rejected, UnitOfWork, commit_in_part, policy_for
from .write._deltas import names_parents
from .write._fetches import stored_child
from .write._plan import MAX_ACTIONS
from .write._recoveries import BULK_RECOVERIES
from .write._send import RetryPolicy
from .write._stored import remember_stored
from .write._writes import Write, delete_write, save_write

__all__ = ["BulkOperation", "BulkResult", "ChildOutcome", "ChildStatus", "bulk_delete", "bulk_save", "bulk_write"]


class ChildStatus(str, Enum):
    """What happened to one child of a bulk write (:attr:`ChildOutcome.status`). Each equals its text
    (``ChildStatus.ADDED == "added"``, and ``str()`` gives it): ``outcome.status == "added"`` holds, as it did
    when statuses were strings."""

    ADDED = "added"
    """A new child, saved and counted."""
    CHANGED = "changed"
    """A stored child saved again, its counts following the change."""
    REMOVED = "removed"
    """Deleted and uncounted."""
    REJECTED = "rejected"
    """DynamoDB refused it: ``error`` says why, nothing was written for it; with several refusals, the one a
    single write of this child would raise."""
    FAILED = "failed"
    """Its transaction failed: ``error`` is a :class:`~pynamodb_counters.exceptions.TransactionError`, a
    :class:`~pynamodb_counters.exceptions.RetriesExhaustedError`, whose ``ambiguous`` says whether its
    transaction may have landed, or the :class:`~pynamodb_counters.exceptions.BulkWriteError` that stopped the
    call while its transaction was in flight."""
    UNSENT = "unsent"
    """Only in a :class:`~pynamodb_counters.exceptions.BulkWriteError`'s ``result``: the call stopped before its
    chunk was sent; nothing was written for it."""

    def __str__(self) -> str:  # its text, printed or formatted, on every Python
        return str(self.value)


@dataclass(frozen=True)
class ChildOutcome:
    """What happened to one child of a bulk write.

    :ivar operation: an :class:`~pynamodb_counters.BulkOperation`: ``"save"`` or ``"delete"`` (each member equals
      its text).
    :ivar status: a :class:`~pynamodb_counters.ChildStatus`: ``"added"``, ``"changed"``, ``"removed"``,
      ``"rejected"``, ``"failed"`` or ``"unsent"`` (each member equals its text).
    """

    instance: Model
    operation: BulkOperation
    status: ChildStatus
    error: Optional[CounterError] = None


@dataclass(frozen=True)
class BulkResult:
    """Every child's outcome, in input order, and the committed transactions' results.

    :ivar outcomes: one :class:`ChildOutcome` per child, in input order (saves, then deletes).
    :ivar results: the :class:`~pynamodb_counters.WriteResult` of each committed transaction.
    :ivar requests: how many ``TransactWriteItems`` requests the call made, every attempt counted: retries after
      throttling, conflicts, 5xx answers and lost responses, the refused attempts whose refused children were then
      dropped, and the attempts of transactions that failed. A request counts once botocore has answered it or
      failed it with its own error (a network error included); it is the number of requests seen on the wire,
      give or take those whose connection failed before reaching the server.
    """

    outcomes: Tuple[ChildOutcome, ...]
    results: Tuple[WriteResult, ...]
    requests: int

    def _with(self, *statuses: ChildStatus) -> List[ChildOutcome]:
        return [o for o in self.outcomes if o.status in statuses]

    @property
    def added(self) -> List[Model]:
        """The children saved and counted."""
        return [o.instance for o in self._with(ChildStatus.ADDED)]

    @property
    def changed(self) -> List[Model]:
        """The stored children saved again, their counts following the change (see :doc:`children`)."""
        return [o.instance for o in self._with(ChildStatus.CHANGED)]

    @property
    def removed(self) -> List[Model]:
        """The children deleted and uncounted."""
        return [o.instance for o in self._with(ChildStatus.REMOVED)]

    @property
    def rejected(self) -> List[ChildOutcome]:
        """The children DynamoDB refused (duplicates, missing children or parents, underflows)."""
        return self._with(ChildStatus.REJECTED)

    @property
    def failed(self) -> List[ChildOutcome]:
        """The children whose transaction failed for another reason."""
        return self._with(ChildStatus.FAILED)

    @property
    def unsent(self) -> List[ChildOutcome]:
        """The children never sent because the call stopped (only in :attr:`BulkWriteError.result`)."""
        return self._with(ChildStatus.UNSENT)

    @property
    def consumed_capacity(self) -> Tuple[Any, ...]:
        """Every committed transaction's ``ConsumedCapacity`` entries."""
        return tuple(entry for result in self.results for entry in result.consumed_capacity)


def bulk_save(children: Iterable[Model], *, retry: Optional[RetryPolicy] = None,
              max_actions: int = MAX_ACTIONS) -> BulkResult:
    """Save and count many children; see :func:`bulk_write`."""
    return bulk_write(saves=children, retry=retry, max_actions=max_actions)


def bulk_delete(children: Iterable[Model], *, retry: Optional[RetryPolicy] = None,
                max_actions: int = MAX_ACTIONS) -> BulkResult:
    """Delete and uncount many children; see :func:`bulk_write`."""
    return bulk_write(deletes=children, retry=retry, max_actions=max_actions)


def bulk_write(saves: Iterable[Model] = (), deletes: Iterable[Model] = (), *, retry: Optional[RetryPolicy] = None,
               max_actions: int = MAX_ACTIONS) -> BulkResult:
    """Save ``saves`` and delete ``deletes`` (counted children) in transactions of at most ``max_actions``
    actions, children of one parent together so that their deltas merge into one Update per transaction.

    A chunk is sized with every action it carries: each child's Put or Delete, the shard items written or
    deleted with a child that is itself a sharded parent, and one Update per parent item (or shard item) it
    counts into. Every chunk is planned before the first one is sent.

    Signals are sent as for single writes: ``child_added`` / ``child_removed`` / ``child_changed`` for each
    committed child, ``duplicate_rejected`` / ``missing_rejected`` / ``limit_rejected`` for each refused one.

    Once sending has begun, the call always reports what committed. A chunk that DynamoDB refuses, or that fails
    with a :class:`~pynamodb_counters.exceptions.CounterError` (retries exhausted, a request DynamoDB rejects),
    is reported per child in the result (``"rejected"`` or ``"failed"``) and the next chunks are still sent. Any
    other exception stops the call: it is raised as :class:`BulkWriteError`, whose ``result`` holds what
    committed before it.

    Every child is checked before anything is sent:

    :raises CountingBypassError: a child of a model without counted relations, or a counter set by hand.
    :raises InvalidTransactionError: one child twice, or a chunk DynamoDB would refuse.
    :raises TransactionTooLargeError: one child needs more than ``max_actions`` actions on its own (its shard
      items and parent updates included).
    :raises ParentKeyError: a child whose relation cannot name its parent.
    :raises BulkWriteError: an unexpected error after sending began; ``error.result`` reports every child.
    """
    if not 2 <= max_actions <= MAX_ACTIONS:
        raise InvalidArgumentError(f"max_actions is between 2 and {MAX_ACTIONS}, not {max_actions}")
    operations = [(BulkOperation.SAVE, child) for child in saves] + [(BulkOperation.DELETE, child) for child in deletes]
    progress = _Progress()
    operations = [_as_stored(position, operation, child, progress)
                  for position, (operation, child) in enumerate(operations)]
    chunks = plan_chunks(operations, max_actions, skip=set(progress.outcomes))
    planned = [_planned(chunk, max_actions) for chunk in chunks]  # raises before anything is sent
    for position, (chunk, chunk_writes) in enumerate(zip(chunks, planned)):
        try:
            _write_chunk(chunk, chunk_writes, retry, progress)
        except Exception as unexpected:
            raise _stopped(unexpected, operations, chunk, chunks[position + 1:], progress) from unexpected
    return progress.result(operations)


@dataclass
class _Progress:
    """What a bulk write has done so far."""

    outcomes: Dict[int, ChildOutcome] = field(default_factory=dict)
    results: List[WriteResult] = field(default_factory=list)
    requests: int = 0

    def count_request(self) -> None:
        self.requests += 1

    def decide(self, entries: Iterable[Entry], status: ChildStatus, error: Optional[CounterError] = None) -> None:
        for position, operation, child in entries:
            self.outcomes[position] = ChildOutcome(child, operation, status, error)

    def result(self, operations: Sequence[Tuple[BulkOperation, Model]]) -> BulkResult:
        return BulkResult(tuple(self.outcomes[n] for n in range(len(operations))), tuple(self.results),
                          self.requests)


def _stopped(unexpected: Exception, operations: Sequence[Tuple[BulkOperation, Model]], chunk: List[Entry],
             later: List[List[Entry]], progress: _Progress) -> BulkWriteError:
    """The error that reports what a bulk write had done when ``unexpected`` stopped it in ``chunk``."""
    error = BulkWriteError(f"bulk_write stopped: {unexpected!r} while sending a transaction of {len(chunk)} "
                           f"children, which may or may not have committed; {len(progress.results)} transactions "
                           f"had committed before it (see error.result)", unexpected)
    progress.decide([entry for entry in chunk if entry[0] not in progress.outcomes], ChildStatus.FAILED, error)
    progress.decide([entry for entry in chain.from_iterable(later)], ChildStatus.UNSENT)
    error.result = progress.result(operations)
    return error


def _as_stored(position: int, operation: BulkOperation, child: Model, progress: _Progress
               ) -> Tuple[BulkOperation, Model]:
    """A delete of a child that cannot name its parents (built from its key alone) learns the stored child (one
    strongly consistent GetItem), as a load would; an absent one is refused here, nothing sent."""
    model = type(child)
    if operation is not BulkOperation.DELETE or not spec_of(model).relations or names_parents(model, child, -1):
        return operation, child
    try:
        remember_stored(child, stored_child(model, child).item)
    except MissingChildError as error:
        progress.decide([(position, operation, child)], ChildStatus.REJECTED, error)
    return operation, child


def _writes(entries: Sequence[Entry]) -> List[Write]:
    return [(save_write if operation is BulkOperation.SAVE else delete_write)(child) for _, operation, child in entries]


def _planned(entries: List[Entry], max_actions: int) -> List[Write]:
    """Plan the transaction of ``entries`` (no I/O), to raise what it would raise before anything is sent; returns
    their writes, for the chunk's first round.

    :raises TransactionTooLargeError: the plan has more than ``max_actions`` actions.
    """
    writes = _writes(entries)
    actions = len(UnitOfWork(writes, "planned").plan().actions)
    if actions > max_actions:
        raise TransactionTooLargeError(f"a chunk of this bulk write has {actions} actions, more than "
                                       f"max_actions={max_actions}. Nothing was sent")
    return writes


def _write_chunk(chunk: List[Entry], first: List[Write], retry: Optional[RetryPolicy], progress: _Progress) -> None:
    """Commit one chunk, in part: its commit leaves out the children DynamoDB refuses and commits the rest
    (``_recoveries.RefusedLeftOut``, in the one recovery loop). Every child's outcome goes to ``progress``, a child
    left out as it is; a :class:`CounterError` fails the children still pending. ``first`` are the chunk's writes
    as planned."""
    def left_out(position: int, error: CounterError) -> None:
        status = ChildStatus.REJECTED if isinstance(error, CountedWriteError) else ChildStatus.FAILED
        progress.decide([chunk[position]], status, error)

    try:
        outcome = commit_in_part(first, str(uuid.uuid4()), policy_for(first, retry), BULK_RECOVERIES,
                                 on_request=progress.count_request, on_left_out=left_out)
    except CounterError as failure:  # retries exhausted, a request DynamoDB rejects, unreadable reasons
        pending = [entry for entry in chunk if entry[0] not in progress.outcomes]
        if len(pending) > 1 and isinstance(failure, TransactionError) and \
                failure.cause_response_code == "ValidationException":
            # rejected as a whole, nothing written: some child cannot be written (too large, a value its
            # attribute cannot hold); halves are sent apart until that child fails alone
            half = len(pending) // 2
            for part in (pending[:half], pending[half:]):
                _write_chunk(part, _writes(part), retry, progress)
            return
        progress.decide(pending, ChildStatus.FAILED, failure)
        return
    if outcome is None:  # every child was left out
        return
    if isinstance(outcome, Rejected):  # the refusal is not any child's: nothing to leave out
        progress.decide([entry for entry in chunk if entry[0] not in progress.outcomes], ChildStatus.FAILED,
                        outcome.error)
        return
    progress.results.append(outcome.result)  # committed (now, or on an attempt whose response was lost)
    for action in outcome.plan.children:
        entry = chunk[action.index]
        status = ChildStatus.CHANGED if isinstance(action, ChildEdit) else \
            ChildStatus.ADDED if entry[1] is BulkOperation.SAVE else ChildStatus.REMOVED
        progress.decide([entry], status)
