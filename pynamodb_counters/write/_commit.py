"""
The commit: the one path by which every counted write reaches DynamoDB, for ``save()``, ``delete()`` and
``update()``, :class:`~pynamodb_counters.CountedTransaction` and bulk writes alike.

It is a unit of work (:class:`Work`): the writes are the caller's, frozen; what each counted write is counted from
(its stored child, the rollups found gone), the token and the attempts are the commit's own, kept here and never
on the writes. Its loop:

1. read what a write needs and does not know (the stored child of a key-only delete or of an update of an
   instance never loaded: one strongly consistent GetItem);
2. decide each counted write's changes (``_deltas.decide``) and plan the transaction (``_plan``);
3. send it (``_send``, retries of transient failures included);
4. committed: report and signal (:func:`finish`). Refused: ask each recovery (``_recoveries``) whether it applies,
   apply those that do and go back to 2; when none does, the refusal stands (:class:`Refused`).

A refusal is returned, not raised: a single write raises its most fundamental error, a bulk write drops the
refused children and commits the rest.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, NoReturn, Optional, Sequence, Tuple, Union

from .._results import CounterChange, WriteResult
from ..exceptions import (
    CountedWriteError,
    CounterError,
    DuplicateChildError,
    LimitExceededError,
    MissingChildError,
    TransactionError,
)
from ..signals import (
    child_added,
    child_changed,
    child_removed,
    duplicate_rejected,
    limit_rejected,
    missing_rejected,
    send_safely,
)
from ._actions import Action, ChildAction, ChildEdit
from ._deltas import Counting, counting_of, decide, names_parents
from ._plan import Plan, plan
from ._reads import stored_child
from ._recoveries import (
    RECOVERIES,
    Recovery,
    Round,
    explain,
    most_fundamental,
    next_token,
    proven,
    refusal_of,
    standing,
)
from ._send import DEFAULT_RETRY_POLICY, RetryPolicy, Sent, send
from ._stored import Stored, forget, remember
from ._writes import Write, WriteKind

__all__ = ["Done", "Refused", "Work", "commit", "policy_for"]


@dataclass(frozen=True)
class Done:
    """A committed write: its result, and the plan that committed (what each counted child's action was)."""

    plan: Plan
    result: WriteResult


@dataclass(frozen=True)
class Refused:
    """DynamoDB refused a plan; nothing was written, and ``duplicate_rejected`` / ``missing_rejected`` were sent
    (``limit_rejected`` waits for :meth:`raise_error`, or for the bulk write that knows which children it
    refuses).

    :ivar plan: the plan of the refused attempt.
    :ivar refused: each refused action, with its error.
    :ivar countings: what each write was counted from in that attempt (``None`` for one that counts nothing).
    """

    plan: Plan
    refused: List[Tuple[Action, CounterError]]
    countings: Tuple[Optional[Counting], ...]

    @property
    def error(self) -> CounterError:
        """The error a single write raises: the most fundamental refusal."""
        return most_fundamental([error for _, error in self.refused])

    def raise_error(self) -> NoReturn:
        """Raise :attr:`error` as a single write or a transaction does, sending ``limit_rejected`` first for each
        child of the refused write that adds to a full parent (the whole write is refused)."""
        error = self.error
        if isinstance(error, LimitExceededError):
            for action in _counted_into(self.plan, error):
                send_safely(limit_rejected, action.model, instance=action.instance, error=error)
        raise error


class Work:
    """The unit of work of one transaction: the caller's writes, and the commit's own state across attempts.

    :ivar writes: the caller's writes, as asked.
    :ivar countings: what each counted write is counted from (``None`` for one that counts nothing).
    :ivar token: the ``ClientRequestToken`` of the next attempt.
    :ivar requests: the requests the earlier rounds made: they count against the retry policy's attempts.
    :ivar lost: whether an earlier round had an attempt whose response was lost.
    :ivar used: the once-only recoveries applied.
    """

    def __init__(self, writes: Sequence[Write], token: str) -> None:
        self.writes = tuple(writes)
        self.countings: Tuple[Optional[Counting], ...] = tuple(counting_of(write) for write in self.writes)
        self.token = token
        self.requests = 0
        self.lost = False
        self.used: List[Recovery] = []

    def plan(self) -> Plan:
        """Decide each counted write's changes (recorded on its :class:`Counting`), and plan the transaction. No
        I/O.

        :raises CounterError: a write that cannot be planned (see ``_plan.plan`` and ``_deltas.decide``).
        """
        for write, counting in zip(self.writes, self.countings):
            if counting is not None:
                decide(write, counting)
        return plan(self.writes, self.countings, self.token)

    def read_unknown(self) -> None:
        """Read the stored child (one strongly consistent GetItem) where a counted write needs it and does not
        know it: a delete of an instance that cannot name its parents (built from its key alone), an update of an
        instance never loaded.

        :raises MissingChildError: no such child (``missing_rejected`` is sent); nothing was written.
        """
        for write, counting in zip(self.writes, self.countings):
            if counting is None or counting.basis is not None or write.kind is WriteKind.SAVE:
                continue
            assert write.instance is not None
            if write.kind is WriteKind.DELETE and names_parents(write.model, write.instance, -1):
                counting.basis = Stored.of_instance(write.instance)
            else:
                counting.basis = stored_child(write.model, write.instance)


def commit(writes: Sequence[Write], token: str, policy: Optional[RetryPolicy] = None, *,
           return_consumed_capacity: str = "TOTAL",
           on_request: Optional[Callable[[], None]] = None) -> Union[Done, Refused]:
    """Commit ``writes`` as one TransactWriteItems (see the module's loop).

    :param on_request: called once per request made, whatever its outcome (see ``_send.send``).
    :returns: the committed write, or the :class:`Refused` plan.
    :raises MissingChildError: a key-only delete, or an update of an instance never loaded, of a child that does
      not exist; nothing was written.
    :raises CounterError: a plan DynamoDB would refuse, a request it rejects, retries exhausted.
    """
    policy = policy or DEFAULT_RETRY_POLICY
    work = Work(writes, token)
    work.read_unknown()
    while True:
        planned = work.plan()
        try:
            sent = send(planned.actions[0].model, planned.items, planned.token, policy=policy, made=work.requests,
                        return_consumed_capacity=return_consumed_capacity, on_request=on_request)
        except TransactionError as error:
            raise explain(planned, error) from error.cause
        refusal = refusal_of(planned, sent) if sent.response is None else None
        if refusal is None:  # committed, now or on an attempt whose response was lost
            return Done(planned, finish(planned, sent, work.requests, work.lost))
        work.requests += sent.attempts
        work.lost = work.lost or sent.ambiguous
        round = Round(planned, sent, refusal)
        applied = [recovery for recovery in RECOVERIES if _may(work, recovery, policy)
                   and recovery.recover(work.countings, round)]
        if applied:
            work.used.extend(recovery for recovery in applied if recovery.once)
            if any(recovery.new_request for recovery in applied):
                work.token = next_token(work.token)
            continue
        errors = standing(work.countings, refusal)
        refused = [(action, error) for action, _, error in refusal.refused if any(error is e for e in errors)]
        signal_refusals(refused)
        return Refused(planned, refused, work.countings)


def _may(work: Work, recovery: Recovery, policy: RetryPolicy) -> bool:
    """Whether ``recovery`` may still apply to ``work``: within the retry policy's attempts (the requests of every
    round so far), and once if once."""
    if recovery.once and recovery in work.used:
        return False
    return not recovery.budgeted or work.requests < policy.max_attempts


def policy_for(writes: Sequence[Write], retry: Optional[RetryPolicy] = None) -> Optional[RetryPolicy]:
    """The retry policy of a write: ``retry``, else the first model's ``Meta.counter_retry``, else ``None`` (the
    default)."""
    if retry is not None:
        return retry
    for write in writes:
        policy = getattr(getattr(write.model, "Meta", None), "counter_retry", None)
        if isinstance(policy, RetryPolicy):
            return policy
    return None


def finish(plan: Plan, sent: Sent, earlier: int = 0, lost: bool = False) -> WriteResult:
    """The result of a committed plan; bumps local versions, records what each counted child is stored as now
    (what a later edit counts from) and sends ``child_added`` / ``child_removed`` / ``child_changed``.

    :param earlier: the requests earlier rounds of the same write made (refused, then sent again).
    :param lost: whether one of those had an attempt whose response was lost: it may have committed changes this
      result does not list (where the server forgets tokens), so the result is ``uncertain``.
    """
    children = plan.children
    changes: Tuple[CounterChange, ...] = ()
    gone: Tuple[CounterChange, ...] = ()
    for item, action in zip(plan.items, plan.actions):
        instance = getattr(action, "instance", None)
        if instance is not None and action.model._version_attribute_name and \
                ("Put" in item or isinstance(action, ChildEdit)):
            instance.update_local_version_attribute()
        if isinstance(action, ChildAction):
            changes += action.counted.changes
            gone += action.counted.gone
            stored = action.stored_after(next(iter(item.values())))
            if stored is None:
                forget(instance)
            else:
                remember(instance, stored)
    result = WriteResult(
        token=plan.token,
        changes=changes,
        consumed_capacity=tuple((sent.response or {}).get("ConsumedCapacity") or ()),
        attempts=earlier + sent.attempts,
        recovered=sent.response is None,
        uncertain=lost or (sent.response is None and not proven(plan, sent)),
        rollups_gone=gone,
    )
    if child_removed.receivers or child_added.receivers or child_changed.receivers:
        for action in children:
            for signal, kind in ((child_removed, "removed"), (child_added, "added"), (child_changed, "changed")):
                changes = action.counted.of(kind)
                if changes:
                    send_safely(signal, action.model, instance=action.instance, changes=changes,
                                consumed_capacity=result.consumed_capacity, result=result)
    return result


def signal_refusals(refused: Sequence[Tuple[Action, CounterError]]) -> None:
    """Send ``duplicate_rejected`` and ``missing_rejected`` for the refused children among ``refused``
    (``limit_rejected`` waits for the caller to know which children the limit refuses: all of a single write's,
    only those beyond the room in a bulk write)."""
    for action, error in refused:
        if not isinstance(action, ChildAction):
            continue
        if isinstance(error, DuplicateChildError):
            send_safely(duplicate_rejected, error.model, instance=action.instance, error=error)
        elif isinstance(error, MissingChildError):
            send_safely(missing_rejected, error.model, instance=action.instance, error=error)


def _counted_into(plan: Plan, error: CountedWriteError) -> List[ChildAction]:
    """The children whose changes add to the parent ``error`` names."""
    return [action for action in plan.children
            if any(change.parent is error.model and change.key == error.key and change.delta > 0
                   for change in action.counted.changes)]
