"""
Bulk counted writes: many children saved or deleted in transactions of up to 100 actions, with every delta for
one parent merged into a single Update per transaction.

::

    result = bulk_save(likes)             # 10,000 likes across 100 posts: about 101 transactions
    result.added, result.rejected, result.failed

Children are grouped by parent, so a transaction of 99 likes of one post is 99 Puts and one Update: about 2 WCU a
like instead of 4. **Atomicity is per transaction**: each chunk commits or not as a whole, never the whole call.
A duplicate (or a missing child, a missing parent, an underflow) inside a chunk does not sink the others: the
refused children are reported and the rest of the chunk is sent again, without them, as a new transaction.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from pynamodb.models import Model

from .attributes import check_counters_unchanged
from .compat import key_of
from .connection import send
from .exceptions import (
    CountedWriteError,
    CounterError,
    CounterUnderflowError,
    CountingBypassError,
    InvalidTransactionError,
    MissingChildError,
    RetriesExhaustedError,
    TransactionError,
)
from .outcomes import finish, refusals, signal_refusals
from .plans import ItemId, Slot
from .relations import relations_of
from .results import WriteResult
from .retries import RetryPolicy
from .shards import shard_key
from .transactions import MAX_ACTIONS, CountedTransaction, item_id

__all__ = ["BulkResult", "ChildOutcome", "bulk_delete", "bulk_save", "bulk_write"]


@dataclass(frozen=True)
class ChildOutcome:
    """What happened to one child of a bulk write.

    :ivar operation: ``"save"`` or ``"delete"``.
    :ivar status: ``"added"``, ``"removed"``, ``"rejected"`` (DynamoDB refused it: ``error`` says why, nothing
      was written for it) or ``"failed"`` (``error`` is a :class:`~pynamodb_counters.exceptions.TransactionError`
      or a :class:`~pynamodb_counters.exceptions.RetriesExhaustedError`, whose ``ambiguous`` says whether its
      transaction may have landed).
    """

    instance: Model
    operation: str
    status: str
    error: Optional[CounterError] = None


@dataclass(frozen=True)
class BulkResult:
    """Every child's outcome, in input order, and the committed transactions' results."""

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

    Signals are sent as for single writes: ``child_added`` / ``child_removed`` for each committed child,
    ``duplicate_rejected`` / ``missing_rejected`` for each refused one.

    Every child is checked before anything is sent:

    :raises CountingBypassError: a child of a model without counted relations, or a counter set by hand.
    :raises InvalidTransactionError: one child twice.
    :raises ParentKeyError: a child whose relation cannot name its parent.
    """
    if not 2 <= max_actions <= MAX_ACTIONS:
        raise ValueError(f"max_actions is between 2 and {MAX_ACTIONS}, not {max_actions}")
    operations = [("save", child) for child in saves] + [("delete", child) for child in deletes]
    outcomes: Dict[int, ChildOutcome] = {}
    results: List[WriteResult] = []
    requests = 0
    for chunk in plan_chunks(operations, max_actions):
        chunk_results, chunk_outcomes, chunk_requests = _write_chunk(chunk, retry)
        results.extend(chunk_results)
        outcomes.update(chunk_outcomes)
        requests += chunk_requests
    return BulkResult(tuple(outcomes[n] for n in range(len(operations))), tuple(results), requests)


Operation = Tuple[int, str, Model]  # (input position, "save" | "delete", child)


def plan_chunks(operations: Sequence[Tuple[str, Model]], max_actions: int) -> List[List[Operation]]:
    """Pure: group operations into chunks of at most ``max_actions`` actions (one per child plus one per distinct
    parent item), children of the same parents next to each other so their deltas merge."""
    numbered: List[Tuple[Tuple[ItemId, ...], Operation]] = []
    seen: Set[ItemId] = set()
    for position, (operation, child) in enumerate(operations):
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
        numbered.append((parents, (position, operation, child)))
    numbered.sort(key=lambda entry: repr(entry[0]))
    chunks: List[List[Operation]] = []
    chunk: List[Operation] = []
    chunk_parents: Set[ItemId] = set()
    for parents, entry in numbered:
        new = chunk_parents | set(parents)
        if chunk and len(chunk) + 1 + len(new) > max_actions:
            chunks.append(chunk)
            chunk, new = [], set(parents)
        chunk.append(entry)
        chunk_parents = new
    if chunk:
        chunks.append(chunk)
    return chunks


def _write_chunk(chunk: List[Operation], retry: Optional[RetryPolicy]
                 ) -> Tuple[List[WriteResult], Dict[int, ChildOutcome], int]:
    """Send one chunk; drop the children DynamoDB refuses and send the rest again, until it commits."""
    pending = list(chunk)
    outcomes: Dict[int, ChildOutcome] = {}
    results: List[WriteResult] = []
    requests = 0
    while pending:
        transaction = CountedTransaction(retry=retry)
        for _, operation, child in pending:
            (transaction.save if operation == "save" else transaction.delete)(child)
        plan = transaction.plan()
        policy = transaction.retry_policy()
        try:
            sent = send(plan.slots[0].model, plan.items, plan.token, policy=policy)
        except (RetriesExhaustedError, TransactionError) as failure:
            requests += getattr(failure, "attempts", 1)
            outcomes.update({n: ChildOutcome(child, op, "failed", failure) for n, op, child in pending})
            break
        requests += sent.attempts
        refused = refusals(plan, sent) if sent.response is None else None
        if not refused:  # committed (now, or on an attempt whose response was lost)
            results.append(finish(plan, sent))
            done = {"save": "added", "delete": "removed"}
            outcomes.update({n: ChildOutcome(child, op, done[op]) for n, op, child in pending})
            break
        signal_refusals(plan, [error for _, error in refused])
        blamed = _blame(pending, refused)
        if not blamed:  # nothing to drop: the refusal is not any child's
            cause = refused[0][1]
            outcomes.update({n: ChildOutcome(child, op, "failed", cause) for n, op, child in pending})
            break
        for n, op, child in pending:
            if n in blamed:
                status = "rejected" if isinstance(blamed[n], CountedWriteError) else "failed"
                outcomes[n] = ChildOutcome(child, op, status, blamed[n])
        pending = [entry for entry in pending if entry[0] not in blamed]
    return results, outcomes, requests


def _blame(pending: List[Operation], refused: List[Tuple[Slot, CounterError]]) -> Dict[int, CounterError]:
    """Which pending children each refusal is about: a child's own action, or every child counted into a refused
    parent. A parent's failed floor is not blamed on its other children when one of its children was found
    missing in the same round: that child's decrement, never to be applied, may be all that failed the floor (the
    rest are sent again, and a real underflow shows again then)."""
    def counted_into(slot: Slot, operation: str, child: Model) -> bool:
        sign = 1 if operation == "save" else -1
        return any(c.parent is slot.model and c.key == slot.key and c.shard == slot.shard
                   for r in relations_of(type(child)) for c in r.changes(child, sign))

    blamed: Dict[int, CounterError] = {}
    for slot, error in refused:
        if slot.kind in ("put", "delete"):
            blamed.update({n: error for n, _, child in pending if slot.instance is child and n not in blamed})
    missing = [entry for entry in pending if isinstance(blamed.get(entry[0]), MissingChildError)]
    for slot, error in refused:
        if slot.kind in ("put", "delete"):
            continue
        if isinstance(error, CounterUnderflowError) and any(counted_into(slot, op, c) for _, op, c in missing):
            continue
        blamed.update({n: error for n, op, child in pending if n not in blamed and counted_into(slot, op, child)})
    return blamed
