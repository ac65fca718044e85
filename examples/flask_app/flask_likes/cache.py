"""
Small in-process caches of a post's counts, kept honest by the library's signals.

A cache holds what was last read for a post: its like count, or its two comment counts. A receiver on
``child_added`` / ``child_removed`` (and ``child_changed``) drops a post's entry whenever a counted write that
moves one of its counts commits, so the next read goes to DynamoDB (one GetItem).

It drops rather than adds the delta on purpose: a request replayed with the same ``Idempotency-Key`` is
recognised as the write that already committed and answered as a success, and it sends ``child_added`` again.
Adding ``+1`` per signal would count that like twice; dropping the entry twice is harmless.

The post to drop is read from each :class:`~pynamodb_counters.CounterChange`, never from the child: when a comment
moves, ``child_removed`` is sent with the comment as it is now (on its new post) and a change on the post it left.
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Dict, Optional, Sequence, TypeVar

from pynamodb_counters import CounterChange, WriteResult

from .models import post_id_of

__all__ = ["CountCache"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class CountCache:
    """Counts by post id: filled by :meth:`read_through`, dropped by :meth:`on_change`.

    :param label: how the log names a change (``"like"``); ``None``: by the counter's name (``published_count``).
    """

    def __init__(self, label: Optional[str] = None) -> None:
        self._label = label
        self._lock = threading.Lock()
        self._counts: Dict[str, Any] = {}
        # bumped on every drop, so that a read that started before a write cannot store its stale count
        self._generations: Dict[str, int] = {}

    def get(self, post_id: str) -> Any:
        """The cached count of ``post_id``, or ``None``."""
        with self._lock:
            return self._counts.get(post_id)

    def read_through(self, post_id: str, load: Callable[[], T]) -> T:
        """The cached count, or ``load()``'s (stored unless a counted write committed meanwhile)."""
        with self._lock:
            if post_id in self._counts:
                cached: T = self._counts[post_id]
                return cached
            generation = self._generations.get(post_id, 0)
        count = load()
        with self._lock:
            if self._generations.get(post_id, 0) == generation:
                self._counts[post_id] = count
        return count

    def forget(self, post_id: str) -> None:
        """Drop the cached count of ``post_id``."""
        with self._lock:
            self._counts.pop(post_id, None)
            self._generations[post_id] = self._generations.get(post_id, 0) + 1

    def on_change(self, sender: Any, *, changes: Sequence[CounterChange], result: WriteResult,
                  **extra: Any) -> None:
        """Receiver of ``child_added``, ``child_removed`` and ``child_changed`` for one child model."""
        for change in changes:
            post_id = post_id_of(change.key[0])
            self.forget(post_id)
            log.info("%s %+d on post %s committed (token %s); cached count dropped",
                     self._label or change.attribute, change.delta, post_id, result.token)
