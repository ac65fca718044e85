"""One table of several kinds of items, as a single-table design holds them ("Feed"), counted from its stream.

* posts (``POST#<id>`` / ``META``), with likes, bookmarks, cheers and replies counted into them;
* likes under their post (``LIKE#<user>``), counted from the stream into the post, into the post's day
  (``POST#<id>`` / ``DAY#<day>``, a rollup in the post's partition) and into the site's day (``DAY#<day>`` /
  ``META``, a rollup in another partition: no ``prefix=`` on that relation, a marker per record);
* bookmarks under their post (``BM#<user>``), counted from the stream by a handler of their own;
* cheers under their user (``USER#<id>`` / ``CHEER#<post>``), counted from the stream into the post they name:
  outside its partition, with ``prefix=``;
* threads (``THREAD#<id>`` / ``META``) and their messages (``MSG#<id>`` / ``MSG``), counted from the stream into
  the thread their ``thread_id`` names, with no prefix (an audit counts them with ``children=``);
* replies under their post (``REPLY#<n>``), counted in their transactions;
* and items the library never wrote (users' profiles, ``USER#<id>`` / ``PROFILE``).

What tells them apart is what each model declares: its relations' prefixes, its non-null attributes without
defaults (a message's ``thread_id``, a like's ``day``)."""
from __future__ import annotations

from typing import Any, Tuple

from pynamodb.attributes import TTLAttribute, UnicodeAttribute
from pynamodb.constants import STREAM_NEW_AND_OLD_IMAGE
from pynamodb.models import Model

from pynamodb_counters import CounterField, CounterMixin, counted_by
from tests.support.factories import raw_client
from tests.support.models import REGION

TABLE = "Feed"


class _Meta:
    table_name = TABLE
    region = REGION
    stream_view_type = STREAM_NEW_AND_OLD_IMAGE


class Post(CounterMixin, Model):
    Meta = _Meta
    pk = UnicodeAttribute(hash_key=True)  # "POST#p1"
    sk = UnicodeAttribute(range_key=True)  # "META"
    title = UnicodeAttribute(null=True)
    like_tally = CounterField()
    bookmark_tally = CounterField()
    cheer_tally = CounterField()
    reply_count = CounterField()

    @classmethod
    def audit_filter(cls) -> Any:
        return (cls.sk == "META") & cls.pk.startswith("POST#")


class PostDay(CounterMixin, Model):
    """A post's likes of one day: a rollup in the post's partition, created by its first like."""

    Meta = _Meta
    pk = UnicodeAttribute(hash_key=True)  # the post's
    sk = UnicodeAttribute(range_key=True)  # "DAY#2026-12-06"
    likes = CounterField()


class Day(CounterMixin, Model):
    """The site's likes of one day: a rollup in a partition of its own, created by its first like."""

    Meta = _Meta
    pk = UnicodeAttribute(hash_key=True)  # "DAY#2026-12-06"
    sk = UnicodeAttribute(range_key=True)  # "META"
    likes = CounterField()


class Thread(CounterMixin, Model):
    Meta = _Meta
    pk = UnicodeAttribute(hash_key=True)  # "THREAD#t1"
    sk = UnicodeAttribute(range_key=True)  # "META"
    messages = CounterField()


class Like(CounterMixin, Model):
    Meta = _Meta
    pk = UnicodeAttribute(hash_key=True)  # the post's
    sk = UnicodeAttribute(range_key=True)  # "LIKE#<user>"
    day = UnicodeAttribute()  # "2026-12-06": every like has its day
    expires_at = TTLAttribute(null=True)  # the site day's markers expire through it
    post = counted_by(Post.like_tally, key=lambda like: (like.pk, "META"), prefix="LIKE#", counting="stream")
    of_post_day = counted_by(PostDay.likes, key=lambda like: (like.pk, f"DAY#{like.day}"), prefix="LIKE#",
                             counting="stream", create_parent=True)
    of_day = counted_by(Day.likes, key=lambda like: (f"DAY#{like.day}", "META"), counting="stream",
                        create_parent=True)


class Bookmark(CounterMixin, Model):
    Meta = _Meta
    pk = UnicodeAttribute(hash_key=True)  # the post's
    sk = UnicodeAttribute(range_key=True)  # "BM#<user>"
    post = counted_by(Post.bookmark_tally, key=lambda bookmark: (bookmark.pk, "META"), prefix="BM#",
                      counting="stream")


class Cheer(CounterMixin, Model):
    """Stored under its user, counted into the post it names: outside the post's partition."""

    Meta = _Meta
    pk = UnicodeAttribute(hash_key=True)  # "USER#u1"
    sk = UnicodeAttribute(range_key=True)  # "CHEER#POST#p1"
    post_id = UnicodeAttribute()  # "POST#p1"
    expires_at = TTLAttribute(null=True)  # its markers expire through it
    post = counted_by(Post.cheer_tally, key=lambda cheer: (cheer.post_id, "META"), prefix="CHEER#",
                      counting="stream")


def thread_messages(key: Tuple[Any, ...]) -> int:
    """The messages of a thread, for audits: a Scan of the table (a small test table)."""
    items = raw_client(None).scan(TableName=TABLE)["Items"]
    return sum(1 for item in items if item.get("thread_id", {}).get("S") == key[0] and "_cexpiry" not in item)


class Message(CounterMixin, Model):
    Meta = _Meta
    pk = UnicodeAttribute(hash_key=True)  # "MSG#m1"
    sk = UnicodeAttribute(range_key=True)  # "MSG"
    thread_id = UnicodeAttribute()  # "THREAD#t1": every message names its thread
    expires_at = TTLAttribute(null=True)  # its markers expire through it
    thread = counted_by(Thread.messages, key=lambda message: (message.thread_id, "META"),
                        children=thread_messages, counting="stream")


class Reply(CounterMixin, Model):
    Meta = _Meta
    pk = UnicodeAttribute(hash_key=True)  # the post's
    sk = UnicodeAttribute(range_key=True)  # "REPLY#<n>"
    post = counted_by(Post.reply_count, key=lambda reply: (reply.pk, "META"), prefix="REPLY#")


FEED_MODELS = [Post, PostDay, Day, Thread, Like, Bookmark, Cheer, Message, Reply]
