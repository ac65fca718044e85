"""
Cached counts on Django's cache, invalidated by generation: a post's like count, and its two comment counts.

Each post has a generation tag per kind of count; the count is cached under a key that includes it. Dropping a
count gives the post a new tag, so a read that started before a write and finishes after it stores its stale
count under a key nobody reads any more. This works on a cache shared by several processes (Memcached, Redis) as
on ``LocMemCache``.
"""
from __future__ import annotations

import uuid
from typing import Any, Callable, Dict, Optional, TypeVar

from django.core.cache import cache

__all__ = ["cached_comment_counts", "cached_like_count", "forget_comment_counts", "forget_like_count",
           "peek_comment_counts", "peek_like_count"]

COUNT_TIMEOUT = 300  # seconds; a cached count is also dropped on every counted write that moves it

T = TypeVar("T")


def _new_tag() -> str:
    return uuid.uuid4().hex


def _count_key(kind: str, post_id: str) -> str:
    tag: str = cache.get_or_set(f"{kind}:generation:{post_id}", _new_tag, timeout=None)
    return f"{kind}:count:{post_id}:{tag}"


def _cached(kind: str, post_id: str, load: Callable[[], T]) -> T:
    key = _count_key(kind, post_id)
    count: Optional[T] = cache.get(key)
    if count is None:
        count = load()
        cache.set(key, count, timeout=COUNT_TIMEOUT)
    return count


def _forget(kind: str, post_id: str) -> None:
    cache.set(f"{kind}:generation:{post_id}", _new_tag(), timeout=None)


def peek_like_count(post_id: str) -> Optional[int]:
    """The cached like count of ``post_id``, or ``None``."""
    count: Optional[int] = cache.get(_count_key("likes", post_id))
    return count


def cached_like_count(post_id: str, load: Callable[[], int]) -> int:
    """The cached like count of ``post_id``, or ``load()``'s, then cached."""
    return _cached("likes", post_id, load)


def forget_like_count(post_id: str) -> None:
    """Drop the cached like count of ``post_id``."""
    _forget("likes", post_id)


def peek_comment_counts(post_id: str) -> Optional[Dict[str, Any]]:
    """The cached comment counts of ``post_id`` (``comment_count`` and ``published_count``), or ``None``."""
    counts: Optional[Dict[str, Any]] = cache.get(_count_key("comments", post_id))
    return counts


def cached_comment_counts(post_id: str, load: Callable[[], Dict[str, int]]) -> Dict[str, int]:
    """The cached comment counts of ``post_id``, or ``load()``'s, then cached."""
    return _cached("comments", post_id, load)


def forget_comment_counts(post_id: str) -> None:
    """Drop the cached comment counts of ``post_id``."""
    _forget("comments", post_id)
