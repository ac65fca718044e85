"""
The app's PynamoDB models: ``Post``, the parent with its counters, ``Like``, counted in its ``like_tally``,
``Comment``, a child that changes, counted in its ``comment_count`` and ``published_count``, and ``Bookmark``,
counted in its ``bookmark_count`` from the table's stream (whoever writes it: the app, or another service).

All live in one table, with a stream of ``NEW_AND_OLD_IMAGES``. A post is the item ``(POST#<post_id>, META)``, a
like by a user is ``(POST#<post_id>, LIKE#USER#<user_id>)``, a bookmark ``(POST#<post_id>,
BOOKMARK#USER#<user_id>)``, a comment is ``(COMMENT#<comment_id>, COMMENT)``: its own partition, since a comment
can move to another post (its ``post_id``), and a key never changes. The classes are built per
application, so that each app (and each test) binds its own table name, endpoint and region.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Type

from pynamodb.attributes import NumberAttribute, UnicodeAttribute, UTCDateTimeAttribute
from pynamodb.constants import STREAM_NEW_AND_OLD_IMAGE
from pynamodb.models import Model
from pynamodb_counters import CounterField, CounterMixin, counted_by

__all__ = ["BOOKMARK_PREFIX", "COMMENT", "COMMENT_STATUSES", "LIKE_PREFIX", "META", "LikeModels", "bookmark_key",
           "build_models", "comment_id_of", "comment_key", "like_key", "post_id_of", "post_key"]

META = "META"
POST_PREFIX = "POST#"
LIKE_PREFIX = "LIKE#USER#"
BOOKMARK_PREFIX = "BOOKMARK#USER#"
COMMENT_PREFIX = "COMMENT#"
COMMENT = "COMMENT"  # a comment's range key
COMMENT_STATUSES = ("draft", "published")


def post_key(post_id: str) -> str:
    """The hash key of a post and of its likes."""
    return f"{POST_PREFIX}{post_id}"


def like_key(user_id: str) -> str:
    """The range key of a user's like."""
    return f"{LIKE_PREFIX}{user_id}"


def bookmark_key(user_id: str) -> str:
    """The range key of a user's bookmark."""
    return f"{BOOKMARK_PREFIX}{user_id}"


def comment_key(comment_id: str) -> str:
    """The hash key of a comment."""
    return f"{COMMENT_PREFIX}{comment_id}"


def comment_id_of(hash_key: str) -> str:
    """The comment id in a comment's hash key (the inverse of :func:`comment_key`)."""
    return hash_key[len(COMMENT_PREFIX):] if hash_key.startswith(COMMENT_PREFIX) else hash_key


def post_id_of(hash_key: str) -> str:
    """The post id in a post's hash key (the inverse of :func:`post_key`)."""
    return hash_key[len(POST_PREFIX):] if hash_key.startswith(POST_PREFIX) else hash_key


@dataclass(frozen=True)
class LikeModels:
    """The model classes of one application.

    :ivar post: the ``Post`` model (parent).
    :ivar like: the ``Like`` model (counted child); the sender of its signals.
    :ivar comment: the ``Comment`` model (counted child that changes); the sender of its signals.
    :ivar bookmark: the ``Bookmark`` model (counted from the stream: :mod:`flask_likes.stream`).
    """

    post: Type[Any]
    like: Type[Any]
    comment: Type[Any]
    bookmark: Type[Any]


def build_models(table: str, endpoint: Optional[str], aws_region: str) -> LikeModels:
    """Build ``Post``, ``Like`` and ``Comment`` bound to ``table`` at ``endpoint`` (``None``: AWS) in ``aws_region``."""

    def is_counted(comment: Any) -> bool:
        """Whether a comment counts in ``comment_count``: not soft-deleted."""
        return comment.deleted_at is None

    def is_published(comment: Any) -> bool:
        """Whether a comment counts in ``published_count``: published and not soft-deleted."""
        return bool(comment.status == "published" and comment.deleted_at is None)

    class Post(CounterMixin, Model):
        class Meta:
            table_name = table
            host = endpoint
            region = aws_region
            stream_view_type = STREAM_NEW_AND_OLD_IMAGE  # create_table gives the table its stream

        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        title = UnicodeAttribute(null=True)
        like_tally = CounterField()
        comment_count = CounterField()  # comments not soft-deleted
        published_count = CounterField()  # comments published and not soft-deleted
        bookmark_count = CounterField()  # counted from the stream: it follows the bookmarks once the handler ran

        @classmethod
        def audit_filter(cls) -> Any:
            return cls.sk == META  # likes and comments share the table: an audit's Scan visits only posts

    class Like(CounterMixin, Model):
        class Meta:
            table_name = table
            host = endpoint
            region = aws_region
            stream_view_type = STREAM_NEW_AND_OLD_IMAGE

        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        liked_at = NumberAttribute()
        # prefix=: an audit counts a post's likes with one Query of its partition. Built in a function, the models
        # are still auditable from another process: a counted write records the relation by its prefix (its feeder
        # id), never by the module or function that declared it.
        post = counted_by(Post.like_tally, key=lambda like: (like.pk, META), prefix=LIKE_PREFIX)

    class Comment(CounterMixin, Model):
        class Meta:
            table_name = table
            host = endpoint
            region = aws_region
            stream_view_type = STREAM_NEW_AND_OLD_IMAGE

        pk = UnicodeAttribute(hash_key=True)  # COMMENT#<comment_id>
        sk = UnicodeAttribute(range_key=True)  # COMMENT
        post_id = UnicodeAttribute()  # the post's id, without POST#: changing it moves the comment
        text = UnicodeAttribute()
        status = UnicodeAttribute(default="draft")  # "draft" or "published"
        deleted_at = UTCDateTimeAttribute(null=True)  # set: soft-deleted
        # A loaded comment saved again is an edit: the counts follow the change in the same transaction. An audit
        # counts a post's comments with children=: a Scan here (a GSI on post_id would serve a large table).
        post = counted_by(Post.comment_count, key=lambda c: (post_key(c.post_id), META), when=is_counted,
                          children=lambda key: comments_of(key[0], is_counted))
        published = counted_by(Post.published_count, key=lambda c: (post_key(c.post_id), META), when=is_published,
                               children=lambda key: comments_of(key[0], is_published))

    class Bookmark(CounterMixin, Model):
        class Meta:
            table_name = table
            host = endpoint
            region = aws_region
            stream_view_type = STREAM_NEW_AND_OLD_IMAGE

        pk = UnicodeAttribute(hash_key=True)  # the post's POST#<post_id>
        sk = UnicodeAttribute(range_key=True)  # BOOKMARK#USER#<user_id>
        saved_at = NumberAttribute(null=True)
        # counting="stream": save() and delete() write the bookmark alone (1 WCU), as PynamoDB does, and the stream
        # handler counts every bookmark written, by the app or by anyone else. prefix= tells a bookmark from the
        # table's other items, for the handler and for audits.
        post = counted_by(Post.bookmark_count, key=lambda b: (b.pk, META), prefix=BOOKMARK_PREFIX, counting="stream")

    def comments_of(post_hash_key: str, counts: Callable[[Any], bool]) -> int:
        """How many of the post's comments ``counts`` (its relation's ``when=``) holds for, for audits."""
        stored = Comment.scan((Comment.post_id == post_id_of(post_hash_key)) & (Comment.sk == COMMENT),
                              consistent_read=True)
        return sum(1 for comment in stored if counts(comment))

    return LikeModels(post=Post, like=Like, comment=Comment, bookmark=Bookmark)
