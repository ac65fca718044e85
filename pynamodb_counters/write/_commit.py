"""
The commit: the one path by which every counted write reaches DynamoDB, for ``save()``, ``delete()`` and
``update()``, :class:`~pynamodb_counters.CountedTransaction` and bulk writes alike.

It is a unit of work (:class:`UnitOfWork`): the writes are the caller's, frozen; what each counted write is counted from
(its stored child, the rollups found gone), which writes are left out, the token and the attempts are the
commit's own, kept here and never on the writes. The unit of work is their one owner: it alone assigns them,
deciding returns a frozen ``_deltas.Decision`` and a recovery returns the next ``_deltas.Attempt``. Its loop:

1. read what a write needs and does not know (the stored child of a key-only delete or of an update of an
   instance never loaded: one strongly consistent GetItem), and take it as what the write is counted from;
2. decide each counted write's changes from what it is counted from (``_deltas.decide``) and plan the
   transaction (``_plan``), leaving out the writes left out;
3. send it (``_send``, retries of transient failures included);
4. committed: report and signal (:func:`finish`). Rejected: ask each recovery (``_recoveries``) in turn, each
   from what the one before returned; where any applied, take the attempt the last returned and go back to 2.
   Where none did, send the refusal's signals and ask the recoveries that answer a refusal that stands: a bulk
   write's (its refused children left out) or a batch of stream records counted with markers (the records counted
   already left out); where
   one applies, take its attempt as a new transaction and go back to 2; else the refusal stands (:class:`Rejected`).

A refusal is returned, not raised: a single write raises its most fundamental error, a bulk write reports the
children left out (``on_left_out``) as they are.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator, List, NoReturn, Optional, Sequence, Tuple, Type, Union

from .._write_results import CounterChange, WriteResult
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
from ..transport._calls import Steps
from ..transport._pynamodb import tables_known
from ..transport._sync import run
from ._actions import Action, ChildAction, ChildEdit
from ._deltas import Attempt, counted_from, decide, names_parents
from ._fetches import child_read
from ._plan import Plan, plan
from ._recoveries import (
    RECOVERIES,
    Recovery,
    RefusedAttempt,
    explain,
    most_fundamental,
    next_token,
    proven,
    refusal_of,
    standing_refused,
)
from ._send import DEFAULT_RETRY_POLICY, RetryPolicy, Sent, transact
from ._stored import Stored, forget_stored, remember_stored
from ._writes import Write, WriteKind, model_spec

__all__ = ["Committed", "Rejected", "UnitOfWork", "commit", "commit_in_part", "committing", "policy_for", "policy_of"]


@dataclass(frozen=True)
class Committed:
    """A committed write: its result, and the plan that committed (what each counted child's action was)."""

    plan: Plan
    result: WriteResult


@dataclass(frozen=True)
class Rejected:
    """DynamoDB refused a plan; nothing was written, and ``duplicate_rejected`` / ``missing_rejected`` were sent
    (``limit_rejected`` waits for :meth:`raise_error`: a bulk write's commit sends it for each child it leaves
    out beyond a full parent's room).

    :ivar plan: the plan of the refused attempt (with what each write was decided as).
    :ivar refused: each refused action whose error stands, with it.
    """

    plan: Plan
    refused: List[Tuple[Action, CounterError]]

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


class UnitOfWork:
    """The unit of work of one transaction: the caller's writes, and the commit's own state across attempts, which
    only it assigns.

    :ivar writes: the caller's writes, as asked.
    :ivar attempt: what the next attempt counts from: each counted write's counting, and the writes left out.
    :ivar token: the ``ClientRequestToken`` of the next attempt.
    :ivar requests: the requests the earlier rounds of this transaction made: they count against the retry
      policy's attempts.
    :ivar lost: whether an earlier round of this transaction had an attempt whose response was lost.
    :ivar used: the once-only recoveries applied to this transaction.
    :ivar applied: how many times each recovery applied, in every transaction of the commit.
    """

    def __init__(self, writes: Sequence[Write], token: str) -> None:
        self.writes = tuple(writes)
        self.attempt = Attempt(tuple(counted_from(write) for write in self.writes))
        self.token = token
        self.requests = 0
        self.lost = False
        self.used: List[Recovery] = []
        self.applied: Counter[Recovery] = Counter()

    def models(self) -> Iterator[Type[Any]]:
        """Every model the writes' requests are built for, lazily (asked on PynamoDB 5 only): the writes' own and
        their relations' parents (each connection must know its table before a request is built,
        ``_pynamodb.tables_known``, which skips a table already known)."""
        for write in self.writes:
            yield write.model
            for relation in model_spec(write.model).declared:
                yield relation.parent_model

    @property
    def emptied(self) -> bool:
        """Whether the recoveries left every write out: nothing is left to send (an empty transaction is refused
        when it is planned)."""
        return bool(self.attempt.left_out) and len(self.attempt.out) == len(self.writes)

    def plan(self) -> Plan:
        """Decide each counted write's changes, from what the attempt counts it from, and plan the transaction of
        the writes not left out. No I/O.

        :raises CounterError: a write that cannot be planned (see ``_plan.plan`` and ``_deltas.decide``).
        """
        out = self.attempt.out
        decisions = tuple(None if counting is None or position in out else decide(write, counting)
                          for position, (write, counting) in enumerate(zip(self.writes, self.attempt.countings)))
        return plan(self.writes, decisions, self.token, out, self.attempt.floors)

    @property
    def unknown(self) -> bool:
        """Whether a counted write needs what :meth:`read_unknown` reads (a save never does)."""
        return any(counting is not None and counting.basis is None and write.kind not in _KNOWN
                   for write, counting in zip(self.writes, self.attempt.countings))

    def read_unknown(self) -> Steps[None]:
        """Read the stored child (one strongly consistent GetItem) where a counted write needs it and does not
        know it: a delete of an instance that cannot name its parents (built from its key alone), an update of an
        instance never loaded; a delete of an instance that names them counts from the instance as stored.

        :raises MissingChildError: no such child (``missing_rejected`` is sent); nothing was written.
        """
        countings = list(self.attempt.countings)
        for position, (write, counting) in enumerate(zip(self.writes, countings)):
            if counting is None or counting.basis is not None or write.kind in _KNOWN:
                continue  # a stream record's write is counted from its images
            assert write.instance is not None
            if write.kind is WriteKind.DELETE and names_parents(write.model, write.instance, -1):
                countings[position] = replace(counting, basis=Stored.of_instance(write.instance))
            else:
                countings[position] = replace(counting, basis=(yield from child_read(write.model, write.instance)))
        self.attempt = replace(self.attempt, countings=tuple(countings))

    def recover(self, cancelled: RefusedAttempt, recoveries: Sequence[Recovery], policy: RetryPolicy
                ) -> Steps[Optional[Attempt]]:
        """Ask ``recoveries`` in turn, each from the attempt the one before returned (the first from this one), and
        take the last attempt returned as the next: its token derived where one makes a new request, and its
        counts of attempts started afresh where one makes a new transaction. Returns the attempt replaced, where
        any applied; else ``None``, and nothing changes."""
        attempt = self.attempt
        applied: List[Recovery] = []
        for recovery in recoveries:
            if self._may(recovery, policy):
                following = (yield from recovery.steps(attempt, cancelled)) if recovery.asks \
                    else recovery.recover(attempt, cancelled)
                if following is not None:
                    attempt = following
                    applied.append(recovery)
        if not applied:
            return None
        earlier, self.attempt = self.attempt, attempt
        self.applied.update(applied)
        if any(recovery.new_transaction for recovery in applied):
            self.requests, self.lost, self.used = 0, False, []
        self.used.extend(recovery for recovery in applied if recovery.once)
        if any(recovery.new_request for recovery in applied):
            self.token = next_token(self.token)
        return earlier

    def _may(self, recovery: Recovery, policy: RetryPolicy) -> bool:
        """Whether ``recovery`` may still apply: within the retry policy's attempts (the requests of every round of
        this transaction so far), once if once, and at most ``max_attempts`` times if capped."""
        if recovery.once and recovery in self.used:
            return False
        if recovery.capped and self.applied[recovery] >= policy.max_attempts:
            return False
        return not recovery.budgeted or self.requests < policy.max_attempts


def commit(writes: Sequence[Write], token: str, policy: Optional[RetryPolicy] = None, *,
           return_consumed_capacity: str = "TOTAL",
           on_request: Optional[Callable[[], None]] = None) -> Union[Committed, Rejected]:
    """:func:`committing`, sent by the sync driver."""
    outcome = run(committing(writes, token, policy, return_consumed_capacity=return_consumed_capacity,
                             on_request=on_request))
    assert outcome is not None  # see committing()
    return outcome


def committing(writes: Sequence[Write], token: str, policy: Optional[RetryPolicy] = None, *,
               return_consumed_capacity: str = "TOTAL",
               on_request: Optional[Callable[[], None]] = None) -> Steps[Union[Committed, Rejected, None]]:
    """Commit ``writes`` as one TransactWriteItems, all or nothing (see the module's loop; the recoveries are
    ``_recoveries.RECOVERIES``).

    :param on_request: called once per request made, whatever its outcome (see ``_send.transact``).
    :returns: the committed write, or the :class:`Rejected` plan (never ``None``: only a recovery answering a
      standing refusal leaves every write out, and these never do).
    :raises MissingChildError: a key-only delete, or an update of an instance never loaded, of a child that does
      not exist; nothing was written.
    :raises CounterError: a plan DynamoDB would refuse, a request it rejects, retries exhausted.
    """
    return _commit(UnitOfWork(writes, token), policy or DEFAULT_RETRY_POLICY, RECOVERIES, return_consumed_capacity,
                   on_request, None)  # its recoveries never leave every write out: it ends with a plan, not None


def commit_in_part(writes: Sequence[Write], token: str, policy: Optional[RetryPolicy], recoveries: Sequence[Recovery],
                   *, on_request: Optional[Callable[[], None]] = None,
                   on_left_out: Optional[Callable[[int, CounterError], None]] = None
                   ) -> Union[Committed, Rejected, None]:
    """Commit ``writes`` as :func:`commit` does, with ``recoveries`` that may leave writes out where a refusal
    would stand (``_recoveries.BULK_RECOVERIES``, ``_recoveries.MARKER_RECOVERIES``): the rest is committed.

    :param on_left_out: called with the position of each write left out, and the error that left it out, as it is
      (``limit_rejected`` is sent first for a child left out for a full parent).
    :returns: the committed write (of the writes not left out), the :class:`Rejected` plan, or ``None`` where every
      write was left out.
    """
    return run(_commit(UnitOfWork(writes, token), policy or DEFAULT_RETRY_POLICY, recoveries, "TOTAL", on_request,
                       on_left_out))


def _commit(work: UnitOfWork, policy: RetryPolicy, recoveries: Sequence[Recovery], return_consumed_capacity: str,
            on_request: Optional[Callable[[], None]], on_left_out: Optional[Callable[[int, CounterError], None]]
            ) -> Steps[Union[Committed, Rejected, None]]:
    """The loop (see the module's docstring)."""
    first = [recovery for recovery in recoveries if not recovery.new_transaction]
    last = [recovery for recovery in recoveries if recovery.new_transaction]
    yield from tables_known(work.models())
    if work.unknown:
        yield from work.read_unknown()
    while not work.emptied:
        planned = work.plan()
        try:
            sent = yield from transact(planned.actions[0].model, planned.items, planned.token, policy=policy,
                                       made=work.requests, return_consumed_capacity=return_consumed_capacity,
                                       on_request=on_request)
        except TransactionError as error:
            raise explain(planned, error) from error.cause
        refusal = refusal_of(planned, sent) if sent.response is None else None
        if refusal is None:  # committed, now or on an attempt whose response was lost
            return Committed(planned, finish(planned, sent, work.requests, work.lost))
        work.requests += sent.attempts
        work.lost = work.lost or sent.ambiguous
        cancelled = RefusedAttempt(planned, sent, refusal)
        if (yield from work.recover(cancelled, first, policy)) is not None:
            continue
        refused = standing_refused(cancelled)
        signal_refusals(refused)
        earlier = yield from work.recover(cancelled, last, policy)
        if earlier is None:
            return Rejected(planned, refused)
        for position, why in work.attempt.left_out[len(earlier.left_out):]:
            instance = work.writes[position].instance
            if isinstance(why, LimitExceededError):
                send_safely(limit_rejected, type(instance), instance=instance, error=why)
            if on_left_out is not None:
                on_left_out(position, why)
    return None


_KNOWN = (WriteKind.SAVE, WriteKind.STREAMED)
"""The writes counted from what they hold (a save, a stream record's images): nothing to read first."""


def policy_for(writes: Sequence[Write], retry: Optional[RetryPolicy] = None) -> Optional[RetryPolicy]:
    """The retry policy of a write: ``retry``, else the first model's ``Meta.counter_retry``, else ``None`` (the
    default)."""
    return policy_of([write.model for write in writes], retry)


def policy_of(models: Sequence[Type[Any]], retry: Optional[RetryPolicy] = None) -> Optional[RetryPolicy]:
    """``retry``, else the first of ``models``' ``Meta.counter_retry``, else ``None`` (the default)."""
    if retry is not None:
        return retry
    for model in models:
        policy = getattr(getattr(model, "Meta", None), "counter_retry", None)
        if isinstance(policy, RetryPolicy):
            return policy
    return None


def finish(plan: Plan, sent: Sent, earlier: int = 0, lost: bool = False) -> WriteResult:
    """The result of a committed plan; bumps local versions, records what each counted child is stored as now
    (what a later edit counts from) and sends ``child_added`` / ``child_removed`` / ``child_changed`` (but for a
    stream record counted outside its parent's partition: its handler sends them, once per record, with the
    handler's result).

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
                forget_stored(instance)
            else:
                remember_stored(instance, stored)
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
            if action.write.kind is WriteKind.STREAMED:
                continue
            for signal, kind in ((child_removed, "removed"), (child_added, "added"), (child_changed, "changed")):
                changes = action.counted.of(kind)
                if changes:
                    send_safely(signal, action.model, instance=action.instance, changes=changes,
                                consumed_capacity=result.consumed_capacity, result=result)
    return result


def signal_refusals(refused: Sequence[Tuple[Action, CounterError]]) -> None:
    """Send ``duplicate_rejected`` and ``missing_rejected`` for the refused children among ``refused``
    (``limit_rejected`` waits until it is known which children the limit refuses: all of a single write's, only
    those a bulk write leaves out, beyond the room)."""
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
