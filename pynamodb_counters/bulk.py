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
reported and the rest of the chunk is sent again, without them, as a new transaction. A refused child is
reported with the error its own single write would raise (a missing child of a missing post is a
``ParentNotFoundError``, as ``delete()`` raises; :doc:`errors` gives the order).

**The call always reports what committed.** A chunk that fails with a library error (retries exhausted, a
request DynamoDB rejects) is reported per child as ``"failed"`` and the next chunks are still sent; any other
exception stops the call as :class:`BulkWriteError`, whose ``result`` holds every committed child.
:attr:`BulkResult.requests` counts the ``TransactWriteItems`` requests made, every attempt included.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain
from typing import AbstractSet, Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple, Type

from pynamodb.models import Model

from .attributes import check_counters_unchanged
from .compat import key_of
from .connection import Sent, send
from .exceptions import (
    CountedWriteError,
    CounterError,
    CounterUnderflowError,
    CountingBypassError,
    InvalidTransactionError,
    MissingChildError,
    TransactionTooLargeError,
)
from .outcomes import finish, most_fundamental, refusals, signal_refusals
from .plans import ItemId, Plan, Slot
from .relations import relations_of
from .results import WriteResult
from .retries import DEFAULT_RETRY_POLICY, RetryPolicy
from .shards import shard_count, shard_key
from .transactions import MAX_ACTIONS, CountedTransaction, item_id, names_parents, relearned, stored_child

__all__ = ["BulkResult", "BulkWriteError", "ChildOutcome", "bulk_delete", "bulk_save", "bulk_write"]


@dataclass(frozen=True)
class ChildOutcome:
    """What happened to one child of a bulk write.

    :ivar operation: ``"save"`` or ``"delete"``.
    :ivar status: ``"added"``, ``"removed"``, ``"rejected"`` (DynamoDB refused it: ``error`` says why, nothing
      was written for it; with several refusals, the one a single write of this child would raise), ``"failed"``
      (``error`` is a :class:`~pynamodb_counters.exceptions.TransactionError`, a
      :class:`~pynamodb_counters.exceptions.RetriesExhaustedError`, whose ``ambiguous`` says whether its
      transaction may have landed, or the :class:`BulkWriteError` that stopped the call while its transaction
      was in flight) or ``"unsent"`` (only in :attr:`BulkWriteError.result`: the call stopped before its chunk
      was sent; nothing was written for it).
    """

    instance: Model
    operation: str
    status: str
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

    def _with(self, *statuses: str) -> List[ChildOutcome]:
        return [o for o in self.outcomes if o.status in statuses]

    @property
    def added(self) -> List[Model]:
        """The children saved and counted."""
        return [o.instance for o in self._with("added")]

    @property
    def removed(self) -> List[Model]:
        """The children deleted and uncounted."""
        return [o.instance for o in self._with("removed")]

    @property
    def rejected(self) -> List[ChildOutcome]:
        """The children DynamoDB refused (duplicates, missing children or parents, underflows)."""
        return self._with("rejected")

    @property
    def failed(self) -> List[ChildOutcome]:
        """The children whose transaction failed for another reason."""
        return self._with("failed")

    @property
    def unsent(self) -> List[ChildOutcome]:
        """The children never sent because the call stopped (only in :attr:`BulkWriteError.result`)."""
        return self._with("unsent")

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

    Signals are sent as for single writes: ``child_added`` / ``child_removed`` for each committed child,
    ``duplicate_rejected`` / ``missing_rejected`` for each refused one.

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
        raise ValueError(f"max_actions is between 2 and {MAX_ACTIONS}, not {max_actions}")
    operations = [("save", child) for child in saves] + [("delete", child) for child in deletes]
    progress = _Progress()
    operations = [_as_stored(position, operation, child, progress)
                  for position, (operation, child) in enumerate(operations)]
    chunks = plan_chunks(operations, max_actions, skip=set(progress.outcomes))
    planned = [_planned(chunk, retry, max_actions) for chunk in chunks]  # raises before anything is sent
    for position, (chunk, (transaction, plan)) in enumerate(zip(chunks, planned)):
        try:
            _write_chunk(chunk, transaction, plan, retry, progress)
        except Exception as unexpected:
            raise _stopped(unexpected, operations, chunk, chunks[position + 1:], progress) from unexpected
    return progress.result(operations)


class BulkWriteError(CounterError):
    """:func:`bulk_write` stopped on an unexpected error (not a
    :class:`~pynamodb_counters.exceptions.CounterError`: a bug in a botocore hook, a programming error) after
    sending had begun. The error itself is :attr:`cause` (and ``__cause__``).

    :ivar result: the :class:`BulkResult` up to the failure: the children of committed transactions are
      ``"added"`` / ``"removed"``, refused ones ``"rejected"``; the children of the transaction in flight are
      ``"failed"`` with this error (it may or may not have committed: audit, or send them again, a committed
      save then comes back as a duplicate); the children of later chunks are ``"unsent"``.
    """

    result: BulkResult


Operation = Tuple[int, str, Model]  # (input position, "save" | "delete", child)


@dataclass
class _Progress:
    """What a bulk write has done so far."""

    outcomes: Dict[int, ChildOutcome] = field(default_factory=dict)
    results: List[WriteResult] = field(default_factory=list)
    requests: int = 0

    def count_request(self) -> None:
        self.requests += 1

    def decide(self, entries: Iterable[Operation], status: str, error: Optional[CounterError] = None) -> None:
        for position, operation, child in entries:
            self.outcomes[position] = ChildOutcome(child, operation, status, error)

    def result(self, operations: Sequence[Tuple[str, Model]]) -> BulkResult:
        return BulkResult(tuple(self.outcomes[n] for n in range(len(operations))), tuple(self.results),
                          self.requests)


def _stopped(unexpected: Exception, operations: Sequence[Tuple[str, Model]], chunk: List[Operation],
             later: List[List[Operation]], progress: _Progress) -> BulkWriteError:
    """The error that reports what a bulk write had done when ``unexpected`` stopped it in ``chunk``."""
    error = BulkWriteError(f"bulk_write stopped: {unexpected!r} while sending a transaction of {len(chunk)} "
                           f"children, which may or may not have committed; {len(progress.results)} transactions "
                           f"had committed before it (see error.result)", unexpected)
    progress.decide([entry for entry in chunk if entry[0] not in progress.outcomes], "failed", error)
    progress.decide([entry for entry in chain.from_iterable(later)], "unsent")
    error.result = progress.result(operations)
    return error


def _own_actions(model: Type[Model]) -> int:
    """The actions a counted child's save or delete carries besides its parents' Updates: its own Put or Delete
    and, when the child is itself a parent with sharded counters, its shard items (written or deleted with it)."""
    shards = shard_count(model)
    return 1 + (shards - 1 if shards > 1 else 0)


def _as_stored(position: int, operation: str, child: Model, progress: _Progress) -> Tuple[str, Model]:
    """A delete of a child that cannot name its parents (built from its key alone) becomes a delete of the stored
    child (one strongly consistent GetItem), reported with it; an absent one is refused here, nothing sent."""
    model = type(child)
    if operation != "delete" or not relations_of(model) or names_parents(model, child, -1):
        return operation, child
    try:
        return operation, stored_child(model, child)
    except MissingChildError as error:
        progress.decide([(position, operation, child)], "rejected", error)
        return operation, child


def plan_chunks(operations: Sequence[Tuple[str, Model]], max_actions: int, skip: AbstractSet[int] = frozenset()
                ) -> List[List[Operation]]:
    """Pure: group operations into chunks of at most ``max_actions`` actions (each child's own actions, its shard
    items included, plus one per distinct parent item), children of the same parents next to each other so their
    deltas merge. The operations at the positions in ``skip`` are left out.

    :raises TransactionTooLargeError: a child whose actions alone exceed ``max_actions``.
    """
    numbered: List[Tuple[Tuple[ItemId, ...], int, Operation]] = []
    seen: Set[ItemId] = set()
    for position, (operation, child) in enumerate(operations):
        if position in skip:
            continue
        model = type(child)
        if not relations_of(model):
            raise CountingBypassError(f"bulk writes count children; {model.__name__} has no counted_by relation")
        if operation == "save":
            check_counters_unchanged(child)
        own = item_id(model, key_of(child))
        if own in seen:
            raise InvalidTransactionError(f"{model.__name__} {own[1:]} appears twice in one bulk write")
        seen.add(own)
        sign = 1 if operation == "save" else -1
        parents = tuple(sorted({item_id(c.parent, shard_key(c.key, c.shard)) for r in relations_of(model)
                                for c in r.changes(child, sign)},
                               key=repr))
        size = _own_actions(model)
        if size + len(parents) > max_actions:
            raise TransactionTooLargeError(
                f"{model.__name__} {own[1:]} needs {size + len(parents)} actions ({size} of its own, its shard "
                f"items included, and {len(parents)} parent updates); a transaction here carries at most "
                f"{max_actions}. Nothing was sent")
        numbered.append((parents, size, (position, operation, child)))
    numbered.sort(key=lambda entry: repr(entry[0]))
    chunks: List[List[Operation]] = []
    chunk: List[Operation] = []
    chunk_parents: Set[ItemId] = set()
    actions = 0
    for parents, size, entry in numbered:
        new = chunk_parents | set(parents)
        if chunk and actions + size + len(new) > max_actions:
            chunks.append(chunk)
            chunk, new, actions = [], set(parents), 0
        chunk.append(entry)
        chunk_parents = new
        actions += size
    if chunk:
        chunks.append(chunk)
    return chunks


def _planned(pending: List[Operation], retry: Optional[RetryPolicy], max_actions: int = MAX_ACTIONS
             ) -> Tuple[CountedTransaction, Plan]:
    """The transaction of ``pending`` and its plan (pure).

    :raises TransactionTooLargeError: the plan has more than ``max_actions`` actions.
    """
    transaction = CountedTransaction(retry=retry)
    for _, operation, child in pending:
        (transaction.save if operation == "save" else transaction.delete)(child)
    plan = transaction.plan()
    if len(plan.items) > max_actions:
        raise TransactionTooLargeError(f"a chunk of this bulk write has {len(plan.items)} actions, more than "
                                       f"max_actions={max_actions}. Nothing was sent")
    return transaction, plan


def _write_chunk(chunk: List[Operation], transaction: CountedTransaction, plan: Plan,
                 retry: Optional[RetryPolicy], progress: _Progress) -> None:
    """Send one chunk; drop the children DynamoDB refuses and send the rest again, until it commits. Every
    child's outcome goes to ``progress``; a :class:`CounterError` fails the children still pending."""
    pending = list(chunk)
    relearns = 0
    while pending:
        try:
            sent = send(plan.slots[0].model, plan.items, plan.token, policy=transaction.retry_policy(),
                        on_request=progress.count_request)
            refused = refusals(plan, sent) if sent.response is None else None
        except CounterError as failure:  # retries exhausted, a request DynamoDB rejects, unreadable reasons
            progress.decide(pending, "failed", failure)
            return
        if not refused:  # committed (now, or on an attempt whose response was lost)
            progress.results.append(finish(plan, sent))
            for entry in pending:
                progress.decide([entry], "added" if entry[1] == "save" else "removed")
            return
        stale = _relearned(pending, plan, sent)
        if stale is not None and relearns < (transaction.retry_policy() or DEFAULT_RETRY_POLICY).max_attempts:
            relearns += 1  # deletes of children that changed parents: sent again, counted off the stored parents
            pending = stale
            try:
                transaction, plan = _planned(pending, retry)
            except CounterError as failure:  # the stored parents make the chunk too large
                progress.decide(pending, "failed", failure)
                return
            continue
        signal_refusals(plan, [error for _, error in refused])
        blamed = _blame(pending, refused)
        if not blamed:  # nothing to drop: the refusal is not any child's
            progress.decide(pending, "failed", most_fundamental([error for _, error in refused]))
            return
        for entry in pending:
            if entry[0] in blamed:
                error = blamed[entry[0]]
                progress.decide([entry], "rejected" if isinstance(error, CountedWriteError) else "failed", error)
        pending = [entry for entry in pending if entry[0] not in blamed]
        if pending:
            try:
                transaction, plan = _planned(pending, retry)
            except CounterError as failure:  # pragma: no cover - the same children planned once already
                progress.decide(pending, "failed", failure)
                return


def _relearned(pending: List[Operation], plan: Plan, sent: Sent) -> Optional[List[Operation]]:
    """``pending`` with each delete that DynamoDB refused because its stored child names other parents replaced by
    that stored child; ``None`` when there is none."""
    learned: Dict[int, Model] = {}
    for slot, reason in zip(plan.slots, sent.cancellation_reasons or []):
        item = reason.get("Item")
        if slot.kind == "delete" and reason.get("Code") == "ConditionalCheckFailed" and item:
            for position, _, child in pending:
                stored = relearned(type(child), child, item) if slot.instance is child else None
                if stored is not None:
                    learned[position] = stored
    if not learned:
        return None
    return [(position, operation, learned.get(position, child)) for position, operation, child in pending]


def _blame(pending: List[Operation], refused: List[Tuple[Slot, CounterError]]) -> Dict[int, CounterError]:
    """Which pending children each refusal is about, and the one error each is reported with: of its own action's
    refusal and its parents' refusals, the one a single write of it would raise (:func:`most_fundamental`).

    A parent's failed floor is not blamed on its other children when one of its children was found missing in
    the same round: that child's decrement, never to be applied, may be all that failed the floor (the rest are
    sent again, and a real underflow shows again then)."""
    def counted_into(slot: Slot, operation: str, child: Model) -> bool:
        sign = 1 if operation == "save" else -1
        return any(c.parent is slot.model and c.key == slot.key and c.shard == slot.shard
                   for r in relations_of(type(child)) for c in r.changes(child, sign))

    errors: Dict[int, List[CounterError]] = {}
    for slot, error in refused:
        if slot.kind in ("put", "delete"):
            for n, _, child in pending:
                if slot.instance is child:
                    errors.setdefault(n, []).append(error)
    missing = [entry for entry in pending
               if any(isinstance(error, MissingChildError) for error in errors.get(entry[0], ()))]
    for slot, error in refused:
        if slot.kind in ("put", "delete"):
            continue
        if isinstance(error, CounterUnderflowError) and any(counted_into(slot, op, c) for _, op, c in missing):
            continue
        for n, op, child in pending:
            if counted_into(slot, op, child):
                errors.setdefault(n, []).append(error)
    return {n: most_fundamental(found) for n, found in errors.items()}
