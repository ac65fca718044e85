"""Django receivers of the app's own signals: drop a post's cached counts when its likes or comments change."""
from __future__ import annotations

import logging
from typing import Any, Sequence

from django.dispatch import receiver

from .cache import forget_comment_counts, forget_like_count
from .signals import comment_counts_changed, like_added, like_removed

__all__ = ["forget_cached_comment_counts", "forget_cached_count"]

log = logging.getLogger(__name__)


@receiver(like_added)
@receiver(like_removed)
def forget_cached_count(sender: Any, *, post_id: str, user_id: str, signal: Any, **kwargs: Any) -> None:
    """Drop the post's cached like count (never add to it: a replayed like is signalled again)."""
    forget_like_count(post_id)
    action = "liked" if signal is like_added else "unliked"
    log.info("%s %s post %s; cached count dropped", user_id, action, post_id)


@receiver(comment_counts_changed)
def forget_cached_comment_counts(sender: Any, *, comment_id: str, post_ids: Sequence[str], **kwargs: Any) -> None:
    """Drop the cached comment counts of every post whose counts moved (both posts of a move)."""
    for post_id in post_ids:
        forget_comment_counts(post_id)
        log.info("comment %s moved the counts of post %s; cached counts dropped", comment_id, post_id)
