"""Models the suite counts with: the Social table of the README, and the layouts users asked about."""
from __future__ import annotations

from typing import Any

from pynamodb.attributes import DiscriminatorAttribute, NumberAttribute, UnicodeAttribute, VersionAttribute
from pynamodb.models import Model

from pynamodb_counters import CounterField, CounterMixin, counted_by

REGION = "us-east-1"


class Post(CounterMixin, Model):
    class Meta:
        table_name = "Social"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)  # "POST#a91f"
    sk = UnicodeAttribute(range_key=True)  # "META"
    title = UnicodeAttribute(null=True)
    like_tally = CounterField()
    bookmark_count = CounterField(attr_name="bookmarkCount")
    comment_count = CounterField()

    @classmethod
    def audit_filter(cls) -> Any:
        return cls.sk == "META"  # likes, bookmarks and comments share the table


class User(CounterMixin, Model):
    """A parent in another table, with a hash key only."""

    class Meta:
        table_name = "Users"
        region = REGION

    user_id = UnicodeAttribute(hash_key=True)
    bookmarks = CounterField()


class Like(CounterMixin, Model):
    class Meta:
        table_name = "Social"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)  # "POST#a91f"
    sk = UnicodeAttribute(range_key=True)  # "LIKE#USER#7c20"
    liked_at = NumberAttribute()
    post = counted_by(Post.like_tally, key=lambda like: (like.pk, "META"), prefix="LIKE#")


class Bookmark(CounterMixin, Model):
    """Counted twice: on its post, and on the user in another table."""

    class Meta:
        table_name = "Social"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)  # "BOOKMARK#USER#7c20"
    user_id = UnicodeAttribute()
    post = counted_by(Post.bookmark_count, key=lambda b: (b.pk, "META"), prefix="BOOKMARK#")
    owner = counted_by(User.bookmarks, key=lambda b: b.user_id, children=lambda key: bookmarks_of(key[0]))


def bookmarks_of(user_id: str) -> int:
    """Count a user's bookmarks for audits: they live in their posts' partitions (a GSI would serve at scale)."""
    return sum(1 for _ in Bookmark.scan((Bookmark.user_id == user_id) & Bookmark.sk.startswith("BOOKMARK#"),
                                        consistent_read=True))


class Comment(CounterMixin, Model):
    """Both a child (counted on its post) and a parent (counting its replies)."""

    class Meta:
        table_name = "Social"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)  # "COMMENT#c1"
    text = UnicodeAttribute()
    reply_count = CounterField()
    post = counted_by(Post.comment_count, key=lambda c: (c.pk, "META"))


class Reply(CounterMixin, Model):
    class Meta:
        table_name = "Social"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)  # "REPLY#c1#r1"
    comment_sk = UnicodeAttribute()
    comment = counted_by(Comment.reply_count, key=lambda r: (r.pk, r.comment_sk))


class Entity(CounterMixin, Model):
    """A polymorphic single-table model."""

    class Meta:
        table_name = "Boards"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    kind = DiscriminatorAttribute()


class Board(Entity, discriminator="Board"):
    card_count = CounterField()


class Card(Entity, discriminator="Card"):
    board = counted_by(Board.card_count, key=lambda card: (card.pk, "BOARD"))


class Doc(CounterMixin, Model):
    """A parent with optimistic locking."""

    class Meta:
        table_name = "Docs"
        region = REGION

    doc_id = UnicodeAttribute(hash_key=True)
    title = UnicodeAttribute(null=True)
    version = VersionAttribute()
    edit_count = CounterField()


class Edit(CounterMixin, Model):
    """A child with optimistic locking, in a table keyed by a number."""

    class Meta:
        table_name = "Edits"
        region = REGION

    doc_id = UnicodeAttribute(hash_key=True)
    seq = NumberAttribute(range_key=True)
    version = VersionAttribute()
    doc = counted_by(Doc.edit_count, key=lambda e: e.doc_id)


class Video(CounterMixin, Model):
    """A hot parent: views over 16 shards, fans over 4 (under another attribute name), reports unsharded."""

    class Meta:
        table_name = "Videos"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)  # "VIDEO#v1"
    sk = UnicodeAttribute(range_key=True)  # "META"
    title = UnicodeAttribute(null=True)
    view_count = CounterField(shards=16)
    fan_count = CounterField(attr_name="fans", shards=4)
    report_count = CounterField()

    @classmethod
    def audit_filter(cls) -> Any:
        return cls.sk == "META"


class VideoItem(CounterMixin, Model):
    """An item in a video's partition; the subclasses below are counted on its three counters."""

    class Meta:
        table_name = "Videos"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)  # "VIDEO#v1"
    sk = UnicodeAttribute(range_key=True)  # "VIEW#USER#7", "FAN#USER#7", "REPORT#USER#7"


class View(VideoItem):
    video = counted_by(Video.view_count, key=lambda view: (view.pk, "META"), prefix="VIEW#")


class Fan(VideoItem):
    video = counted_by(Video.fan_count, key=lambda fan: (fan.pk, "META"), prefix="FAN#")


class Report(VideoItem):
    video = counted_by(Video.report_count, key=lambda report: (report.pk, "META"), prefix="REPORT#")


#: one model per table, to create them
TABLE_MODELS = (Post, User, Entity, Doc, Edit, Video)
#: every model, to point them at an engine
ALL_MODELS = (Post, User, Like, Bookmark, Comment, Reply, Entity, Board, Card, Doc, Edit, Video, VideoItem, View,
              Fan, Report)
