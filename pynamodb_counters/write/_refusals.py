"""
Reading a cancelled TransactWriteItems back onto its plan, pure, no I/O: which actions DynamoDB refused, each
with the error its action reads into it (:meth:`~pynamodb_counters.write._actions.Action.refusal`); whether the refusal
is in fact this write's own commit, seen again after a lost response; which error wins among several; and what a
rejected request (a missing table, an item too large) means.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

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
from ._actions import CHECK_FAILED, Action, Cancellation, ChildAction, ChildDelete
from ._other_actions import RollupCheck
from ._parent_update import ParentUpdate
from ._plan import Plan
from ._send import RETRYABLE_REASONS, Sent

__all__ = ["Refusal", "explain", "most_fundamental", "next_token", "proven", "refusal_of"]

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
