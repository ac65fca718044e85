"""
The app's Django signals, fed by pynamodb-counters' blinker signals.

``comment_counts_changed`` is sent after a comment's counted write committed and moved a post's counts (created,
published or unpublished, moved, soft-deleted or restored), with ``sender`` the ``Comment`` model and the keyword
arguments ``comment_id``, ``post_ids`` (the posts whose counts moved, read from the changes: a move is sent twice,
once for the post it left, with the comment already on its new post, and once for the post it joined),
``changes`` (the library's :class:`~pynamodb_counters.CounterChange` tuple), ``instance`` (the comment) and
``result``. An edit that moves no count (a new text) sends nothing.

``like_added`` and ``like_removed`` are sent after a counted like or unlike committed, in the thread that made
it, with ``sender`` the ``Like`` model and the keyword arguments ``post_id``, ``user_id``, ``instance`` (the like)
and ``result`` (the library's :class:`~pynamodb_counters.WriteResult`). Receivers take ``**kwargs``.

A request replayed with the same ``Idempotency-Key`` is answered as the write that already committed, and sends
``like_added`` again: receivers must be idempotent (drop a cache entry, do not add one).

Django receivers are called with ``send_robust``: one that raises is logged (logger ``django.dispatch``) and the
others still run; the like stands either way.
"""
from __future__ import annotations

from typing import Any, Sequence, Type

from django.dispatch import Signal
from pynamodb_counters import CounterChange
from pynamodb_counters import signals as counter_signals

from .dynamo import COMMENT_PREFIX, LIKE_PREFIX, POST_PREFIX, strip

__all__ = ["comment_counts_changed", "connect_bridge", "like_added", "like_removed"]

like_added = Signal()
like_removed = Signal()
comment_counts_changed = Signal()


def _resend(signal: Signal, sender: Type[Any], instance: Any, result: Any) -> None:
    signal.send_robust(sender=sender, post_id=strip(POST_PREFIX, instance.pk),
                       user_id=strip(LIKE_PREFIX, instance.sk), instance=instance, result=result)


def resend_added(sender: Type[Any], *, instance: Any, result: Any, **extra: Any) -> None:
    """blinker receiver of ``child_added``: sends :data:`like_added`."""
    _resend(like_added, sender, instance, result)


def resend_removed(sender: Type[Any], *, instance: Any, result: Any, **extra: Any) -> None:
    """blinker receiver of ``child_removed``: sends :data:`like_removed`."""
    _resend(like_removed, sender, instance, result)


def resend_comment_change(sender: Type[Any], *, instance: Any, changes: Sequence[CounterChange], result: Any,
                          **extra: Any) -> None:
    """blinker receiver of ``child_added``, ``child_removed`` and ``child_changed`` for comments: sends
    :data:`comment_counts_changed`, naming the posts from the changes (not from the comment, which a move has
    already taken to its new post)."""
    post_ids = tuple(dict.fromkeys(strip(POST_PREFIX, change.key[0]) for change in changes))
    comment_counts_changed.send_robust(sender=sender, comment_id=strip(COMMENT_PREFIX, instance.pk),
                                       post_ids=post_ids, changes=tuple(changes), instance=instance, result=result)


def connect_bridge(like_model: Type[Any], comment_model: Type[Any]) -> None:
    """Re-send the library's signals for ``like_model`` and ``comment_model`` as Django signals. The receivers
    are module functions, so blinker's weak references to them stay alive."""
    counter_signals.child_added.connect(resend_added, sender=like_model)
    counter_signals.child_removed.connect(resend_removed, sender=like_model)
    # child_changed is for sum counters, which comments do not have; bridged anyway, so that none is missed
    for signal in (counter_signals.child_added, counter_signals.child_removed, counter_signals.child_changed):
        signal.connect(resend_comment_change, sender=comment_model)
