"""
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

from dataclasses import dataclass
from typing import Any, ClassVar, List, Optional, Sequence, Set, Tuple

from pynamodb.exceptions import PynamoDBException

from ..exceptions import CounterError, ParentNotFoundError
from ._actions import CHECK_FAILED, Action, Cancellation, ChildAction, ChildEdit, ChildPut
from ._deltas import Counting, Parent
from ._other_actions import RollupCheck
from ._parent_update import ParentUpdate
from ._plan import Plan
from ._reads import read_shards
from ._refusals import Refusal, most_fundamental
from ._send import Sent
from ._shard_items import create_shards
from ._stored import Stored, deciding
from ._writes import WriteKind

__all__ = ["RECOVERIES", "DeletedMeanwhile", "ExpiredParentsGone", "MissingShards", "Recovery", "RollupsGone",
           "RollupsReturned", "Round", "StaleBasis", "standing"]


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
    otherwise than the basis its deltas were counted from: when an attribute that decides its parents (read by
    the relations on either child as loaded, on the new state or on the instance) holds another raw value; else
    ``None`` (the caller's own condition, or a version, refused it)."""
    basis = action.counting.basis
    if basis is None:
        return None
    stored = Stored(basis.model, item)
    after = action.counting.after
    states = [stored.view, basis.view, action.instance] + ([after.view] if after is not None else [])
    return stored if stored.differs(basis, deciding(basis.model, *states)) else None
