"""
The commit pipeline: the one path by which every counted write reaches DynamoDB, for ``save()`` and
``delete()``, :class:`~pynamodb_counters.CountedTransaction` and bulk writes alike.

:func:`commit` reads what a key-only delete or an update needs, plans (``plan``), sends with
retries (``send``), reads the refusals
(:mod:`~pynamodb_counters._outcomes`), recovers what can be recovered in the same call (an edit, update or
delete counted from a state the stored child no longer holds, counted again from the one the refusal returned;
an edit of a child deleted meanwhile, sent as a create; rollups found gone, or created again; a parent stored
before its counter was sharded), reports
(:class:`~pynamodb_counters.WriteResult`) and sends the signals. A refusal is returned, not raised: a single
write raises its most fundamental error, a bulk write drops the refused children and commits the rest.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, List, NoReturn, Optional, Sequence, Tuple, Union

from pynamodb.exceptions import PynamoDBException

from ._connection import send
from ._operations import Operation, classify_save, prepare_update
from ._outcomes import (
    ABSENT,
    explain,
    most_fundamental,
    names_parents,
    next_token,
    proven,
    refusals,
    returned_rollups,
    stale_children,
)
from ._planner import plan
from ._plans import Plan, Sent, Slot
from ._reads import stored_child
from ._results import WriteResult
from ._retries import DEFAULT_RETRY_POLICY, RetryPolicy
from ._shard_items import create_shards
from ._stored import Stored, forget, remember
from .exceptions import (
    CountedWriteError,
    CounterError,
    DuplicateChildError,
    LimitExceededError,
    MissingChildError,
    ParentNotFoundError,
    TransactionError,
)
from .signals import (
    child_added,
    child_changed,
    child_removed,
    duplicate_rejected,
    limit_rejected,
    missing_rejected,
    send_safely,
)

__all__ = ["Refused", "commit", "policy_for", "read_unknown_states"]


@dataclass(frozen=True)
class Refused:
    """DynamoDB refused a plan; nothing was written, and ``duplicate_rejected`` / ``missing_rejected`` were sent
    (``limit_rejected`` waits for :meth:`raise_error`, or for the bulk write that knows which children it
    refuses).

    :ivar plan: the plan of the refused attempt.
    :ivar refused: each refused action's slot and error.
    """

    plan: Plan
    refused: List[Tuple[Slot, CounterError]]

    @property
    def error(self) -> CounterError:
        """The error a single write raises: the most fundamental refusal."""
        return most_fundamental([error for _, error in self.refused])

    def raise_error(self) -> NoReturn:
        """Raise :attr:`error` as a single write or a transaction does, sending ``limit_rejected`` first for each
        child of the refused write that adds to a full parent (the whole write is refused)."""
        error = self.error
        if isinstance(error, LimitExceededError):
            for slot in _counted_into(self.plan, error):
                send_safely(limit_rejected, slot.model, instance=slot.instance, error=error)
        raise error


def commit(operations: Sequence[Operation], token: str, policy: Optional[RetryPolicy] = None, *,
           return_consumed_capacity: str = "TOTAL",
           on_request: Optional[Callable[[], None]] = None) -> Union[WriteResult, Refused]:
    """Commit ``operations`` as one TransactWriteItems.

    A counted delete of an instance that cannot name its parents, or a counted update of an instance never
    loaded, is counted from the stored child (one strongly consistent GetItem). An edit, update or delete refused
    because its stored child counts otherwise than the state its deltas came from is counted again from the child
    the refusal returned (an edit of a child deleted meanwhile, as new), and sent as a new request (derived
    token), within ``policy``. A refusal naming a missing shard item of a parent stored before its counter was
    sharded creates the shard items and sends the same request again, once.

    :param on_request: called once per request made, whatever its outcome (see
      ``send``).
    :returns: the result of the committed write, or the :class:`Refused` plan.
    :raises MissingChildError: a key-only delete, or an update of an instance never loaded, of a child that does
      not exist; nothing was written.
    :raises CounterError: a plan DynamoDB would refuse, a request it rejects, retries exhausted.
    """
    policy = policy or DEFAULT_RETRY_POLICY
    read_unknown_states(operations)
    shards_created = False
    attempt = earlier = 0  # rounds sent, and the requests they made before this one
    lost = False  # whether an earlier round had an attempt whose response was lost
    sent: Optional[Sent] = None
    while True:
        if sent is not None:
            earlier += sent.attempts
            lost = lost or sent.ambiguous
        attempt += 1
        planned = plan(operations, token)
        try:
            sent = send(planned.slots[0].model, planned.items, planned.token, policy=policy,
                        return_consumed_capacity=return_consumed_capacity, on_request=on_request)
        except TransactionError as error:
            raise explain(planned, error) from error.cause
        refused = refusals(planned, sent) if sent.response is None else None  # None: committed
        if refused is None:
            return finish(planned, sent, earlier, lost)
        again = attempt < policy.max_attempts
        learned = stale_children(planned, sent, operations) if again else {}
        returned = returned_rollups(planned, sent) if again else set()
        if learned or returned:  # the refused attempt wrote nothing: again, from the stored state, as a new request
            for index, stored in learned.items():
                _relearn(operations[index], stored)
            for op in operations:  # rollups found gone, and created again since: the child counts off them
                op.gone_parents -= returned
            token = next_token(token)
            continue
        gone, others = _gone_rollups(refused, operations, planned, sent)
        if gone and not others and again:  # rollups that expired: the child goes without their decrements
            for op, parent in gone:
                op.gone_parents.add(parent)
            token = next_token(token)
            continue
        refused = others or refused  # beside another refusal, a gone rollup is none: that refusal stands
        signal_refusals(refused)
        refusal = most_fundamental([error for _, error in refused])
        if not shards_created and isinstance(refusal, ParentNotFoundError) and refusal.shard and \
                _create_missing_shards(refusal):
            shards_created = True  # the refused attempt wrote nothing: the same request again, now they exist
            continue
        return Refused(planned, refused)


def _gone_rollups(refused: List[Tuple[Slot, CounterError]], operations: Sequence[Operation], planned: Plan,
                  sent: Sent) -> Tuple[List[Tuple[Operation, Tuple[Any, Tuple[Any, ...]]]],
                                       List[Tuple[Slot, CounterError]]]:
    """Split a refusal into the rollups it found gone, each with the operations counting into it, and the other
    refusals. A rollup is found gone when its Update, fed only by relations creating their parents
    (``create_parent=True``), found no item while it needed one: something counted into it besides first counts
    (a decrement, a change of amount), whose child was counted in the rollup that expired. Those changes are then
    not sent; first counts create it again.

    Only a refusal made of gone rollups alone sends the write again without their changes: beside any other
    refusal (a missing child above all, whose rollup is absent because it was never counted), the other refusal
    stands, and nothing is dropped on the strength of a state that another writer may change before the write is
    sent again."""
    reasons = {id(slot): reason for slot, reason in zip(planned.slots, sent.cancellation_reasons or [])}
    gone: List[Tuple[Operation, Tuple[Any, Tuple[Any, ...]]]] = []
    others: List[Tuple[Slot, CounterError]] = []
    for slot, error in refused:
        feeding = [(op, relation, first) for op in operations
                   for first, pairs in ((False, op.deltas.removed), (True, op.deltas.added),
                                        (False, op.deltas.changed))
                   for relation, change in pairs if change.parent is slot.model and change.key == slot.key] \
            if slot.kind == "parent" and not slot.shard and isinstance(error, ParentNotFoundError) and \
            not reasons[id(slot)].get("Item") else []
        if feeding and all(relation.create_parent for _, relation, _ in feeding) and \
                not all(first for _, _, first in feeding):
            gone.extend((op, (slot.model, slot.key)) for op, _, _ in feeding)
        else:
            others.append((slot, error))
    return gone, others


def _relearn(op: Operation, stored: Any) -> None:
    """Count ``op`` from the stored child a refusal taught: a :class:`Stored`, or :data:`ABSENT` for an edit whose
    child was deleted since it was loaded (saving it again creates it, counted as new)."""
    if stored is ABSENT:
        classify_save(op, None)
        op.recreated = True
    elif op.kind == "counted_put":  # created again meanwhile: an edit of what is stored now
        classify_save(op, stored)
    else:
        op.basis = stored
        if op.kind == "counted_update":
            prepare_update(op)


def read_unknown_states(operations: Sequence[Operation]) -> None:
    """Read the stored child (one strongly consistent GetItem) where a counted write needs it and does not know
    it: a delete of an instance that cannot name its parents (built from its key alone), an update of an
    instance never loaded. The write then counts from it.

    :raises MissingChildError: no such child (``missing_rejected`` is sent); nothing was written.
    :raises CountingBypassError: an update action whose result is not known before sending, on what decides
      the stored child's counts.
    """
    for op in operations:
        if op.kind == "counted_delete" and op.basis is None:
            assert op.instance is not None
            op.basis = Stored.of_instance(op.instance) if names_parents(op.model, op.instance, -1) else \
                stored_child(op.model, op.instance)
        elif op.kind == "counted_update" and op.basis is None:  # an update of an instance never loaded
            assert op.instance is not None
            op.basis = stored_child(op.model, op.instance)
            prepare_update(op)


def policy_for(operations: Sequence[Operation], retry: Optional[RetryPolicy] = None) -> Optional[RetryPolicy]:
    """The retry policy of a write: ``retry``, else the first model's ``Meta.counter_retry``, else ``None`` (the
    default)."""
    if retry is not None:
        return retry
    for op in operations:
        policy = getattr(getattr(op.model, "Meta", None), "counter_retry", None)
        if isinstance(policy, RetryPolicy):
            return policy
    return None


def finish(plan: Plan, sent: Sent, earlier: int = 0, lost: bool = False) -> WriteResult:
    """The result of a committed plan; bumps local versions and sends ``child_added`` / ``child_removed`` /
    ``child_changed``.

    :param earlier: the requests earlier rounds of the same write made (refused, then sent again).
    :param lost: whether one of those had an attempt whose response was lost: it may have committed changes this
      result does not list (where the server forgets tokens), so the result is ``uncertain``.
    """
    children = []
    for item, slot in zip(plan.items, plan.slots):
        instance = slot.instance
        if instance is not None and slot.model._version_attribute_name and ("Put" in item or slot.kind == "edit"):
            instance.update_local_version_attribute()  # type: ignore[no-untyped-call]
        if slot.is_child:  # what the child is stored as now: what a later edit counts from
            assert instance is not None
            children.append(slot)
            if slot.kind == "delete":
                forget(instance)
            elif "Put" in item:
                remember(instance, item["Put"]["Item"])
            else:
                remember(instance, slot.stored if slot.stored is not None else instance.serialize(null_check=False))
    result = WriteResult(
        token=plan.token,
        changes=tuple(change for slot in children for change in slot.changes),
        consumed_capacity=tuple((sent.response or {}).get("ConsumedCapacity") or ()),
        attempts=earlier + sent.attempts,
        recovered=sent.response is None,
        uncertain=lost or (sent.response is None and not proven(plan, sent)),
        rollups_gone=tuple(change for slot in children for change in slot.counted.gone),
    )
    if child_removed.receivers or child_added.receivers or child_changed.receivers:
        for slot in children:
            for signal, changes in ((child_removed, slot.counted.of("removed")),
                                    (child_added, slot.counted.of("added")),
                                    (child_changed, slot.counted.of("changed"))):
                if changes:
                    send_safely(signal, slot.model, instance=slot.instance, changes=changes,
                                consumed_capacity=result.consumed_capacity, result=result)
    return result


def signal_refusals(refused: Sequence[Tuple[Slot, CounterError]]) -> None:
    """Send ``duplicate_rejected`` and ``missing_rejected`` for the refused children among ``refused``
    (``limit_rejected`` waits for the caller to know which children the limit refuses: all of a single write's,
    only those beyond the room in a bulk write)."""
    for slot, error in refused:
        if isinstance(error, DuplicateChildError):
            send_safely(duplicate_rejected, error.model, instance=slot.instance, error=error)
        elif isinstance(error, MissingChildError):
            send_safely(missing_rejected, error.model, instance=slot.instance, error=error)


def _counted_into(plan: Plan, error: CountedWriteError) -> List[Slot]:
    """The child slots whose changes add to the parent ``error`` names."""
    return [slot for slot in plan.children
            if any(change.parent is error.model and change.key == error.key and change.delta > 0
                   for change in slot.changes)]


def _create_missing_shards(error: ParentNotFoundError) -> bool:
    """Create the shard items of a parent stored without them (by code that predates its counter's shards, during
    a deploy); ``False`` when the parent itself is gone or nothing was missing."""
    assert error.model is not None
    try:
        return create_shards(error.model, [error.key]) > 0
    except (CounterError, PynamoDBException):  # the parent is gone (DoesNotExist), or kept changing
        return False
