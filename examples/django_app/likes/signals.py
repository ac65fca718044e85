"""
The app's Django signals, fed by pynamodb-counters' blinker signals.

``like_added`` and ``like_removed`` are sent after a counted like or unlike committed, in the thread that made
it, with ``sender`` the ``Like`` model and the keyword arguments ``post_id``, ``user_id``, ``instance`` (the like)
and ``result`` (the library's :class:`~pynamodb_counters.WriteResult`). Receivers take ``**kwargs``.

A request replayed with the same ``Idempotency-Key`` is answered as the write that already committed, and sends
``like_added`` again: receivers must be idempotent (drop a cache entry, do not add one).

Django receivers are called with ``send_robust``: one that raises is logged (logger ``django.dispatch``) and the
others still run; the like stands either way.
"""
from __future__ import annotations

from typing import Any, Type

from django.dispatch import Signal
from pynamodb_counters import signals as counter_signals

from .dynamo import LIKE_PREFIX, POST_PREFIX, strip

__all__ = ["connect_bridge", "like_added", "like_removed"]

like_added = Signal()
like_removed = Signal()


def _resend(signal: Signal, sender: Type[Any], instance: Any, result: Any) -> None:
    signal.send_robust(sender=sender, post_id=strip(POST_PREFIX, instance.pk),
                       user_id=strip(LIKE_PREFIX, instance.sk), instance=instance, result=result)


def resend_added(sender: Type[Any], *, instance: Any, result: Any, **extra: Any) -> None:
    """blinker receiver of ``child_added``: sends :data:`like_added`."""
    _resend(like_added, sender, instance, result)


def resend_removed(sender: Type[Any], *, instance: Any, result: Any, **extra: Any) -> None:
    """blinker receiver of ``child_removed``: sends :data:`like_removed`."""
    _resend(like_removed, sender, instance, result)


def connect_bridge(like_model: Type[Any]) -> None:
    """Re-send the library's signals for ``like_model`` as Django signals. The receivers are module functions,
    so blinker's weak references to them stay alive."""
    counter_signals.child_added.connect(resend_added, sender=like_model)
    counter_signals.child_removed.connect(resend_removed, sender=like_model)
