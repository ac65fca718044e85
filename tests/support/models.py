"""Models the suite counts with: the Social table of the README, and the layouts users asked about."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from pynamodb.attributes import (
    DiscriminatorAttribute,
    NumberAttribute,
    TTLAttribute,
    UnicodeAttribute,
    VersionAttribute,
)
from pynamodb.constants import STREAM_NEW_AND_OLD_IMAGE, STREAM_OLD_IMAGE
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


class Thread(CounterMixin, Model):
    """A parent of children that change: messages are published, moved, edited and soft-deleted."""

    class Meta:
        table_name = "Threads"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)  # "THREAD#t1"
    sk = UnicodeAttribute(range_key=True)  # "META"
    message_count = CounterField()
    published_count = CounterField()
    word_total = CounterField()  # a sum counter is an ordinary CounterField
    score = CounterField()
    upvotes = CounterField()


class Message(CounterMixin, Model):
    """A child that changes, as the issue declares it: its own partition, its thread named by an attribute."""

    class Meta:
        table_name = "Threads"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)  # "MSG#m1"
    sk = UnicodeAttribute(range_key=True)  # "MSG"
    thread_id = UnicodeAttribute()
    status = UnicodeAttribute(default="draft")
    words = NumberAttribute(default=0)
    deleted_at = NumberAttribute(null=True)
    title = UnicodeAttribute(null=True)

    thread = counted_by(Thread.message_count, key=lambda m: (m.thread_id, "META"),
                        when=lambda m: m.deleted_at is None,  # soft delete
                        children=lambda key: messages_of(key[0], counted=lambda m: m.deleted_at is None))
    published = counted_by(Thread.published_count, key=lambda m: (m.thread_id, "META"),
                           when=lambda m: m.status == "published" and m.deleted_at is None,
                           children=lambda key: messages_of(key[0], counted=lambda m: m.status == "published"
                                                            and m.deleted_at is None))
    words_on_thread = counted_by(Thread.word_total, key=lambda m: (m.thread_id, "META"), amount=lambda m: m.words,
                                 children=lambda key: messages_of(key[0], amount=lambda m: int(m.words)))


def messages_of(thread: str, counted: Any = None, amount: Any = None) -> int:
    """What a thread's counter should hold, counted from its messages with a consistent Scan (the audits'
    ``children=``)."""
    total = 0
    for message in Message.scan(Message.thread_id == thread, consistent_read=True):
        if counted is None or counted(message):
            total += amount(message) if amount is not None else 1
    return total


class Vote(CounterMixin, Model):
    """A child in its parent's partition (``prefix=``): a signed sum, and a conditional count of upvotes."""

    class Meta:
        table_name = "Threads"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)  # the thread's "THREAD#t1"
    sk = UnicodeAttribute(range_key=True)  # "VOTE#USER#7"
    value = NumberAttribute()  # +1 or -1

    score = counted_by(Thread.score, key=lambda v: (v.pk, "META"), amount=lambda v: int(v.value), prefix="VOTE#")
    upvote = counted_by(Thread.upvotes, key=lambda v: (v.pk, "META"), when=lambda v: v.value > 0, prefix="VOTE#")


class Game(CounterMixin, Model):
    """A parent whose counters admit or refuse: a fixed limit, and the game's own limit as stored."""

    class Meta:
        table_name = "Games"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)  # "GAME#g1"
    sk = UnicodeAttribute(range_key=True)  # "META"
    max_players = NumberAttribute(null=True)
    players = CounterField(limit=3)  # a fixed limit
    seated = CounterField(limit=max_players)  # the game's own limit, read from the stored item
    spectators = CounterField(limit=lambda game: game.max_players)  # the same, named by a function


class Player(CounterMixin, Model):
    """A child in its game's partition, counted against the fixed limit."""

    class Meta:
        table_name = "Games"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)  # the game's "GAME#g1"
    sk = UnicodeAttribute(range_key=True)  # "PLAYER#u1"
    game = counted_by(Game.players, key=lambda p: (p.pk, "META"), prefix="PLAYER#")


class Seat(CounterMixin, Model):
    """A child in its own partition, counted against its game's stored limit; it can move between games."""

    class Meta:
        table_name = "Games"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)  # "SEAT#u1"
    sk = UnicodeAttribute(range_key=True)  # "SEAT"
    game_id = UnicodeAttribute()
    game = counted_by(Game.seated, key=lambda s: (s.game_id, "META"), children=lambda key: seats_of(key[0]))


def seats_of(game: str) -> int:
    return sum(1 for _ in Seat.scan(Seat.game_id == game, consistent_read=True))


class Spectator(CounterMixin, Model):
    class Meta:
        table_name = "Games"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)  # the game's "GAME#g1"
    sk = UnicodeAttribute(range_key=True)  # "WATCH#u1"
    game = counted_by(Game.spectators, key=lambda s: (s.pk, "META"), prefix="WATCH#")


class Show(CounterMixin, Model):
    """A parent that exists before its children: a show and its total claps."""

    class Meta:
        table_name = "Rollups"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)  # "SHOW#s1"
    sk = UnicodeAttribute(range_key=True)  # "META"
    clap_total = CounterField()

    @classmethod
    def audit_filter(cls) -> Any:
        return cls.sk == "META"


class DailyClaps(CounterMixin, Model):
    """A rollup: one item per show and day, created by the day's first clap, expiring after 90 days."""

    class Meta:
        table_name = "Rollups"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)  # "SHOW#s1"
    sk = UnicodeAttribute(range_key=True)  # "DAY#2026-11-30"
    claps = CounterField()
    expires = TTLAttribute(null=True)
    label = UnicodeAttribute(null=True)

    @classmethod
    def audit_filter(cls) -> Any:
        return cls.sk.startswith("DAY#")


class Clap(CounterMixin, Model):
    class Meta:
        table_name = "Rollups"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)  # the show's "SHOW#s1"
    sk = UnicodeAttribute(range_key=True)  # "CLAP#USER#u1"
    day = UnicodeAttribute()  # "2026-11-30"
    clapped_at = NumberAttribute()  # seconds since the epoch

    show = counted_by(Show.clap_total, key=lambda c: (c.pk, "META"), prefix="CLAP#")
    daily = counted_by(DailyClaps.claps, key=lambda c: (c.pk, f"DAY#{c.day}"), create_parent=True,
                       parent_defaults=lambda c: {"expires": datetime.fromtimestamp(c.clapped_at + 90 * 86400,
                                                                                    timezone.utc),
                                                  "label": f"{c.pk} on {c.day}"},
                       children=lambda key: claps_on(key[0], key[1][len("DAY#"):]))


def claps_on(show: str, day: str) -> int:
    return sum(1 for _ in Clap.query(show, Clap.sk.startswith("CLAP#"), Clap.day == day, consistent_read=True))


class Team(CounterMixin, Model):
    """A parent whose children expire (invites, sessions), counted in every way a relation counts."""

    class Meta:
        table_name = "Teams"
        region = REGION
        stream_view_type = STREAM_NEW_AND_OLD_IMAGE

    pk = UnicodeAttribute(hash_key=True)  # "TEAM#t1"
    sk = UnicodeAttribute(range_key=True)  # "META"
    invites = CounterField()  # every invite
    pending = CounterField()  # the invites still pending (when=)
    seats = CounterField()  # the seats they hold (amount=)
    load = CounterField(shards=4)  # every invite, sharded
    sent = CounterField()  # every invite sent: its expiries knowingly not taken off
    online = CounterField()  # sessions, in another table with a hash key only

    @classmethod
    def audit_filter(cls) -> Any:
        return cls.sk == "META"


class DailyInvites(CounterMixin, Model):
    """A rollup of a team's invites per day, created by the day's first invite."""

    class Meta:
        table_name = "Teams"
        region = REGION
        stream_view_type = STREAM_NEW_AND_OLD_IMAGE

    pk = UnicodeAttribute(hash_key=True)  # the team's "TEAM#t1"
    sk = UnicodeAttribute(range_key=True)  # "DAY#2026-12-02"
    invites = CounterField()

    @classmethod
    def audit_filter(cls) -> Any:
        return cls.sk.startswith("DAY#")


def _team(invite: Any) -> Any:
    return (invite.pk, "META")


class Invite(CounterMixin, Model):
    """A child that expires by TTL, its expiries taken off from the table's stream."""

    class Meta:
        table_name = "Teams"
        region = REGION
        stream_view_type = STREAM_NEW_AND_OLD_IMAGE

    pk = UnicodeAttribute(hash_key=True)  # the team's "TEAM#t1"
    sk = UnicodeAttribute(range_key=True)  # "INVITE#ann"
    status = UnicodeAttribute(default="pending")
    seats = NumberAttribute(default=1)
    day = UnicodeAttribute(default="2026-12-02")
    expires = TTLAttribute(null=True)

    team = counted_by(Team.invites, key=_team, prefix="INVITE#", expiries="stream")
    waiting = counted_by(Team.pending, key=_team, when=lambda invite: invite.status == "pending", prefix="INVITE#",
                         expiries="stream")
    seat_total = counted_by(Team.seats, key=_team, amount=lambda invite: invite.seats, prefix="INVITE#",
                            expiries="stream")
    spread = counted_by(Team.load, key=_team, prefix="INVITE#", expiries="stream")
    history = counted_by(Team.sent, key=_team, prefix="INVITE#", expiries="ignored")
    daily = counted_by(DailyInvites.invites, key=lambda invite: (invite.pk, f"DAY#{invite.day}"), create_parent=True,
                       expiries="stream")


class Session(CounterMixin, Model):
    """A child that expires in a table of its own, keyed by a hash key only; its stream holds old images only."""

    class Meta:
        table_name = "TeamSessions"
        region = REGION
        stream_view_type = STREAM_OLD_IMAGE

    session_id = UnicodeAttribute(hash_key=True)
    team = UnicodeAttribute()  # "TEAM#t1"
    expires = TTLAttribute(null=True)

    of_team = counted_by(Team.online, key=lambda session: (session.team, "META"), expiries="stream")


#: one model per table, to create them
TABLE_MODELS = (Post, User, Entity, Doc, Edit, Video, Thread, Game, Show, Team, Session)
#: every model, to point them at an engine
ALL_MODELS = (Post, User, Like, Bookmark, Comment, Reply, Entity, Board, Card, Doc, Edit, Video, VideoItem, View,
              Fan, Report, Thread, Message, Vote, Game, Player, Seat, Spectator, Show, DailyClaps, Clap, Team,
              DailyInvites, Invite, Session)
