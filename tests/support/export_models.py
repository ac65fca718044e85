"""Models the export audits are tried on: every kind of relation an export can evaluate, in two tables.

The Forums table holds forums (``sk = "META"``) with five counters, each fed differently: a polymorphic family
sharing a prefix (``Topic`` and its subclass ``Pinned`` counted, their sibling ``Poll`` not), a conditional count
and a signed sum over the same votes (``when=``, ``amount=``), a sharded counter (views), and members in a table
of their own. Daily buckets (``sk = "DAY"``) are rollups created by their first hit, expiring with a TTL.
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from pynamodb.attributes import DiscriminatorAttribute, NumberAttribute, TTLAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_counters import CounterField, CounterMixin, counted_by

REGION = "us-east-1"


class Forum(CounterMixin, Model):
    class Meta:
        table_name = "Forums"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)  # "FORUM#f1"
    sk = UnicodeAttribute(range_key=True)  # "META"
    topic_count = CounterField()
    upvotes = CounterField()
    score = CounterField()
    view_count = CounterField(shards=4)
    member_count = CounterField()

    @classmethod
    def audit_filter(cls) -> Any:
        return cls.sk == "META"


class ForumItem(CounterMixin, Model):
    """A polymorphic family in the forum's partition."""

    class Meta:
        table_name = "Forums"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)  # the forum's "FORUM#f1"
    sk = UnicodeAttribute(range_key=True)  # "TOPIC#t1"
    kind = DiscriminatorAttribute()


class Topic(ForumItem, discriminator="Topic"):
    forum = counted_by(Forum.topic_count, key=lambda topic: (topic.pk, "META"), prefix="TOPIC#")


class Pinned(Topic, discriminator="Pinned"):
    """A topic too: the relation is inherited, and counts it."""


class Poll(ForumItem, discriminator="Poll"):
    """Under the same prefix, and not a topic: never counted."""


class Vote(CounterMixin, Model):
    class Meta:
        table_name = "Forums"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)  # "VOTE#u1"
    value = NumberAttribute()  # stars, 0 to 3
    upvote = counted_by(Forum.upvotes, key=lambda vote: (vote.pk, "META"), when=lambda vote: vote.value >= 2,
                        prefix="VOTE#")
    score = counted_by(Forum.score, key=lambda vote: (vote.pk, "META"), amount=lambda vote: int(vote.value),
                       prefix="VOTE#")


class View(CounterMixin, Model):
    class Meta:
        table_name = "Forums"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)  # "VIEW#u1"
    forum = counted_by(Forum.view_count, key=lambda view: (view.pk, "META"), prefix="VIEW#")


class Member(CounterMixin, Model):
    """In a table of its own, under the forum's hash key."""

    class Meta:
        table_name = "Members"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)  # the forum's "FORUM#f1"
    sk = UnicodeAttribute(range_key=True)  # "MEMBER#u1"
    forum = counted_by(Forum.member_count, key=lambda member: (member.pk, "META"), prefix="MEMBER#")


class Daily(CounterMixin, Model):
    """A rollup bucket: one per forum and day, created by the day's first hit, expiring with its TTL."""

    class Meta:
        table_name = "Forums"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)  # "FORUM#f1#DAY#2026-11-30"
    sk = UnicodeAttribute(range_key=True)  # "DAY"
    hits = CounterField()
    expires = TTLAttribute(null=True)

    @classmethod
    def audit_filter(cls) -> Any:
        return cls.sk == "DAY"


class Hit(CounterMixin, Model):
    class Meta:
        table_name = "Forums"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)  # the bucket's "FORUM#f1#DAY#2026-11-30"
    sk = UnicodeAttribute(range_key=True)  # "HIT#u1"
    expires_at = NumberAttribute()  # when the bucket this hit creates expires, in seconds since the epoch
    day = counted_by(Daily.hits, key=lambda hit: (hit.pk, "DAY"), prefix="HIT#", create_parent=True,
                     parent_defaults=lambda hit: {"expires": datetime.fromtimestamp(hit.expires_at, timezone.utc)})


#: one model per table, to create them
TABLE_MODELS = (Forum, Member)
#: the counters, each with the child models that feed it
COUNTERS = {
    "topic_count": (Topic, Pinned),
    "upvotes": (Vote,),
    "score": (Vote,),
    "view_count": (View,),
    "member_count": (Member,),
}
