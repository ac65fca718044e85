"""
Reading a counted transaction's outcome, pure, no I/O: what committed, what DynamoDB refused and why, and what
a refusal teaches (the stored state of a child an edit, update or delete counted otherwise; a child deleted or
created again meanwhile; a rollup found gone, or created again).

:func:`refusals` maps the cancellation reasons (one per action, in request order) back to the plan's slots.
"""
from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple, Type

from pynamodb.models import Model

from ._base import EDIT_ID, FED_BY, SHARD_COUNT, WRITE_ID
from ._compat import discriminator_of
from ._costs import ITEM_LIMIT_BYTES, item_bytes
from ._items import count_of, stored_of
from ._operations import Operation
from ._plans import Plan, Sent, Slot
from ._requests import deciding, pending_fold_message
from ._retries import RETRYABLE_REASONS
from ._shards import foreign_shard_message, is_shard_item, shard_item_message
from ._spec import counters_of, foreign_feeds, relations_of, shard_count
from ._stored import Stored
from .exceptions import (
    ChildValueError,
    ConditionFailedError,
    CounterError,
    CounterUnderflowError,
    DuplicateChildError,
    LimitExceededError,
    MissingChildError,
    ParentKeyError,
    ParentNotFoundError,
    TransactionError,
)

__all__ = ["ABSENT", "explain", "most_fundamental", "names_parents", "next_token", "proven", "refusals",
           "relearned", "returned_rollups", "stale_children"]

_CHECK_FAILED = "ConditionalCheckFailed"
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


def refusals(plan: Plan, sent: Sent) -> Optional[List[Tuple[Slot, CounterError]]]:
    """Pure: each action DynamoDB refused in a cancelled transaction, with its error; ``None`` when the
    transaction had in fact committed on an earlier attempt.

    :raises TransactionError: reasons that do not match the plan, or none naming a cause.
    """
    reasons: Sequence[Dict[str, Any]] = sent.cancellation_reasons or []
    if len(reasons) != len(plan.slots):
        raise TransactionError(f"DynamoDB cancelled the transaction with {len(reasons)} reasons for "
                               f"{len(plan.slots)} actions: {sent.error}", sent.error)
    failures = [(slot, reason) for slot, reason in zip(plan.slots, reasons) if reason.get("Code", "None") != "None"]
    if any(reason.get("Code") == _CHECK_FAILED for _, reason in failures):
        # a failed condition is final; a conflict flagged beside it would only have delayed the same answer
        failures = [(slot, reason) for slot, reason in failures if reason.get("Code") not in RETRYABLE_REASONS]
    if any(_own_write(plan, slot, reason) for slot, reason in failures):
        return None
    if sent.ambiguous and _own_deletes(plan, reasons):
        return None
    if not failures:
        raise TransactionError(f"DynamoDB cancelled the transaction without naming a cause: {sent.error}",
                               sent.error)
    return [(slot, _error(slot, reason, reasons, sent)) for slot, reason in failures]


def proven(plan: Plan, sent: Sent) -> bool:
    """Whether a write recovered after a lost response was recognised by its write id, rather than taken from
    deletes finding their children gone."""
    reasons = sent.cancellation_reasons or []
    return any(_own_write(plan, slot, reason) for slot, reason in zip(plan.slots, reasons))


def _own_deletes(plan: Plan, reasons: Sequence[Dict[str, Any]]) -> bool:
    """After an ambiguous attempt: whether this rejection is what our own committed deletes leave behind.

    Every counted delete finds its child gone, and the only other refusals are parents' conditions (the floor
    of zero our own decrement may now fail). A plan with a counted Put cannot match: had it committed, the Put
    would have been recognised by its write id instead.
    """
    children = [(slot, reason) for slot, reason in zip(plan.slots, reasons) if slot.is_child]
    others = [(slot, reason) for slot, reason in zip(plan.slots, reasons) if not slot.is_child]
    return bool(children) and all(
        slot.kind == "delete" and reason.get("Code") == _CHECK_FAILED and not reason.get("Item")
        for slot, reason in children
    ) and all(reason.get("Code", "None") == "None"
              or reason.get("Code") == _CHECK_FAILED and slot.kind in ("parent", "gone") for slot, reason in others)


def _own_write(plan: Plan, slot: Slot, reason: Dict[str, Any]) -> bool:
    """Whether a refused child's item carries this write's token: a create's write id, or an edit's."""
    if reason.get("Code") != _CHECK_FAILED or slot.kind not in ("put", "edit"):
        return False
    item = reason.get("Item") or {}
    return item.get(WRITE_ID if slot.kind == "put" else EDIT_ID) == {"S": plan.token}


def _error(slot: Slot, reason: Dict[str, Any], reasons: Sequence[Dict[str, Any]], sent: Sent) -> CounterError:
    code, item = reason.get("Code"), reason.get("Item")
    where = f"{slot.model.__name__} {slot.key!r}"
    common: Dict[str, Any] = dict(model=slot.model, key=slot.key, cancellation_reasons=reasons)
    if code == _CHECK_FAILED and (count_of(item, SHARD_COUNT.attr_name) or 1) > shard_count(slot.model) and \
            slot.kind in ("other", "delete") and slot.instance is not None:
        return ConditionFailedError(pending_fold_message(where, count_of(item, SHARD_COUNT.attr_name),
                                                         shard_count(slot.model)), sent.error, **common)
    if code == _CHECK_FAILED and slot.kind == "other" and counters_of(slot.model) and is_shard_item(item):
        return ConditionFailedError(shard_item_message(slot.model, slot.key), sent.error, **common)
    if code == _CHECK_FAILED and slot.shard and item and not is_shard_item(item):
        # a shard's key holds another item (a shard slot creating or deleting it, a parent slot counting on it)
        return ConditionFailedError(foreign_shard_message(slot.model, slot.key, slot.shard), sent.error, **common)
    if code != _CHECK_FAILED:
        return TransactionError(f"DynamoDB cancelled the transaction: {code} on {where}: "
                                f"{reason.get('Message', '')}", sent.error)
    if slot.kind == "put":
        if item:
            return DuplicateChildError(f"{where} already exists; it was not counted again",
                                       sent.error, raw_item=item, item=_load(slot, item), **common)
        return ConditionFailedError(f"the condition on saving {where} was not met", sent.error, **common)
    if slot.kind == "edit":
        if item:
            verb = "updating" if slot.updating else "saving"
            return ConditionFailedError(f"the condition on {verb} {where} was not met", sent.error, **common)
        return ConditionFailedError(f"{where} was deleted since it was loaded, and kept changing; nothing was "
                                    f"written", sent.error, **common)
    if slot.kind == "delete":
        if item:
            return ConditionFailedError(f"the condition on deleting {where} was not met", sent.error, **common)
        return MissingChildError(f"{where} does not exist; no counter was decremented", sent.error, **common)
    if slot.kind == "parent":
        return _parent_error(slot, item, where, sent, common)
    if slot.kind == "gone":
        return ConditionFailedError(f"rollup {where}, found gone, kept being created again while a delete counted "
                                    f"off it was sent; nothing was written", sent.error, **common)
    if slot.must_exist and not item:
        return MissingChildError(f"{where} does not exist; an update of a counted child never creates it (it would "
                                 f"not be counted): save() it to create and count it. Nothing was written",
                                 sent.error, **common)
    return ConditionFailedError(f"the condition on {where} was not met", sent.error, **common)


def _parent_error(slot: Slot, item: Optional[Dict[str, Any]], where: str, sent: Sent,
                  common: Dict[str, Any]) -> CounterError:
    model = slot.model
    if not item and slot.shard:
        return ParentNotFoundError(
            f"shard {slot.shard} of parent {where} does not exist: either the parent does not, or it was stored "
            f"before its counter was sharded (create its shards with pynamodb_counters.resharding.reshard(), or "
            f"save the parent again); nothing was written", sent.error, shard=slot.shard, **common)
    if not item:
        return ParentNotFoundError(f"parent {where} does not exist; nothing was written", sent.error, **common)
    if slot.absent:
        return ConditionFailedError(f"rollup {where}, found gone, kept being created again while this write "
                                    f"counted into it; nothing was written", sent.error, **common)
    foreign = foreign_feeds(model) if slot.rollup else {}
    owners = sorted({str(foreign[entry]) for entry in (item.get(FED_BY.attr_name) or {}).get("SS", ())
                     if entry in foreign})
    if owners:
        return ParentNotFoundError(f"parent {where} is an item that {', '.join(owners)} counts into, not a "
                                   f"{model.__name__}: an item belongs to one model, and {model.__name__}'s "
                                   f"counters are never added to another's. Nothing was written", sent.error,
                                   **common)
    attribute = discriminator_of(model)
    if attribute is not None:
        allowed = {attribute.get_discriminator(cls) for cls in attribute.get_registered_subclasses(model)}
        stored = (item.get(attribute.attr_name) or {}).get("S")
        if allowed and stored not in allowed:
            return ParentNotFoundError(f"parent {where} holds a {stored!r} item, not a {model.__name__}; nothing "
                                       f"was written", sent.error, **common)
    attributes = model.get_attributes()
    for name, delta in slot.deltas.items():
        count: Any = stored_of(item, attributes[name].attr_name)  # exact: a number that is not whole stays one
        if delta < 0 and (count is None or count < -delta):
            whole = "" if not isinstance(count, Decimal) else ", not a whole number (written outside the library?),"
            return CounterUnderflowError(
                f"{model.__name__}.{name} of {slot.key!r} holds {count}{whole} so removing {-delta} would take it "
                f"below zero: the counter has drifted. Recount its children and repair it with set_counter(). "
                f"Nothing was written", sent.error,
                attribute=name, stored=count, **common)
        counter = counters_of(model)[name]
        limit: Any = counter.limit
        if delta > 0 and limit is not None:
            if not isinstance(limit, int):  # held by the parent, as stored
                limit = stored_of(item, limit.attr_name)
            if limit is not None and (count or 0) + delta > limit:
                return LimitExceededError(
                    f"{model.__name__} {slot.key!r} is full: {name} holds {count or 0}, its limit is {limit}, so "
                    f"adding {delta} would pass it. Nothing was written", sent.error,
                    attribute=name, limit=limit, stored=count or 0, **common)
    return ConditionFailedError(f"the condition on parent {where} was not met", sent.error, **common)


def _load(slot: Slot, item: Dict[str, Any]) -> Any:
    try:
        return slot.model.from_raw_data(item)
    except Exception:  # the raw item is still reported
        return None


def next_token(token: str) -> str:
    """The token of a request sent again with other parameters (a token names one request): derived, so that
    the caller's own retry of the same call derives the same tokens."""
    return str(uuid.uuid5(uuid.NAMESPACE_OID, token))


def relearned(basis: Stored, item: Dict[str, Any], *others: Optional[Model]) -> Optional[Stored]:
    """The stored child ``item`` (returned by a refused counted write), when it is stored otherwise than ``basis``,
    the stored child the write's deltas were counted from and its condition checked: when an attribute that
    decides its parents (read by the relations on either child as loaded, or on ``others``: the new or in-memory
    state) holds another raw value; else ``None`` (the caller's own condition, or a version, refused it)."""
    stored = Stored(basis.model, item)
    states = [stored.view, basis.view, *(other for other in others if other is not None)]
    return stored if stored.differs(basis, deciding(basis.model, *states)) else None


def names_parents(model: Type[Model], instance: Model, sign: int) -> bool:
    """Whether ``instance`` can name the parents of each of its relations (an instance built from its key alone
    cannot)."""
    try:
        for relation in relations_of(model):
            relation.changes(instance, sign)
    except (ParentKeyError, ChildValueError):
        return False
    return True


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
    for item, slot in zip(plan.items, plan.slots):
        stored = item.get("Put", {}).get("Item", {})
        own = {name: value for name, value in stored.items() if name not in _LIBRARY_ATTRIBUTES}
        if len(own) < len(stored):
            puts.append((item_bytes(stored), item_bytes(own), slot))
    if not puts:
        return error
    whole, own_bytes, slot = max(puts, key=lambda put: put[0])
    verdict = (": it fits DynamoDB's item limit without them, not with them" if whole > ITEM_LIMIT_BYTES >= own_bytes
               else "")
    return TransactionError(
        f"DynamoDB refused an item as too large. {slot.model.__name__} {slot.key!r} is {own_bytes} bytes of its own "
        f"plus {whole - own_bytes} bytes the library stores with it (its write id {WRITE_ID!r}, which recognises a "
        f"retried write){verdict}. DynamoDB allows {ITEM_LIMIT_BYTES} bytes per item, attribute names included: keep "
        f"counted items {whole - own_bytes} bytes further under it. Nothing was written ({error})", error.cause)


_LIBRARY_ATTRIBUTES = frozenset((WRITE_ID, EDIT_ID, SHARD_COUNT.attr_name))


def returned_rollups(plan: Plan, sent: Sent) -> Set[Tuple[Type[Model], Tuple[Any, ...]]]:
    """The rollups (model, key) a write sent without their decrements, because it had found them gone, that the
    refusal found stored again (created since by a first count)."""
    return {(slot.model, slot.key) for slot, reason in zip(plan.slots, sent.cancellation_reasons or [])
            if (slot.kind == "gone" or slot.absent) and reason.get("Code") == _CHECK_FAILED and reason.get("Item")}


ABSENT: Any = object()
"""What :func:`stale_children` learns of a counted edit whose child was deleted since it was loaded."""


def stale_children(plan: Plan, sent: Sent, operations: Sequence[Operation]) -> Dict[int, Any]:
    """The counted edits and deletes among ``operations`` (by index) that DynamoDB refused because the stored
    child counts otherwise than the state their deltas were computed from (an instance edited in memory, a child
    changed since it was loaded), each with the stored child the refusal returned; or, for an edit whose child
    was deleted since it was loaded, :data:`ABSENT`; or, for such an edit sent as a create and refused because
    the child was created again meanwhile, the stored child (it is an edit again)."""
    learned: Dict[int, Any] = {}
    for slot, reason in zip(plan.slots, sent.cancellation_reasons or []):
        if not slot.is_child or reason.get("Code") != _CHECK_FAILED:
            continue
        item = reason.get("Item")
        if slot.kind == "put":  # an edit turned into a create (its child was deleted), and created again meanwhile
            for index, op in enumerate(operations):
                if op.instance is slot.instance and op.recreated and item and not _own_write(plan, slot, reason):
                    learned[index] = Stored(op.model, item)
            continue
        for index, op in enumerate(operations):
            if op.instance is not slot.instance or op.kind not in ("counted_edit", "counted_update", "counted_delete"):
                continue
            if not item:
                if op.kind == "counted_edit":
                    learned[index] = ABSENT
                continue
            stored = relearned(op.basis, item, op.after.view if op.after is not None else None, op.instance) \
                if op.basis is not None else None
            if stored is not None:
                learned[index] = stored
    return learned
