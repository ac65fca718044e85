"""
Reading a counted transaction's outcome: what committed, what DynamoDB refused and why, and the signals.

:func:`interpret` is pure: it maps the cancellation reasons (one per action, in request order) back to the
plan's slots. :func:`commit_plan` sends a plan, interprets the answer and sends the signals.
"""
from __future__ import annotations

from decimal import Decimal
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .attributes import WRITE_ID
from .compat import discriminator_of
from .connection import Sent, send
from .exceptions import (
    ConditionFailedError,
    CountedWriteError,
    CounterError,
    CounterUnderflowError,
    DuplicateChildError,
    MissingChildError,
    ParentNotFoundError,
    TransactionError,
)
from .plans import Plan, Slot
from .results import WriteResult
from .retries import RETRYABLE_REASONS, RetryPolicy
from .shards import SHARD_COUNT, pending_fold_message, shard_count
from .signals import child_added, child_removed, duplicate_rejected, missing_rejected, send_safely
from .totals import count_of, stored_of

__all__ = ["commit_plan", "finish", "interpret", "most_fundamental", "refusals", "signal_refusals"]

_CHECK_FAILED = "ConditionalCheckFailed"
# Which error wins when DynamoDB flags several actions: the most fundamental first. A missing child outranks an
# underflow: deleting an absent like of a post whose counter drifted to 0 flags both, and the floor only failed
# because of the decrement that the missing child would have made.
_PRIORITY = (TransactionError, ParentNotFoundError, DuplicateChildError, MissingChildError,
             CounterUnderflowError, ConditionFailedError)


def commit_plan(plan: Plan, policy: Optional[RetryPolicy], return_consumed_capacity: str) -> WriteResult:
    """Send ``plan``, recognise a write that already committed, raise what DynamoDB refused, send signals."""
    sent = send(plan.slots[0].model, plan.items, plan.token, policy=policy,
                return_consumed_capacity=return_consumed_capacity)
    if sent.response is None:
        interpret(plan, sent)  # raises, unless the write turns out to have committed on a lost attempt
    return finish(plan, sent)


def _proven(plan: Plan, sent: Sent) -> bool:
    """Whether a recovered write was recognised by its write id, rather than taken from deletes finding their
    children gone."""
    reasons = sent.cancellation_reasons or []
    return any(_own_write(plan, slot, reason) for slot, reason in zip(plan.slots, reasons))


def finish(plan: Plan, sent: Sent) -> WriteResult:
    """The result of a committed plan; bumps local versions and sends ``child_added`` / ``child_removed``."""
    result = WriteResult(
        token=plan.token,
        changes=tuple(change for slot in plan.children for change in slot.changes),
        consumed_capacity=tuple((sent.response or {}).get("ConsumedCapacity") or ()),
        attempts=sent.attempts,
        recovered=sent.response is None,
        uncertain=sent.response is None and not _proven(plan, sent),
    )
    for item, slot in zip(plan.items, plan.slots):
        if "Put" in item and slot.instance is not None:
            slot.instance.update_local_version_attribute()  # type: ignore[no-untyped-call]
    for slot in plan.children:
        signal = child_added if slot.kind == "put" else child_removed
        send_safely(signal, slot.model, instance=slot.instance, changes=slot.changes,
                    consumed_capacity=result.consumed_capacity, result=result)
    return result


def interpret(plan: Plan, sent: Sent) -> None:
    """Read a cancelled transaction.

    Returns normally when the write had in fact committed on an earlier attempt whose response was lost: a
    child Put rejected because the item exists *with this write's token* as its write id, or, after an ambiguous
    attempt, only counted deletes rejected because their children are gone.

    :raises CountedWriteError: the most fundamental refusal (missing parent, duplicate, missing child,
      underflow, failed condition), after sending ``duplicate_rejected`` / ``missing_rejected``.
    :raises TransactionError: a cancellation reason retrying cannot fix, or reasons that do not match the plan.
    """
    refused = refusals(plan, sent)
    if refused is None:
        return
    errors = [error for _, error in refused]
    signal_refusals(plan, errors)
    raise most_fundamental(errors)


def most_fundamental(errors: Sequence[CounterError]) -> CounterError:
    """The error a counted write raises among ``errors``: the first in the order request error, missing or foreign
    parent, duplicate child, missing child, underflow, failed condition."""
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
    return [(slot, _error(slot, reason, list(reasons), sent)) for slot, reason in failures]


def signal_refusals(plan: Plan, errors: Sequence[CounterError]) -> None:
    """Send ``duplicate_rejected`` and ``missing_rejected`` for the refused children among ``errors``."""
    for error in errors:
        if isinstance(error, DuplicateChildError):
            send_safely(duplicate_rejected, error.model, instance=_instance(plan, error), error=error)
        elif isinstance(error, MissingChildError):
            send_safely(missing_rejected, error.model, instance=_instance(plan, error), error=error)


def _own_deletes(plan: Plan, reasons: Sequence[Dict[str, Any]]) -> bool:
    """After an ambiguous attempt: whether this rejection is what our own committed deletes leave behind.

    Every counted delete finds its child gone, and the only other refusals are parents' conditions (the floor
    of zero our own decrement may now fail). A plan with a counted Put cannot match: had it committed, the Put
    would have been recognised by its write id instead.
    """
    children = [(slot, reason) for slot, reason in zip(plan.slots, reasons) if slot.kind in ("put", "delete")]
    others = [(slot, reason) for slot, reason in zip(plan.slots, reasons) if slot.kind not in ("put", "delete")]
    return bool(children) and all(
        slot.kind == "delete" and reason.get("Code") == _CHECK_FAILED and not reason.get("Item")
        for slot, reason in children
    ) and all(reason.get("Code", "None") in ("None", _CHECK_FAILED) and slot.kind == "parent"
              or reason.get("Code", "None") == "None" for slot, reason in others)


def _own_write(plan: Plan, slot: Slot, reason: Dict[str, Any]) -> bool:
    item = reason.get("Item") or {}
    return slot.kind == "put" and reason.get("Code") == _CHECK_FAILED and item.get(WRITE_ID) == {"S": plan.token}


def _instance(plan: Plan, error: CountedWriteError) -> Any:
    return next((slot.instance for slot in plan.children if slot.model is error.model and slot.key == error.key),
                None)


def _error(slot: Slot, reason: Dict[str, Any], reasons: List[Dict[str, Any]], sent: Sent) -> CounterError:
    code, item = reason.get("Code"), reason.get("Item")
    where = f"{slot.model.__name__} {slot.key!r}"
    common: Dict[str, Any] = dict(model=slot.model, key=slot.key, cancellation_reasons=reasons)
    if code == _CHECK_FAILED and (count_of(item, SHARD_COUNT.attr_name) or 1) > shard_count(slot.model) and \
            slot.kind in ("other", "delete") and slot.instance is not None:
        return ConditionFailedError(pending_fold_message(where, count_of(item, SHARD_COUNT.attr_name),
                                                         shard_count(slot.model)), sent.error, **common)
    if code != _CHECK_FAILED:
        return TransactionError(f"DynamoDB cancelled the transaction: {code} on {where}: "
                                f"{reason.get('Message', '')}", sent.error)
    if slot.kind == "put":
        if item:
            return DuplicateChildError(f"{where} already exists; it was not counted again",
                                       sent.error, raw_item=item, item=_load(slot, item), **common)
        return ConditionFailedError(f"the condition on saving {where} was not met", sent.error, **common)
    if slot.kind == "delete":
        if item:
            return ConditionFailedError(f"the condition on deleting {where} was not met", sent.error, **common)
        return MissingChildError(f"{where} does not exist; no counter was decremented", sent.error, **common)
    if slot.kind == "parent":
        return _parent_error(slot, item, where, sent, common)
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
    return ConditionFailedError(f"the condition on parent {where} was not met", sent.error, **common)


def _load(slot: Slot, item: Dict[str, Any]) -> Any:
    try:
        return slot.model.from_raw_data(item)
    except Exception:  # the raw item is still reported
        return None
