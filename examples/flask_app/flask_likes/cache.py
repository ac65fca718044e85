"""
A small in-process cache of like counts, kept honest by the library's signals.

The cache holds the count last read for a post. A receiver on ``child_added`` / ``child_removed`` drops a post's
entry whenever a counted like or unlike of it commits, so the next read goes to DynamoDB (one GetItem).

It drops rather than adds the delta on purpose: a request replayed with the same ``Idempotency-Key`` is
recognised as the write that already committed and answered as a success, and it sends ``child_added`` again.
Adding ``+1`` per signal would count that like twice; dropping the entry twice is harmless.
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Dict, Optional, Sequence

from pynamodb_counters import CounterChange, WriteResult

from .models import post_id_of

__all__ = ["LikeCache"]

log = logging.getLogger(__name__)


class LikeCache:
    """Like counts by post id: filled by :meth:`read_through`, dropped by :meth:`on_like_change`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Dict[str, int] = {}
        # bumped on every drop, so that a read that started before a like cannot store its stale count
        self._generations: Dict[str, int] = {}

    def get(self, post_id: str) -> Optional[int]:
        """The cached count of ``post_id``, or ``None``."""
        with self._lock:
            return self._counts.get(post_id)

    def read_through(self, post_id: str, load: Callable[[], int]) -> int:
        """The cached count, or ``load()``'s (stored unless a like or unlike committed meanwhile)."""
        with self._lock:
            if post_id in self._counts:
                return self._counts[post_id]
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

    def on_like_change(self, sender: Any, *, changes: Sequence[CounterChange], result: WriteResult,
                       **extra: Any) -> None:
        """Receiver of ``child_added`` and ``child_removed`` for the app's ``Like`` model."""
        for change in changes:
            post_id = post_id_of(change.key[0])
            self.forget(post_id)
            log.info("like %+d on post %s committed (token %s); cached count dropped", change.delta, post_id,
                     result.token)
