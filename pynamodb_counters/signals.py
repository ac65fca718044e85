"""
Signals sent by counted writes, on a private :class:`blinker.Namespace`.

Every signal's sender is the child model class, so a receiver can listen to one model::

    from pynamodb_counters import signals

    @signals.child_added.connect_via(Like)
    def on_like(sender, instance, changes, **extra):
        ...

Receivers always take ``**extra``: later versions may add keyword arguments. Signals are sent after DynamoDB
answered, in the thread that made the write. A receiver that raises is logged (logger
``pynamodb_counters.signals``) and ignored: it never undoes, hides or fails a committed write, nor turns a
rejection into another error.
"""
from __future__ import annotations

import logging
from typing import Any

from blinker import NamedSignal, Namespace

__all__ = ["child_added", "child_removed", "counter_repaired", "duplicate_rejected", "missing_rejected",
           "send_safely"]

log = logging.getLogger(__name__)

_signals = Namespace()

child_added = _signals.signal("child-added", doc="""\
A counted child was saved and its counters incremented, in one committed transaction.

:sender: the child model class.
:param instance: the saved child.
:param changes: a tuple of :class:`~pynamodb_counters.CounterChange` for this child (parent model, key,
  attribute, delta).
:param consumed_capacity: the transaction's ``ConsumedCapacity`` as DynamoDB reported it, one entry per table
  (empty where the server reports none, as moto does).
:param result: the :class:`~pynamodb_counters.WriteResult` of the whole transaction (``attempts``,
  ``recovered``, ``token``, every change).
""")

child_removed = _signals.signal("child-removed", doc="""\
A counted child was deleted and its counters decremented, in one committed transaction.

:sender: the child model class.
:param instance: the deleted child.
:param changes: a tuple of :class:`~pynamodb_counters.CounterChange`, with negative deltas.
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

missing_rejected = _signals.signal("missing-rejected", doc="""\
A counted delete found no child to delete: nothing was written and no counter changed.

:sender: the child model class.
:param instance: the child that was not deleted.
:param error: the :class:`~pynamodb_counters.exceptions.MissingChildError`.
""")


counter_repaired = _signals.signal("counter-repaired", doc="""\
:func:`pynamodb_counters.reconcile.repair` corrected a drifted counter (one conditional UpdateItem committed).

:sender: the parent model class.
:param key: the parent's key, ``(hash,)`` or ``(hash, range)``.
:param attribute: the counter's Python attribute name.
:param before: the value it held (``None`` when the attribute was missing).
:param after: the value it holds now: the number of children counted.
:param drift: the :class:`~pynamodb_counters.reconcile.Drift` being repaired.
""")


def send_safely(signal: NamedSignal, sender: Any, **kwargs: Any) -> None:
    """Call each receiver of ``signal`` for ``sender``, logging and swallowing what a receiver raises."""
    if not signal.receivers:
        return
    for receiver in signal.receivers_for(sender):
        try:
            receiver(sender, **kwargs)
        except Exception:
            log.exception("a receiver of pynamodb_counters.signals.%s raised; the write stands",
                          signal.name.replace("-", "_"))
