"""Models at the edges of audits: sums of an attribute that something wrote around the library with the wrong type;
a ``prefix=`` relation whose ``key=`` sends the children of one partition to several parents (answers under
several questions of one forum); and children that expire beside a parent whose ``audit_filter()`` admits every item
that is not a child, expiry markers included. Each pair has a table of its own, which the tests create
(:func:`create_tables`) beside the suite's."""
from __future__ import annotations

from typing import Any

from pynamodb.attributes import NumberAttribute, TTLAttribute, UnicodeAttribute
from pynamodb.constants import STREAM_NEW_AND_OLD_IMAGE
from pynamodb.models import Model

from pynamodb_counters import CounterField, CounterMixin, counted_by

REGION = "us-east-1"


class Cart(CounterMixin, Model):
    class Meta:
        table_name = "Carts"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)  # "CART#1"
    sk = UnicodeAttribute(range_key=True)  # "META"
    quantity = CounterField()

    @classmethod
    def audit_filter(cls) -> Any:
        return cls.sk == "META"


class Line(CounterMixin, Model):
    class Meta:
        table_name = "Carts"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)  # the cart's
    sk = UnicodeAttribute(range_key=True)  # "LINE#<sku>"
    units = NumberAttribute(default=1)
    cart = counted_by(Cart.quantity, key=lambda line: (line.pk, "META"), prefix="LINE#", amount=lambda line: line.units)


class Question(CounterMixin, Model):
    """A parent of its answers, several of them in one forum's partition."""

    class Meta:
        table_name = "Questions"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)  # "FORUM#1"
    sk = UnicodeAttribute(range_key=True)  # "QUESTION#<n>"
    answers = CounterField()

    @classmethod
    def audit_filter(cls) -> Any:
        return cls.sk.startswith("QUESTION#")


class Answer(CounterMixin, Model):
    class Meta:
        table_name = "Questions"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)  # the forum's
    sk = UnicodeAttribute(range_key=True)  # "ANSWER#<question n>#<id>"
    topic = counted_by(Question.answers, key=lambda answer: (answer.pk, "QUESTION#" + answer.sk.split("#")[1]),
                       prefix="ANSWER#")


class Crew(CounterMixin, Model):
    class Meta:
        table_name = "Crews"
        region = REGION
        stream_view_type = STREAM_NEW_AND_OLD_IMAGE

    pk = UnicodeAttribute(hash_key=True)  # "CREW#1"
    sk = UnicodeAttribute(range_key=True)  # "META"
    badges = CounterField()

    @classmethod
    def audit_filter(cls) -> Any:
        return ~cls.sk.startswith("BADGE#")  # every item of the table but the badges: the markers pass it


class Badge(CounterMixin, Model):
    class Meta:
        table_name = "Crews"
        region = REGION
        stream_view_type = STREAM_NEW_AND_OLD_IMAGE

    pk = UnicodeAttribute(hash_key=True)  # the crew's
    sk = UnicodeAttribute(range_key=True)  # "BADGE#<name>"
    expires = TTLAttribute(null=True)
    crew = counted_by(Crew.badges, key=lambda badge: (badge.pk, "META"), prefix="BADGE#", expiries="stream")


def create_tables() -> None:
    """The tables, on whatever engine the models point at."""
    for model in (Cart, Question, Crew):
        model.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
