"""
The app's PynamoDB models: ``Post``, the parent with its ``like_tally``, and ``Like``, counted in it.

Both live in one table. A post is the item ``(POST#<post_id>, META)``, a like by a user is
``(POST#<post_id>, LIKE#USER#<user_id>)``. The classes are built per application, so that each app (and each
test) binds its own table name, endpoint and region.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Type

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model
from pynamodb_counters import CounterField, CounterMixin, counted_by

__all__ = ["LIKE_PREFIX", "META", "LikeModels", "build_models", "like_key", "post_id_of", "post_key"]

META = "META"
POST_PREFIX = "POST#"
LIKE_PREFIX = "LIKE#USER#"


def post_key(post_id: str) -> str:
    """The hash key of a post and of its likes."""
    return f"{POST_PREFIX}{post_id}"


def like_key(user_id: str) -> str:
    """The range key of a user's like."""
    return f"{LIKE_PREFIX}{user_id}"


def post_id_of(hash_key: str) -> str:
    """The post id in a post's hash key (the inverse of :func:`post_key`)."""
    return hash_key[len(POST_PREFIX):] if hash_key.startswith(POST_PREFIX) else hash_key


@dataclass(frozen=True)
class LikeModels:
    """The two model classes of one application.

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
