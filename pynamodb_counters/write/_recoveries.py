"""
Reading a cancelled TransactWriteItems back onto its plan, pure, no I/O: which actions DynamoDB refused, each
with the error its action reads into it (:meth:`~pynamodb_counters.write._actions.Action.refusal`); whether the
refusal is in fact this write's own commit, seen again after a lost response; which error wins among several;
and what a rejected request (a missing table, an item too large) means.

What a refusal teaches, one small named recovery each (:data:`RECOVERIES`, in the order the commit asks them):
a refused attempt wrote nothing, so the write is counted again from what DynamoDB returned and sent again, in the
same call, within its retry policy.

* :class:`StaleBasis`: the stored child counts otherwise than the state its deltas came from (an instance
  edited in memory, a child changed since it was loaded, or created again since an edit found it deleted): count
  from the stored child returned.
* :class:`DeletedMeanwhile`: an edit whose child was deleted since it was loaded: save it as new.
* :class:`RollupsReturned`: a rollup found gone is stored again (a first count created it): count into it.
* :class:`RollupsGone`: the refusal is made of gone rollups alone: leave out what the children counted in them.
* :class:`ExpiredParentsGone`: the refusal is made of parents gone (deleted, shard items and all) that children
  deleted by TTL are taken off: leave out what those children counted in them, as their counters went with them.
* :class:`MissingShards`: a parent stored before its counter was sharded: create its shard items, send again.

Each says whether it counts against the retry policy's attempts, whether the write is then a new request (a
derived token) and whether it may apply only once.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, ClassVar, Dict, List, Optional, Sequence, Set, Tuple

from pynamodb.exceptions import PynamoDBException

from .._costs import ITEM_LIMIT_BYTES, item_bytes
from ..declare._base import EDIT_ID, SHARD_COUNT, WRITE_ID
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
from ._deltas import Counting, Parent
from ._plan import Plan
from ._reads import read_shards
from ._send import RETRYABLE_REASONS, Sent
from ._shard_items import create_shards
from ._stored import Stored
from ._writes import WriteKind

__all__ = ["DeletedMeanwhile", "ExpiredParentsGone", "MissingShards", "RECOVERIES", "Recovery", "Refusal",
           "RollupsGone", "RollupsReturned", "Round", "StaleBasis", "explain", "most_fundamental", "next_token",
           "proven", "refusal_of", "standing"]

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
    return Refusal(tuple((action, cancel, action.refusal(cancel)) for action, cancel in failures))


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
class Round:
    """One refused attempt of a write: its plan, what sending it returned, and what DynamoDB refused."""

    plan: Plan
    sent: Sent
    refusal: Refusal


class Recovery:
    """A recovery from a refusal: :meth:`recover` applies it to what the writes are counted from, and says
    whether it did."""

    budgeted: ClassVar[bool] = True
    """It counts against the retry policy's attempts: it applies only while the write's requests so far are fewer
    than ``max_attempts``, and the round it starts continues their count."""
    new_request: ClassVar[bool] = True
    """The write is then sent as a new request, under a token derived from the first."""
    once: ClassVar[bool] = False
    """It applies at most once per write."""

    def recover(self, countings: Sequence[Optional[Counting]], round: Round) -> bool:
        raise NotImplementedError


def _children(round: Round) -> List[Tuple[ChildAction, Cancellation]]:
    """The counted children's own refused actions, with what DynamoDB said of them (a failed condition)."""
    return [(action, said) for action, said, _ in round.refusal.refused
            if isinstance(action, ChildAction) and said.code == CHECK_FAILED]


class StaleBasis(Recovery):
    """A counted edit, update or delete refused because the stored child counts otherwise than the state its
    deltas were counted from; or an edit sent as a create (its child had been deleted) refused because the child
    was created again meanwhile: each is counted from the stored child the refusal returned (the latter is an
    edit again)."""

    def recover(self, countings: Sequence[Optional[Counting]], round: Round) -> bool:
        learned = False
        for action, said in _children(round):
            counting = action.counting
            if not said.item or not action.relearns:
                continue
            if isinstance(action, ChildPut):
                if counting.recreated and not action.own(said, round.plan.token):
                    counting.basis = Stored(action.model, said.item)
                    learned = True
                continue
            stored = relearned(action, said.item)
            if stored is not None:
                counting.basis = stored
                learned = True
        return learned


class DeletedMeanwhile(Recovery):
    """An edit refused because its child was deleted since it was loaded: saving it again creates it, counted
    as new (``save()`` writes the whole item, as PynamoDB's does)."""

    def recover(self, countings: Sequence[Optional[Counting]], round: Round) -> bool:
        learned = False
        for action, said in _children(round):
            if isinstance(action, ChildEdit) and action.write.kind is WriteKind.SAVE and not said.item:
                action.counting.basis = None
                action.counting.recreated = True
                learned = True
        return learned


class RollupsReturned(Recovery):
    """A write sent without its changes to rollups found gone, refused because one is stored again (created since
    by a first count): the children count into it after all."""

    def recover(self, countings: Sequence[Optional[Counting]], round: Round) -> bool:
        returned: Set[Parent] = set()
        for action, said, _ in round.refusal.refused:
            if isinstance(action, RollupCheck) and said.code == CHECK_FAILED and said.item or \
                    isinstance(action, ParentUpdate) and action.returned(said):
                returned.add((action.model, action.key))
        for counting in countings:
            if counting is not None:
                counting.gone -= returned
        return bool(returned)


class RollupsGone(Recovery):
    """A refusal made of gone rollups alone: rollups, fed only by relations creating their parents
    (``create_parent=True``), whose Update found no item while it needed one, since something besides first
    counts went into it (a decrement, a change of amount) of children counted in the rollup that expired. What
    those children counted there is left out; first counts create it again.

    Beside any other refusal (a missing child above all, whose rollup is absent because it was never counted),
    the other refusal stands, and nothing is left out on the strength of a state that another writer may change
    before the write is sent again (:func:`standing`)."""

    def recover(self, countings: Sequence[Optional[Counting]], round: Round) -> bool:
        gone, others = split(countings, round.refusal)
        if not gone or others:
            return False
        for counting, parent in gone:
            counting.gone.add(parent)
        return True


class ExpiredParentsGone(Recovery):
    """A refusal made of parents gone alone, each fed only by expiries (children deleted by TTL, taken off by
    ``count_expiries``): an Update of the parent, or of one of its shard items, found no item, and the parent
    item is gone too (read once, for a shard item: a parent stored before its counter was sharded is
    :class:`MissingShards`'). Its counters went with it: what the children counted there is left out, checked
    still absent."""

    def recover(self, countings: Sequence[Optional[Counting]], round: Round) -> bool:
        gone: List[Tuple[Counting, Parent]] = []
        for action, said, error in round.refusal.refused:
            if not (isinstance(action, ParentUpdate) and isinstance(error, ParentNotFoundError) and not said.item):
                return False
            feeding = _feeding(countings, action)
            if not feeding or not all(counting.expiry for counting, _, _ in feeding):
                return False
            if action.shard and read_shards(action.model, [action.key], 1, consistent_read=True)[action.key][0]:
                return False
            gone.extend((counting, (action.model, action.key)) for counting, _, _ in feeding)
        for counting, parent in gone:
            counting.gone.add(parent)
        return bool(gone)


class MissingShards(Recovery):
    """A refusal naming a missing shard item of a parent stored before its counter was sharded (by code that
    predates its shards, during a deploy): its shard items are created and the same request is sent again,
    once."""

    budgeted = False
    new_request = False
    once = True

    def recover(self, countings: Sequence[Optional[Counting]], round: Round) -> bool:
        error = most_fundamental(standing(countings, round.refusal))
        if not (isinstance(error, ParentNotFoundError) and error.shard):
            return False
        assert error.model is not None
        try:
            return create_shards(error.model, [error.key]) > 0
        except (CounterError, PynamoDBException):  # the parent is gone (DoesNotExist), or kept changing
            return False


RECOVERIES: Tuple[Recovery, ...] = (StaleBasis(), DeletedMeanwhile(), RollupsReturned(), RollupsGone(),
                                    ExpiredParentsGone(), MissingShards())
"""Every recovery, in the order the commit asks them."""


def split(countings: Sequence[Optional[Counting]], refusal: Refusal
          ) -> Tuple[List[Tuple[Counting, Parent]], List[CounterError]]:
    """A refusal's gone rollups, each with the countings that count into it, and its other errors."""
    gone: List[Tuple[Counting, Parent]] = []
    others: List[CounterError] = []
    for action, said, error in refusal.refused:
        feeding = _feeding(countings, action) if isinstance(action, ParentUpdate) and not action.shard and \
            isinstance(error, ParentNotFoundError) and not said.item else []
        if feeding and all(relation.create_parent for _, relation, _ in feeding) and \
                not all(first for _, _, first in feeding):
            gone.extend((counting, (action.model, action.key)) for counting, _, _ in feeding)
        else:
            others.append(error)
    return gone, others


def standing(countings: Sequence[Optional[Counting]], refusal: Refusal) -> List[CounterError]:
    """The errors a refused write answers with: beside another refusal, a gone rollup is none."""
    _, others = split(countings, refusal)
    return others or refusal.errors


def _feeding(countings: Sequence[Optional[Counting]], update: Action) -> List[Tuple[Counting, Any, bool]]:
    """The countings whose changes go to ``update``'s item, each with the relation and whether it is a first
    count."""
    return [(counting, relation, first) for counting in countings if counting is not None
            for first, pairs in ((False, counting.deltas.removed), (True, counting.deltas.added),
                                 (False, counting.deltas.changed))
            for relation, change in pairs if change.parent is update.model and change.key == update.key]


def relearned(action: ChildAction, item: Any) -> Optional[Stored]:
    """The stored child ``item`` (returned by a refused counted edit, update or delete), when it is stored
    otherwise than the basis its deltas were counted from: when an attribute its condition covers (what decided
    its deltas, ``Counting.decided_by``) holds another raw value; else ``None`` (the caller's own condition, or a
    version, refused it)."""
    basis = action.counting.basis
    decided_by = action.counting.decided_by
    if basis is None or decided_by is None:
        return None
    stored = Stored(basis.model, item)
    return stored if stored.differs(basis, decided_by) else None
