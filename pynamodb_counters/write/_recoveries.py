"""
Reading a cancelled TransactWriteItems back onto its plan (pure, no I/O): which actions DynamoDB refused, each
with the error its action reads into it (:meth:`~pynamodb_counters.write._actions.Action.refusal`); whether the
refusal is in fact this write's own commit, seen again after a lost response; which error wins among several;
and what a rejected request (a missing table, an item too large) means.

What a refusal teaches, one small named recovery each (:data:`RECOVERIES`, in the order the commit asks them):
a refused attempt wrote nothing, so the write is counted again from what DynamoDB returned and sent again, in the
same call, within its retry policy. A recovery assigns nothing: it returns the next :class:`Attempt` (each write's
:class:`~pynamodb_counters.write._deltas.CountedFrom`, replaced where it learned otherwise, and the writes left out)
or ``None`` where it does not apply, and the commit's unit of work takes what it returns. Two read or write the
table (:attr:`Recovery.asks`): :class:`StreamParentsGone` reads a shard item, :class:`MissingShards` creates shard
items; each is then a decision loop (:meth:`Recovery.steps`) that yields its requests, sent by the commit's driver.

* :class:`StaleBasis`: the stored child counts otherwise than the state its deltas came from (an instance
  edited in memory, a child changed since it was loaded, or created again since an edit found it deleted): count
  from the stored child returned.
* :class:`DeletedMeanwhile`: an edit whose child was deleted since it was loaded: save it as new.
* :class:`RollupsReturned`: a rollup found gone is stored again (a first count created it): count into it.
* :class:`RollupsGone`: the refusal is made of gone rollups alone: leave out what the children counted in them.
* :class:`StreamParentsGone`: the refusal is made of parents gone (deleted, shard items and all, or never
  created) that stream records counted with markers count into (children deleted by TTL, children counted from
  the stream outside their parent's partition): leave out what those records counted in them.
* :class:`MissingShards`: a parent stored before its counter was sharded: create its shard items, send again.

A commit of stream records counted with markers (:data:`MARKER_RECOVERIES`) asks one more first:

* :class:`FlooredAtZero`: decrements by stream records counted outside their parent's partition that would take
  a counter below zero (it had drifted): take off what the counter holds, never more, and send again.

Where a refusal would stand, a commit that may commit in part asks more (:data:`BULK_RECOVERIES`,
:data:`MARKER_RECOVERIES`); each makes the writes it keeps a new transaction:

* :class:`RefusedLeftOut`: a bulk write's refused children are left out, each with the error its own write would
  raise, and the rest sent again.
* :class:`RoomMadeMeanwhile`: a bulk write refused on limits alone, every child fitting the room the stored
  counts leave: the parent changed meanwhile, send the same children again.
* :class:`TakenOffAlready`: stream records whose marker is stored (a batch delivered again) are left out, the
  rest sent again.

Each says whether it counts against the retry policy's attempts, whether the write is then a new request (a
derived token), whether it may apply only once, and whether it makes a new transaction.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Dict, List, Optional, Sequence, Set, Tuple

from pynamodb.exceptions import PynamoDBException

from .._costs import ITEM_LIMIT_BYTES, item_bytes
from ..declare._stored_names import EDIT_ID, SHARD_COUNT, WRITE_ID
from ..exceptions import (
    ConditionFailedError,
    CounterError,
    CounterUnderflowError,
    DuplicateChildError,
    LimitExceededError,
    MissingChildError,
    ParentNotFoundError,
    TransactionError,
)
from ..transport._calls import Steps
from ._actions import (
    CHECK_FAILED,
    Action,
    Cancellation,
    ChildAction,
    ChildDelete,
    ChildEdit,
    ChildPut,
    ParentUpdate,
    RollupCheck,
)
from ._deltas import Attempt, Decision, Parent
from ._fetches import shards_read
from ._plan import Plan
from ._send import RETRYABLE_REASONS, Sent
from ._shard_items import shards_created
from ._stored import Stored
from ._writes import WriteKind

__all__ = ["BULK_RECOVERIES", "DeletedMeanwhile", "FlooredAtZero", "MARKER_RECOVERIES", "StreamParentsGone",
           "MissingShards", "RECOVERIES", "Recovery", "RefusedAttempt", "RefusedLeftOut", "Refusal", "RollupsGone",
           "RollupsReturned", "RoomMadeMeanwhile", "StaleBasis", "TakenOffAlready", "explain", "most_fundamental",
           "next_token", "proven", "refusal_of", "standing_errors", "standing_refused"]

# Which error wins when DynamoDB flags several actions: the most fundamental first. A missing child outranks an
# underflow: deleting an absent like of a post whose counter drifted to 0 flags both, and the floor only failed
# because of the decrement that the missing child would have made.
_PRIORITY = (TransactionError, ParentNotFoundError, DuplicateChildError, MissingChildError,
             LimitExceededError, CounterUnderflowError, ConditionFailedError)


def most_fundamental(errors: Sequence[CounterError]) -> CounterError:
    """The error a counted write raises among ``errors``: the first in the order request error, missing or foreign
    parent, duplicate child, missing child, limit exceeded, underflow, failed condition."""
    return min(errors, key=lambda error: next((rank for rank, kind in enumerate(_PRIORITY)
                                              if isinstance(error, kind)), len(_PRIORITY)))


@dataclass(frozen=True)
class Refusal:
    """A plan DynamoDB cancelled: each refused action with what DynamoDB said of it and the error it means."""

    refused: Tuple[Tuple[Action, Cancellation, CounterError], ...]

    @property
    def errors(self) -> List[CounterError]:
        """The errors, in request order."""
        return [error for _, _, error in self.refused]


def refusal_of(plan: Plan, sent: Sent) -> Optional[Refusal]:
    """Each action DynamoDB refused in a cancelled transaction, with its error; ``None`` when the transaction had
    in fact committed, on an earlier attempt whose response was lost.

    :raises TransactionError: reasons that do not match the plan, or none naming a cause.
    """
    reasons: Sequence[Dict[str, Any]] = sent.cancellation_reasons or []
    if len(reasons) != len(plan.actions):
        raise TransactionError(f"DynamoDB cancelled the transaction with {len(reasons)} reasons for "
                               f"{len(plan.actions)} actions: {sent.error}", sent.error)
    said = [Cancellation(reason.get("Code"), reason.get("Item"), reasons, sent.error, reason.get("Message", ""))
            for reason in reasons]
    failures = [(action, cancel) for action, cancel in zip(plan.actions, said) if (cancel.code or "None") != "None"]
    if any(cancel.code == CHECK_FAILED for _, cancel in failures):
        # a failed condition is final; a conflict flagged beside it would only have delayed the same answer
        failures = [(action, cancel) for action, cancel in failures if cancel.code not in RETRYABLE_REASONS]
    if any(action.own(cancel, plan.token) for action, cancel in failures):
        return None
    if sent.ambiguous and _own_deletes(plan, said):
        return None
    if not failures:
        raise TransactionError(f"DynamoDB cancelled the transaction without naming a cause: {sent.error}",
                               sent.error)
    return Refusal(tuple((action, cancel, action.error_of(cancel)) for action, cancel in failures))


def proven(plan: Plan, sent: Sent) -> bool:
    """Whether a write recovered after a lost response was recognised by its write or edit id, rather than taken
    from deletes finding their children gone."""
    reasons = sent.cancellation_reasons or []
    return any(action.own(Cancellation(reason.get("Code"), reason.get("Item"), reasons, sent.error), plan.token)
               for action, reason in zip(plan.actions, reasons))


def _own_deletes(plan: Plan, said: Sequence[Cancellation]) -> bool:
    """After an ambiguous attempt: whether this refusal is what our own committed deletes leave behind.

    Every counted delete finds its child gone, and the only other refusals are parents' conditions (the floor of
    zero our own decrement may now fail) or a gone rollup's check. A plan with a counted Put cannot match: had it
    committed, the Put would have been recognised by its write id instead.
    """
    children = [(action, cancel) for action, cancel in zip(plan.actions, said) if isinstance(action, ChildAction)]
    others = [(action, cancel) for action, cancel in zip(plan.actions, said)
              if not isinstance(action, ChildAction)]
    return bool(children) and all(
        isinstance(action, ChildDelete) and cancel.code == CHECK_FAILED and not cancel.item
        for action, cancel in children
    ) and all((cancel.code or "None") == "None" or
              cancel.code == CHECK_FAILED and isinstance(action, (ParentUpdate, RollupCheck))
              for action, cancel in others)


def next_token(token: str) -> str:
    """The token of a request sent again with other parameters (a token names one request): derived, so that
    the caller's own retry of the same call derives the same tokens."""
    return str(uuid.uuid5(uuid.NAMESPACE_OID, token))


_LIBRARY_ATTRIBUTES = frozenset((WRITE_ID, EDIT_ID, SHARD_COUNT.attr_name))


def explain(plan: Plan, error: TransactionError) -> TransactionError:
    """``error``, or an error that says what DynamoDB refused in ``plan``: a table that does not exist (named,
    with the likely cause), or an item too large (how much of the largest Put the library adds: the write id, a
    sharded parent's shard count, and whether the item fits without it)."""
    if error.cause_response_code == "ResourceNotFoundException":
        tables = sorted({request.get("TableName", "?") for item in plan.items for request in item.values()})
        return TransactionError(
            f"DynamoDB has no table {' or '.join(map(repr, tables))} where this transaction was sent (its region "
            f"and endpoint): create it (Model.create_table(), once), or check the models' Meta.table_name, region "
            f"and host. Nothing was written ({error})", error.cause)
    if error.cause_response_code != "ValidationException" or "item size" not in str(error).lower():
        return error
    puts = []
    for item, action in zip(plan.items, plan.actions):
        stored = item.get("Put", {}).get("Item", {})
        own = {name: value for name, value in stored.items() if name not in _LIBRARY_ATTRIBUTES}
        if len(own) < len(stored):
            puts.append((item_bytes(stored), item_bytes(own), action))
    if not puts:
        return error
    whole, own_bytes, action = max(puts, key=lambda put: put[0])
    verdict = (": it fits DynamoDB's item limit without them, not with them" if whole > ITEM_LIMIT_BYTES >= own_bytes
               else "")
    return TransactionError(
        f"DynamoDB refused an item as too large. {action.label} is {own_bytes} bytes of its own plus "
        f"{whole - own_bytes} bytes the library stores with it (its write id {WRITE_ID!r}, which recognises a "
        f"retried write){verdict}. DynamoDB allows {ITEM_LIMIT_BYTES} bytes per item, attribute names included: keep "
        f"counted items {whole - own_bytes} bytes further under it. Nothing was written ({error})", error.cause)


@dataclass(frozen=True)
class RefusedAttempt:
    """One refused attempt of a write: its plan (with what each write was decided as), what sending it returned,
    and what DynamoDB refused."""

    plan: Plan
    sent: Sent
    refusal: Refusal

    @property
    def decisions(self) -> Tuple[Optional[Decision], ...]:
        """What each write was decided as in the refused attempt (``None`` for one that counts nothing or was left
        out), by position."""
        return self.plan.decisions


class Recovery:
    """A recovery from a refusal: :meth:`recover` returns the next attempt (what the writes are counted from, and
    which are left out) where it applies."""

    budgeted: ClassVar[bool] = True
    """It counts against the retry policy's attempts: it applies only while the write's requests so far are fewer
    than ``max_attempts``, and the round it starts continues their count."""
    new_request: ClassVar[bool] = True
    """The write is then sent as a new request, under a token derived from the first."""
    once: ClassVar[bool] = False
    """It applies at most once per write (per transaction)."""
    new_transaction: ClassVar[bool] = False
    """It answers a refusal that would otherwise stand: it is asked only when no other recovery applies, once the
    refusal's signals are sent, and the writes it keeps are sent as a new transaction (the retry policy's attempts,
    the once-only recoveries and the responses lost count afresh)."""
    capped: ClassVar[bool] = False
    """It applies at most the retry policy's ``max_attempts`` times per commit, whatever the requests made."""
    asks: ClassVar[bool] = False
    """It reads or writes the table to decide: it is a decision loop (:meth:`steps`), not :meth:`recover`."""

    def recover(self, attempt: Attempt, cancelled: RefusedAttempt) -> Optional[Attempt]:
        """The next attempt, from ``attempt`` (what the refused one counted from, as the recoveries asked before
        this one left it) and what ``cancelled`` teaches; ``None`` where it does not apply."""
        raise NotImplementedError

    def steps(self, attempt: Attempt, cancelled: RefusedAttempt) -> Steps[Optional[Attempt]]:
        """:meth:`recover` of a recovery that :attr:`asks`: a decision loop yielding the requests it needs."""
        raise NotImplementedError


def _children(cancelled: RefusedAttempt) -> List[Tuple[ChildAction, Cancellation]]:
    """The counted children's own refused actions, with what DynamoDB said of them (a failed condition)."""
    return [(action, said) for action, said, _ in cancelled.refusal.refused
            if isinstance(action, ChildAction) and said.code == CHECK_FAILED]


class StaleBasis(Recovery):
    """A counted edit, update or delete refused because the stored child counts otherwise than the state its
    deltas were counted from; or an edit sent as a create (its child had been deleted) refused because the child
    was created again meanwhile: each is counted from the stored child the refusal returned (the latter is an
    edit again)."""

    def recover(self, attempt: Attempt, cancelled: RefusedAttempt) -> Optional[Attempt]:
        learned: Dict[int, Dict[str, Any]] = {}
        for action, said in _children(cancelled):
            if not said.item or not action.relearns:
                continue
            if isinstance(action, ChildPut):
                if action.decision.counting.recreated and not action.own(said, cancelled.plan.token):
                    learned[action.index] = dict(basis=Stored(action.model, said.item))
                continue
            stored = relearned(action, said.item)
            if stored is not None:
                learned[action.index] = dict(basis=stored)
        return attempt.learned(learned)


class DeletedMeanwhile(Recovery):
    """An edit refused because its child was deleted since it was loaded: saving it again creates it, counted
    as new (``save()`` writes the whole item, as PynamoDB's does)."""

    def recover(self, attempt: Attempt, cancelled: RefusedAttempt) -> Optional[Attempt]:
        return attempt.learned({action.index: dict(basis=None, recreated=True) for action, said in _children(cancelled)
                                if isinstance(action, ChildEdit) and action.write.kind is WriteKind.SAVE
                                and not said.item})


class RollupsReturned(Recovery):
    """A write sent without its changes to rollups found gone, refused because one is stored again (created since
    by a first count): the children count into it after all."""

    def recover(self, attempt: Attempt, cancelled: RefusedAttempt) -> Optional[Attempt]:
        returned: Set[Parent] = set()
        for action, said, _ in cancelled.refusal.refused:
            if isinstance(action, RollupCheck) and said.code == CHECK_FAILED and said.item or \
                    isinstance(action, ParentUpdate) and action.returned(said):
                returned.add((action.model, action.key))
        if not returned:
            return None
        return replace(attempt, countings=tuple(None if counting is None else replace(counting,
                                                                                      gone=counting.gone - returned)
                                                for counting in attempt.countings))


class RollupsGone(Recovery):
    """A refusal made of gone rollups alone: rollups, fed only by relations creating their parents
    (``create_parent=True``), whose Update found no item while it needed one, since something besides first
    counts went into it (a decrement, a change of amount) of children counted in the rollup that expired. What
    those children counted there is left out; first counts create it again.

    Beside any other refusal (a missing child above all, whose rollup is absent because it was never counted),
    the other refusal stands, and nothing is left out on the strength of a state that another writer may change
    before the write is sent again (:func:`standing`)."""

    def recover(self, attempt: Attempt, cancelled: RefusedAttempt) -> Optional[Attempt]:
        gone, others = split(cancelled.decisions, cancelled.refusal)
        if not gone or others:
            return None
        return _left_gone(attempt, gone)


class StreamParentsGone(Recovery):
    """A refusal made of parents gone alone, each fed only by stream records counted with markers (children
    deleted by TTL, taken off by ``count_expiries``; children counted from the stream outside their parent's
    partition, by ``count_stream``): an Update of the parent, or of one of its shard items, found no item, and the
    parent item is gone too (read once, for a shard item: a parent stored before its counter was sharded is
    :class:`MissingShards`'). Its counters went with it, or it never was: what the records counted there is left
    out, checked still absent."""

    asks = True

    def steps(self, attempt: Attempt, cancelled: RefusedAttempt) -> Steps[Optional[Attempt]]:
        gone: List[Tuple[int, Parent]] = []
        for action, said, error in cancelled.refusal.refused:
            if not (isinstance(action, ParentUpdate) and isinstance(error, ParentNotFoundError) and not said.item):
                return None
            feeding = _feeding(cancelled.decisions, action)
            if not feeding or not all(decision.counting.marked for _, decision, _, _ in feeding):
                return None
            if action.shard and (yield from shards_read(action.model, [action.key], 1,
                                                         consistent_read=True))[action.key][0]:
                return None
            gone.extend((position, (action.model, action.key)) for position, _, _, _ in feeding)
        return _left_gone(attempt, gone)


class MissingShards(Recovery):
    """A refusal naming a missing shard item of a parent stored before its counter was sharded (by code that
    predates its shards, during a deploy): its shard items are created and the same request is sent again,
    once."""

    budgeted = False
    new_request = False
    once = True
    asks = True

    def steps(self, attempt: Attempt, cancelled: RefusedAttempt) -> Steps[Optional[Attempt]]:
        error = most_fundamental(standing_errors(cancelled.decisions, cancelled.refusal))
        if not (isinstance(error, ParentNotFoundError) and error.shard):
            return None
        assert error.model is not None
        try:
            created = yield from shards_created(error.model, [error.key])
        except (CounterError, PynamoDBException):  # the parent is gone (DoesNotExist), or kept changing
            return None
        return attempt if created > 0 else None  # counted from the same: the same request, sent again


class RefusedLeftOut(Recovery):
    """A bulk write's refused children are left out, each with the one error it is reported with (the one a
    single write of it would raise, :func:`blamed`), and the rest sent again as a new transaction."""

    budgeted = False
    new_transaction = True

    def recover(self, attempt: Attempt, cancelled: RefusedAttempt) -> Optional[Attempt]:
        blame = blamed(cancelled)
        if not blame:
            return None
        return replace(attempt, left_out=attempt.left_out + tuple(sorted(blame.items(), key=lambda pair: pair[0])))


class RoomMadeMeanwhile(Recovery):
    """A bulk write refused on limits alone, blamed on none of its children: each fits the room the stored counts
    leave, so the parent changed meanwhile. The same children are sent again as a new transaction, at most the
    retry policy's ``max_attempts`` times."""

    budgeted = False
    new_transaction = True
    capped = True

    def recover(self, attempt: Attempt, cancelled: RefusedAttempt) -> Optional[Attempt]:
        if blamed(cancelled) or not all(isinstance(error, LimitExceededError)
                                        for _, error in standing_refused(cancelled)):
            return None
        return attempt


class FlooredAtZero(Recovery):
    """A refusal naming decrements below zero of counters fed only by stream records counted outside their
    parent's partition (a ``REMOVE`` never takes a counter below zero: it had drifted, and an audit finds it): each
    such counter takes off what it holds, never more (its floor, kept for the commit's next attempts), and the
    write is sent again."""

    def recover(self, attempt: Attempt, cancelled: RefusedAttempt) -> Optional[Attempt]:
        streamed = {action.index for action in cancelled.plan.children if action.write.kind is WriteKind.STREAMED}
        floors = []
        for action, _, error in cancelled.refusal.refused:
            if not (isinstance(action, ParentUpdate) and isinstance(error, CounterUnderflowError)
                    and error.attribute is not None):
                continue
            feeding = _feeding(cancelled.decisions, action)
            if feeding and all(position in streamed for position, _, _, _ in feeding):
                held = error.stored if isinstance(error.stored, int) and error.stored > 0 else 0
                floors.append((action.where, error.attribute, -held))
        return replace(attempt, floors=attempt.floors + tuple(floors)) if floors else None


class TakenOffAlready(Recovery):
    """Stream records counted with markers (expiries, records counted outside their parent's partition) refused
    because their marker is stored (a batch delivered again: counted before) are left out, and the rest sent again
    as a new transaction."""

    budgeted = False
    new_transaction = True

    def recover(self, attempt: Attempt, cancelled: RefusedAttempt) -> Optional[Attempt]:
        again = tuple((action.index, error) for action, error in standing_refused(cancelled)
                      if isinstance(action, ChildAction) and action.write.kind.marked
                      and isinstance(error, DuplicateChildError))
        return replace(attempt, left_out=attempt.left_out + again) if again else None


RECOVERIES: Tuple[Recovery, ...] = (StaleBasis(), DeletedMeanwhile(), RollupsReturned(), RollupsGone(),
                                    StreamParentsGone(), MissingShards())
"""Every recovery of a commit of the whole transaction or nothing, in the order the commit asks them."""

BULK_RECOVERIES: Tuple[Recovery, ...] = RECOVERIES + (RefusedLeftOut(), RoomMadeMeanwhile())
"""A bulk write's: its refused children left out, the rest committed."""

MARKER_RECOVERIES: Tuple[Recovery, ...] = RECOVERIES + (FlooredAtZero(), TakenOffAlready())
"""The stream handlers' (:func:`~pynamodb_counters.streams.count_expiries`, and
:func:`~pynamodb_counters.streams.count_stream` outside a parent's partition): counters floored at zero, records
counted already left out, the rest committed."""


def _left_gone(attempt: Attempt, gone: Sequence[Tuple[int, Parent]]) -> Optional[Attempt]:
    """``attempt`` with each parent in ``gone`` left out of what the write at its position counts."""
    found: Dict[int, Set[Parent]] = {}
    for position, parent in gone:
        found.setdefault(position, set()).add(parent)
    changes: Dict[int, Dict[str, Any]] = {}
    for position, parents in found.items():
        counting = attempt.countings[position]
        assert counting is not None
        changes[position] = dict(gone=counting.gone | parents)
    return attempt.learned(changes)


def split(decisions: Sequence[Optional[Decision]], refusal: Refusal
          ) -> Tuple[List[Tuple[int, Parent]], List[CounterError]]:
    """A refusal's gone rollups, each with the position of each write that counts into it, and its other
    errors."""
    gone: List[Tuple[int, Parent]] = []
    others: List[CounterError] = []
    for action, said, error in refusal.refused:
        feeding = _feeding(decisions, action) if isinstance(action, ParentUpdate) and not action.shard and \
            isinstance(error, ParentNotFoundError) and not said.item else []
        if feeding and all(relation.create_parent for _, _, relation, _ in feeding) and \
                not all(first for _, _, _, first in feeding):
            gone.extend((position, (action.model, action.key)) for position, _, _, _ in feeding)
        else:
            others.append(error)
    return gone, others


def standing_errors(decisions: Sequence[Optional[Decision]], refusal: Refusal) -> List[CounterError]:
    """The errors a refused write answers with: beside another refusal, a gone rollup is none."""
    _, others = split(decisions, refusal)
    return others or refusal.errors


def standing_refused(cancelled: RefusedAttempt) -> List[Tuple[Action, CounterError]]:
    """Each refused action whose error stands (:func:`standing`), with it, in request order."""
    errors = standing_errors(cancelled.decisions, cancelled.refusal)
    return [(action, error) for action, _, error in cancelled.refusal.refused if any(error is e for e in errors)]


def _feeding(decisions: Sequence[Optional[Decision]], update: Action
             ) -> List[Tuple[int, Decision, Any, bool]]:
    """The writes whose changes go to ``update``'s item, each with its position, its decision, the relation and
    whether it is a first count."""
    return [(position, decision, relation, first) for position, decision in enumerate(decisions)
            if decision is not None
            for first, pairs in ((False, decision.deltas.removed), (True, decision.deltas.added),
                                 (False, decision.deltas.changed))
            for relation, change in pairs if change.parent is update.model and change.key == update.key]


def blamed(cancelled: RefusedAttempt) -> Dict[int, CounterError]:
    """Which writes (by position) a bulk write's refusal is about, each with the one error it is reported with: of
    its own action's refusal and its parents' refusals, the one a single write of it would raise
    (:func:`most_fundamental`).

    A parent's failed floor is not blamed on its other children when one of its children was found missing in
    the same round: that child's decrement, never to be applied, may be all that failed the floor (the rest are
    sent again, and a real underflow shows again then).

    A limit is admission control, exactly: of the children adding to a full (or nearly full) parent, those that
    fit in the room the stored count leaves are kept, in input order, and only the others are refused
    (:exc:`~pynamodb_counters.exceptions.LimitExceededError`)."""
    refused = standing_refused(cancelled)
    decisions = [(position, decision) for position, decision in enumerate(cancelled.decisions) if decision is not None]

    def counted_into(action: Action, decision: Decision) -> bool:
        return any(c.parent is action.model and c.key == action.key and c.shard == action.shard
                   for c in decision.deltas.changes) or \
            (isinstance(action, RollupCheck) and (action.model, action.key) in decision.gone)

    errors: Dict[int, List[CounterError]] = {}
    for action, error in refused:
        if isinstance(action, ChildAction):
            errors.setdefault(action.index, []).append(error)
    missing = [decision for position, decision in decisions
               if any(isinstance(error, MissingChildError) for error in errors.get(position, ()))]
    for action, error in refused:
        if isinstance(action, ChildAction):
            continue
        if isinstance(error, CounterUnderflowError) and any(counted_into(action, decision) for decision in missing):
            continue
        admitted = _admitted(action, error, decisions) if isinstance(error, LimitExceededError) else set()
        for position, decision in decisions:
            if counted_into(action, decision) and position not in admitted:
                errors.setdefault(position, []).append(error)
    return {position: most_fundamental(found) for position, found in errors.items()}


def _admitted(parent: Action, error: LimitExceededError, decisions: List[Tuple[int, Decision]]) -> Set[int]:
    """The children, by position, that fit in the room a limited parent has: every child taking from the
    counter, and, in input order, each one adding to it while the room (the limit, less the stored count, plus
    what the others take) lasts."""
    def delta(decision: Decision) -> int:
        return sum(c.delta for c in decision.deltas.changes
                   if c.parent is parent.model and c.key == parent.key and c.attribute == error.attribute)

    room = error.limit - error.stored - sum(delta(decision) for _, decision in decisions if delta(decision) < 0)
    admitted = set()
    for position, decision in decisions:
        change = delta(decision)
        if change <= 0 or change <= room:
            admitted.add(position)
            room -= max(change, 0)
    return admitted


def relearned(action: ChildAction, item: Any) -> Optional[Stored]:
    """The stored child ``item`` (returned by a refused counted edit, update or delete), when it is stored
    otherwise than the basis its deltas were counted from: when an attribute its condition covers (what decided
    its deltas, ``Decision.decided_by``) holds another raw value; else ``None`` (the caller's own condition, or a
    version, refused it)."""
    basis = action.decision.basis
    decided_by = action.decision.decided_by
    if basis is None or decided_by is None:
        return None
    stored = Stored(basis.model, item)
    return stored if stored.differs(basis, decided_by) else None
