"""Django receivers of the app's own signals: drop a post's cached count when its likes change."""
from __future__ import annotations

import logging
from typing import Any

from django.dispatch import receiver

from .cache import forget_like_count
from .signals import like_added, like_removed

__all__ = ["forget_cached_count"]

log = logging.getLogger(__name__)


@receiver(like_added)
@receiver(like_removed)
def forget_cached_count(sender: Any, *, post_id: str, user_id: str, signal: Any, **kwargs: Any) -> None:
    """Drop the post's cached like count (never add to it: a replayed like is signalled again)."""
    forget_like_count(post_id)
    action = "liked" if signal is like_added else "unliked"
    log.info("%s %s post %s; cached count dropped", user_id, action, post_id)
