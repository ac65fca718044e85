"""
The models the write and read benchmarks use: the README's ``Social`` table, a ``Users`` table in which a
bookmark is counted too (as ``Bookmark`` in ``tests/support/models.py``), and a post whose like counter is sharded.

The baselines use :class:`PlainPost` and :class:`PlainLike`: the same items in the same table, as plain PynamoDB
models without :class:`~pynamodb_counters.CounterMixin`, written and read the way a user does without this
library.

Each benchmark points them at its own engine (:func:`benchmarks._shared.point_models_at`); until then they
point nowhere useful, and the benchmarks set dummy credentials, so nothing reaches AWS.
"""
from __future__ import annotations

from typing import Any, List, Optional

from pynamodb.attributes import NumberAttribute, UnicodeAttribute, UnicodeSetAttribute
from pynamodb.models import Model

from pynamodb_counters import CounterField, CounterMixin, counted_by
from pynamodb_counters.declare._stored_names import FEEDERS as _FEEDERS
from pynamodb_counters.declare._stored_names import SEQUENCE as _SEQUENCE
from pynamodb_counters.declare._stored_names import WRITE_ID

REGION = "us-east-1"
NOWHERE = "http://127.0.0.1:9"  # the discard port: replaced before any request
SEQUENCE = _SEQUENCE.attr_name  # the attribute every counted write adds 1 to on its parent
FEEDERS = _FEEDERS.attr_name  # the relations that have fed a parent's counters: every counted write adds its own
# WRITE_ID: the attribute a counted save stores its token in. The baselines store the library's attributes as a
# user's plain models would (benchmarks.overhead fails unless its baseline sends the counted save's very request)


class Post(CounterMixin, Model):
    class Meta:
        table_name = "Social"
        region = REGION
        host: Optional[str] = NOWHERE

    pk = UnicodeAttribute(hash_key=True)  # "POST#00042"
    sk = UnicodeAttribute(range_key=True)  # "META"
    like_tally = CounterField()
    bookmark_count = CounterField()

    @classmethod
    def audit_filter(cls) -> Any:
        return cls.sk == "META"


class User(CounterMixin, Model):
    """A parent in another table, with a hash key only."""

    class Meta:
        table_name = "Users"
        region = REGION
        host: Optional[str] = NOWHERE

    user_id = UnicodeAttribute(hash_key=True)  # "USER#0007"
    bookmarks = CounterField()


class Like(CounterMixin, Model):
    """Counted once: in its post's ``like_tally``. Lives in the post's partition."""

    class Meta:
        table_name = "Social"
        region = REGION
        host: Optional[str] = NOWHERE

    pk = UnicodeAttribute(hash_key=True)  # "POST#00042"
    sk = UnicodeAttribute(range_key=True)  # "LIKE#USER#0007"
    liked_at = NumberAttribute()
    post = counted_by(Post.like_tally, key=lambda like: (like.pk, "META"), prefix="LIKE#")


LIKE_FEED = Like.post.feeder_entry
"""What a counted save of a :class:`Like` adds to its post's ``_cfeed``: ``counter<feeder id``
(``like_tally<prefix=LIKE#``)."""


class Bookmark(CounterMixin, Model):
    """Counted twice: in its post (``Social``) and in its user (``Users``): one transaction, three actions."""

    class Meta:
        table_name = "Social"
        region = REGION
        host: Optional[str] = NOWHERE

    pk = UnicodeAttribute(hash_key=True)  # "POST#00042"
    sk = UnicodeAttribute(range_key=True)  # "BOOKMARK#USER#0007"
    user_id = UnicodeAttribute()
    post = counted_by(Post.bookmark_count, key=lambda b: (b.pk, "META"), prefix="BOOKMARK#")
    owner = counted_by(User.bookmarks, key=lambda b: b.user_id)


SHARDS = 16
"""The shards of :attr:`ShardedPost.like_tally`."""


class ShardedPost(CounterMixin, Model):
    """A post whose like counter is spread over :data:`SHARDS` items: shard 0 is the post item itself
    (``pk = "POST#S00042"``, ``sk = "META"``), shards 1 to 15 are ``pk = "POST#S00042#SHARD1"`` ... ``#SHARD15``
    with the same ``sk``. Its ``save()`` creates them; ``ShardedPost.like_tally.total(key)`` reads them with one
    BatchGetItem and sums them.
    """

    class Meta:
        table_name = "Social"
        region = REGION
        host: Optional[str] = NOWHERE

    pk = UnicodeAttribute(hash_key=True)  # "POST#S00042"
    sk = UnicodeAttribute(range_key=True)  # "META"
    like_tally = CounterField(shards=SHARDS)

    @classmethod
    def audit_filter(cls) -> Any:
        return cls.sk == "META"


class ShardedLike(CounterMixin, Model):
    """A like of a :class:`ShardedPost`, in its partition: counted on the shard ``crc32`` of its key picks."""

    class Meta:
        table_name = "Social"
        region = REGION
        host: Optional[str] = NOWHERE

    pk = UnicodeAttribute(hash_key=True)  # "POST#S00042"
    sk = UnicodeAttribute(range_key=True)  # "LIKE#USER#0007"
    liked_at = NumberAttribute()
    post = counted_by(ShardedPost.like_tally, key=lambda like: (like.pk, "META"), prefix="LIKE#")


class PlainPost(Model):
    """:class:`Post` without this library: a plain PynamoDB model of the same item, for the baselines.

    ``like_tally`` is a plain number a baseline adds 1 to itself. ``sequence`` and ``feeders`` are the attributes
    every counted write also updates on its parent (it adds 1 to ``_cseq`` and :data:`LIKE_FEED` to ``_cfeed``), so
    that a baseline can send the very request the library sends.
    """

    class Meta:
        table_name = "Social"
        region = REGION
        host: Optional[str] = NOWHERE

    pk = UnicodeAttribute(hash_key=True)  # "POST#00042"
    sk = UnicodeAttribute(range_key=True)  # "META"
    like_tally = NumberAttribute(null=True)
    sequence = NumberAttribute(attr_name=SEQUENCE, null=True)
    feeders = UnicodeSetAttribute(attr_name=FEEDERS, null=True)


class PlainLike(Model):
    """:class:`Like` without this library: a plain PynamoDB model of the same item, for the baselines.

    ``write_id`` is the attribute a counted save stores its token in (``_cwid``): a baseline that sends the
    library's request sets it; a baseline that stores likes as a user would without this library leaves it out.
    """

    class Meta:
        table_name = "Social"
        region = REGION
        host: Optional[str] = NOWHERE

    pk = UnicodeAttribute(hash_key=True)  # "POST#00042"
    sk = UnicodeAttribute(range_key=True)  # "LIKE#USER#0007"
    liked_at = NumberAttribute()
    write_id = UnicodeAttribute(attr_name=WRITE_ID, null=True)


ALL_MODELS: List[Any] = [Post, User, Like, Bookmark, ShardedPost, ShardedLike]
PLAIN_MODELS: List[Any] = [PlainPost, PlainLike]
