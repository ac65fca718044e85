"""
The PynamoDB models: ``Post``, the parent with its ``like_tally``, and ``Like``, counted in it.

Both live in one table: a post is ``(POST#<post_id>, META)``, a like ``(POST#<post_id>, LIKE#USER#<user_id>)``.
The classes are built from ``settings.LIKES`` on first use, and the blinker-to-Django signal bridge is connected
for them then.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple, Type

from django.conf import settings
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model
from pynamodb_counters import CounterField, CounterMixin, counted_by

__all__ = ["LIKE_PREFIX", "META", "LikeModels", "build_models", "get_models", "like_key", "post_key"]

META = "META"
POST_PREFIX = "POST#"
LIKE_PREFIX = "LIKE#USER#"


def post_key(post_id: str) -> str:
    """The hash key of a post and of its likes."""
    return f"{POST_PREFIX}{post_id}"


def like_key(user_id: str) -> str:
    """The range key of a user's like."""
    return f"{LIKE_PREFIX}{user_id}"


def strip(prefix: str, key: str) -> str:
    """``key`` without ``prefix`` (the id in a post's hash key or a like's range key)."""
    return key[len(prefix):] if key.startswith(prefix) else key


@dataclass(frozen=True)
class LikeModels:
    """The two model classes bound to one table.

    :ivar post: the ``Post`` model (parent).
    :ivar like: the ``Like`` model (counted child); the sender of its signals.
    """

    post: Type[Any]
    like: Type[Any]


def build_models(table: str, endpoint: Optional[str], aws_region: str) -> LikeModels:
    """Build ``Post`` and ``Like`` bound to ``table`` at ``endpoint`` (``None``: AWS) in ``aws_region``."""

    class Post(CounterMixin, Model):
        class Meta:
            table_name = table
            host = endpoint
            region = aws_region

        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        title = UnicodeAttribute(null=True)
        like_tally = CounterField()

    class Like(CounterMixin, Model):
        class Meta:
            table_name = table
            host = endpoint
            region = aws_region

        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        liked_at = NumberAttribute()
        post = counted_by(Post.like_tally, key=lambda like: (like.pk, META))

    return LikeModels(post=Post, like=Like)


_built: Dict[Tuple[str, Optional[str], str], LikeModels] = {}
_lock = threading.Lock()


def get_models() -> LikeModels:
    """The models for ``settings.LIKES`` (built once per table, endpoint and region, and bridged)."""
    from .signals import connect_bridge  # signals reads this module's key helpers

    config = settings.LIKES
    key = (config["TABLE"], config["HOST"], config["REGION"])
    with _lock:
        models = _built.get(key)
        if models is None:
            models = _built[key] = build_models(*key)
            connect_bridge(models.like)
    return models
