"""
Signals sent by counted writes, on a private :class:`blinker.Namespace`.

Every signal's sender is the child model class, so a receiver can listen to one model::

    from pynamodb_counters import signals

    @signals.child_added.connect_via(Like)
    def on_like(sender, instance, changes, **extra):
        ...

Receivers always take ``**extra``: later versions may add keyword arguments. Signals are sent after DynamoDB
answered, in the thread that made the write, with blinker's rules: a muted signal (``with
signals.child_added.muted():``) calls no receiver, and an ``async def`` receiver is refused with blinker's own
``RuntimeError`` (the write is synchronous, so there is no ``send_async``). A receiver that raises (that refusal
included) is logged (logger ``pynamodb_counters.signals``) and ignored: it never undoes, hides or fails a
committed write, nor turns a rejection into another error.
"""
from __future__ import annotations

import inspect
import logging
from typing import Any

from blinker import NamedSignal, Namespace

__all__ = ["child_added", "child_changed", "child_removed", "counter_repaired", "duplicate_rejected",
           "limit_rejected", "missing_rejected", "send_safely"]

log = logging.getLogger(__name__)

_signals = Namespace()

child_added = _signals.signal("child-added", doc="""\
A counted child started counting for one or more relations, in one committed transaction: it was saved new, or
saved again so that it now counts (published, restored from a soft delete, moved to another parent: a move sends
``child_removed`` for the parent it left and ``child_added`` for the one it joined).

:sender: the child model class.
:param instance: the saved child.
:param changes: a tuple of :class:`~pynamodb_counters.CounterChange` for the relations it started counting for
  (parent model, key, attribute, delta).
:param consumed_capacity: the transaction's ``ConsumedCapacity`` as DynamoDB reported it, one entry per table
  (empty where the server reports none, as moto does).
:param result: the :class:`~pynamodb_counters.WriteResult` of the whole transaction (``attempts``,
  ``recovered``, ``token``, every change).
""")

child_removed = _signals.signal("child-removed", doc="""\
A counted child stopped counting for one or more relations, in one committed transaction: it was deleted, or
saved again so that it no longer counts (unpublished, soft-deleted, moved away).

:sender: the child model class.
:param instance: the deleted or saved child.
:param changes: a tuple of :class:`~pynamodb_counters.CounterChange` for the relations it stopped counting for,
  with the deltas that took it out (negative for a child that added one).
:param consumed_capacity: as for ``child_added``.
:param result: the :class:`~pynamodb_counters.WriteResult` of the transaction.
""")

child_changed = _signals.signal("child-changed", doc="""\
A counted child was saved again, still counting for the same parent, and what it adds changed (a sum counter's
``amount=``: an order line's quantity, a comment's words), in one committed transaction.

:sender: the child model class.
:param instance: the saved child.
:param changes: a tuple of :class:`~pynamodb_counters.CounterChange`, each delta the difference (new amount minus
  old).
:param consumed_capacity: as for ``child_added``.
:param result: the :class:`~pynamodb_counters.WriteResult` of the transaction.
""")

duplicate_rejected = _signals.signal("duplicate-rejected", doc="""\
A counted save found its child already stored: nothing was written and no counter changed.

Sent whether the save raised :class:`~pynamodb_counters.exceptions.DuplicateChildError` or was told to ignore
duplicates.

:sender: the child model class.
:param instance: the child that was not saved.
:param error: the :class:`~pynamodb_counters.exceptions.DuplicateChildError`; ``error.item`` is the stored item
  where DynamoDB returned it.
""")

limit_rejected = _signals.signal("limit-rejected", doc="""\
A counted write was refused because it would take a limited counter past its limit
(``CounterField(limit=...)``): nothing was written.

:sender: the child model class.
:param instance: the child that was not written.
:param error: the :class:`~pynamodb_counters.exceptions.LimitExceededError` (``attribute``, ``limit``,
  ``stored``).
""")

missing_rejected = _signals.signal("missing-rejected", doc="""\
A counted delete found no child to delete: nothing was written and no counter changed.

:sender: the child model class.
:param instance: the child that was not deleted.
:param error: the :class:`~pynamodb_counters.exceptions.MissingChildError`.
""")


counter_repaired = _signals.signal("counter-repaired", doc="""\
:func:`pynamodb_counters.repair` corrected a drifted counter (one conditional UpdateItem committed).

:sender: the parent model class.
:param key: the parent's key, ``(hash,)`` or ``(hash, range)``.
:param attribute: the counter's Python attribute name.
:param before: the value it held (``None`` when the attribute was missing).
:param after: the value it holds now: the number of children counted.
:param drift: the :class:`~pynamodb_counters.Drift` being repaired.
""")


def send_safely(signal: NamedSignal, sender: Any, **kwargs: Any) -> None:
    """Send ``signal`` for ``sender`` as blinker's ``Signal.send`` does, except that what a receiver raises is
    logged and swallowed (the other receivers still run).

    As in blinker: nothing is called while the signal is :meth:`~blinker.Signal.muted`, and a coroutine function
    receiver is refused with blinker's own ``RuntimeError`` (logged here), never called, so no coroutine is left
    un-awaited. A plain receiver that returns a coroutine gets it closed, and an error logged.
    """
    if getattr(signal, "is_muted", False) or not signal.receivers:
        return
    for receiver in signal.receivers_for(sender):
        try:
            if inspect.iscoroutinefunction(receiver):
                raise RuntimeError(_COROUTINE_REFUSED)
            returned = receiver(sender, **kwargs)
            if inspect.iscoroutine(returned):
                returned.close()
                raise RuntimeError(f"{receiver!r} returned a coroutine, which was closed unawaited: counted writes "
                                   f"send signals synchronously")
        except Exception:
            log.exception("a receiver of pynamodb_counters.signals.%s raised; the write stands",
                          signal.name.replace("-", "_"))


def _blinker_refusal() -> str:
    """What blinker's ``Signal.send`` raises for a coroutine function receiver."""
    async def receiver(sender: Any) -> None:  # pragma: no cover - never called
        pass

    probe = NamedSignal("probe")
    probe.connect(receiver, weak=False)
    try:
        probe.send(None)
    except RuntimeError as refusal:
        return str(refusal)
    return "Cannot send to a coroutine function."  # pragma: no cover - blinker before 1.6


_COROUTINE_REFUSED = _blinker_refusal()
