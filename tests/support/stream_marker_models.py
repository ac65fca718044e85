"""Models counted from the stream whose children are stored outside their parent's partition: each such record is
counted with a marker item of its own (``count_stream``).

Likes are stored under their user (table "Likes", keyed by user and post) and counted into their post (table
"Posts"): a count, a sum of stars, the liked ones with a comment, and a daily rollup the first like of a day
creates. Replies live in their own thread's partition (table "Threads") and count into the thread they name: their
own (by the thread's mark) or another (by a marker), and a move between the two counts each part its own way.
Invites expire: counted into their post in their transaction (``expiries="stream"``) and from the stream at once,
so that one deletion by TTL is taken by both paths. (A child counted into a parent of another table without a
``TTLAttribute``, whose markers would never expire, is refused when declared: the tests declare one.)"""
from __future__ import annotations

from pynamodb.attributes import NumberAttribute, TTLAttribute, UnicodeAttribute
from pynamodb.constants import STREAM_NEW_AND_OLD_IMAGE
from pynamodb.models import Model

from pynamodb_counters import CounterField, CounterMixin, counted_by
from tests.support.models import REGION


class Post(CounterMixin, Model):
    class Meta:
        table_name = "Posts"
        region = REGION
        stream_view_type = STREAM_NEW_AND_OLD_IMAGE

    post_id = UnicodeAttribute(hash_key=True)  # "POST#p1"
    like_count = CounterField()
    stars = CounterField()
    commented = CounterField()
    bookmarks = CounterField()
    invites = CounterField()  # in the invite's transaction
    invites_seen = CounterField()  # from the stream


class DailyLikes(CounterMixin, Model):
    class Meta:
        table_name = "Posts"
        region = REGION
        stream_view_type = STREAM_NEW_AND_OLD_IMAGE

    post_id = UnicodeAttribute(hash_key=True)  # "DAY#2026-12-06"
    likes = CounterField()


class Like(CounterMixin, Model):
    class Meta:
        table_name = "Likes"
        region = REGION
        stream_view_type = STREAM_NEW_AND_OLD_IMAGE

    user_id = UnicodeAttribute(hash_key=True)  # "USER#u1": a user's likes in one partition
    post_id = UnicodeAttribute(range_key=True)  # "POST#p1"
    stars = NumberAttribute(default=1)
    comment = UnicodeAttribute(null=True)
    day = UnicodeAttribute(default="2026-12-06")
    expires_at = TTLAttribute(null=True)  # markers expire through it
    post = counted_by(Post.like_count, key=lambda like: (like.post_id,), counting="stream")
    post_stars = counted_by(Post.stars, key=lambda like: (like.post_id,), counting="stream",
                            amount=lambda like: int(like.stars))
    post_commented = counted_by(Post.commented, key=lambda like: (like.post_id,), counting="stream",
                                when=lambda like: like.comment is not None)
    of_day = counted_by(DailyLikes.likes, key=lambda like: (f"DAY#{like.day}",), counting="stream",
                        create_parent=True)


class Invite(CounterMixin, Model):
    class Meta:
        table_name = "Invites"
        region = REGION
        stream_view_type = STREAM_NEW_AND_OLD_IMAGE

    user_id = UnicodeAttribute(hash_key=True)
    post_id = UnicodeAttribute(range_key=True)
    expires_at = TTLAttribute(null=True)
    post = counted_by(Post.invites, key=lambda invite: (invite.post_id,), expiries="stream")
    post_seen = counted_by(Post.invites_seen, key=lambda invite: (invite.post_id,), counting="stream")


class Thread(CounterMixin, Model):
    class Meta:
        table_name = "Threads"
        region = REGION
        stream_view_type = STREAM_NEW_AND_OLD_IMAGE

    pk = UnicodeAttribute(hash_key=True)  # "THREAD#t1"
    sk = UnicodeAttribute(range_key=True)  # "META"
    replies = CounterField()


class Reply(CounterMixin, Model):
    class Meta:
        table_name = "Threads"
        region = REGION
        stream_view_type = STREAM_NEW_AND_OLD_IMAGE

    pk = UnicodeAttribute(hash_key=True)  # the thread it was written in
    sk = UnicodeAttribute(range_key=True)  # "REPLY#<n>"
    thread = UnicodeAttribute()  # the thread it counts in: its own, or another
    expires_at = TTLAttribute(null=True)
    in_thread = counted_by(Thread.replies, key=lambda reply: (reply.thread, "META"), prefix="REPLY#",
                           counting="stream")


MARKER_MODELS = [Post, DailyLikes, Like, Invite, Thread, Reply]
