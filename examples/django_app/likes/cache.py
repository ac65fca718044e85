"""
Cached like counts on Django's cache, invalidated by generation.

Each post has a generation tag; its count is cached under a key that includes it. Dropping a count gives the post
a new tag, so a read that started before a like and finishes after it stores its stale count under a key nobody
reads any more. This works on a cache shared by several processes (Memcached, Redis) as on ``LocMemCache``.
"""
from __future__ import annotations

import uuid
from typing import Callable, Optional

from django.core.cache import cache

__all__ = ["cached_like_count", "forget_like_count", "peek_like_count"]

COUNT_TIMEOUT = 300  # seconds; a cached count is also dropped on every like and unlike


def _new_tag() -> str:
    return uuid.uuid4().hex


def _count_key(post_id: str) -> str:
    tag: str = cache.get_or_set(f"likes:generation:{post_id}", _new_tag, timeout=None)
    return f"likes:count:{post_id}:{tag}"


def peek_like_count(post_id: str) -> Optional[int]:
    """The cached count of ``post_id``, or ``None``."""
    count: Optional[int] = cache.get(_count_key(post_id))
    return count


def cached_like_count(post_id: str, load: Callable[[], int]) -> int:
    """The cached count of ``post_id``, or ``load()``'s, then cached."""
    key = _count_key(post_id)
    count: Optional[int] = cache.get(key)
    if count is None:
        count = load()
        cache.set(key, count, timeout=COUNT_TIMEOUT)
    return count


def forget_like_count(post_id: str) -> None:
    """Drop the cached count of ``post_id``."""
    cache.set(f"likes:generation:{post_id}", _new_tag(), timeout=None)
