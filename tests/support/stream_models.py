"""Models counted from the table's stream (``counting="stream"``): boards and their pins, in one table, every
child in its board's partition. Pins count on the board (a count, a sum of stars, the published ones, views over
four shards), on their folder (a move between folders of one board), and on a daily rollup the first pin of a day
creates. A note counts in its board's transaction and from the stream at once."""
from __future__ import annotations

import functools
from typing import Any, Tuple

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.constants import STREAM_NEW_AND_OLD_IMAGE
from pynamodb.models import Model

from pynamodb_counters import CounterField, CounterMixin, counted_by
from tests.support.models import REGION


class Board(CounterMixin, Model):
    class Meta:
        table_name = "Boards"
        region = REGION
        stream_view_type = STREAM_NEW_AND_OLD_IMAGE

    pk = UnicodeAttribute(hash_key=True)  # "BOARD#b1"
    sk = UnicodeAttribute(range_key=True)  # "META"
    pin_count = CounterField()
    stars = CounterField()
    published = CounterField()
    views = CounterField(shards=4)
    note_count = CounterField()  # counted in the note's transaction
    note_words = CounterField()  # counted from the stream

    @classmethod
    def audit_filter(cls) -> Any:
        return cls.sk == "META"  # folders, days, pins and notes share the table


class Folder(CounterMixin, Model):
    class Meta:
        table_name = "Boards"
        region = REGION
        stream_view_type = STREAM_NEW_AND_OLD_IMAGE

    pk = UnicodeAttribute(hash_key=True)  # the board's
    sk = UnicodeAttribute(range_key=True)  # "FOLDER#<name>"
    pin_count = CounterField()


class DailyPins(CounterMixin, Model):
    class Meta:
        table_name = "Boards"
        region = REGION
        stream_view_type = STREAM_NEW_AND_OLD_IMAGE

    pk = UnicodeAttribute(hash_key=True)  # the board's
    sk = UnicodeAttribute(range_key=True)  # "DAY#2026-12-04"
    label = UnicodeAttribute(null=True)
    pins = CounterField()


class Pin(CounterMixin, Model):
    class Meta:
        table_name = "Boards"
        region = REGION
        stream_view_type = STREAM_NEW_AND_OLD_IMAGE

    pk = UnicodeAttribute(hash_key=True)  # the board's
    sk = UnicodeAttribute(range_key=True)  # "PIN#<user>"
    folder = UnicodeAttribute(default="inbox")
    day = UnicodeAttribute(default="2026-12-04")
    status = UnicodeAttribute(default="draft")
    rating = NumberAttribute(default=0)
    board = counted_by(Board.pin_count, key=lambda pin: (pin.pk, "META"), prefix="PIN#", counting="stream")
    board_stars = counted_by(Board.stars, key=lambda pin: (pin.pk, "META"), prefix="PIN#", counting="stream",
                             amount=lambda pin: int(pin.rating))
    board_published = counted_by(Board.published, key=lambda pin: (pin.pk, "META"), prefix="PIN#",
                                 counting="stream", when=lambda pin: pin.status == "published")
    board_views = counted_by(Board.views, key=lambda pin: (pin.pk, "META"), prefix="PIN#", counting="stream")
    in_folder = counted_by(Folder.pin_count, key=lambda pin: (pin.pk, f"FOLDER#{pin.folder}"), prefix="PIN#",
                           counting="stream")
    of_day = counted_by(DailyPins.pins, key=lambda pin: (pin.pk, f"DAY#{pin.day}"), prefix="PIN#",
                        counting="stream", create_parent=True,
                        parent_defaults=lambda pin: {"label": f"pins of {pin.day}"})


class Note(CounterMixin, Model):
    class Meta:
        table_name = "Boards"
        region = REGION
        stream_view_type = STREAM_NEW_AND_OLD_IMAGE

    pk = UnicodeAttribute(hash_key=True)  # the board's
    sk = UnicodeAttribute(range_key=True)  # "NOTE#<n>"
    words = NumberAttribute(default=0)
    board = counted_by(Board.note_count, key=lambda note: (note.pk, "META"), prefix="NOTE#")
    board_words = counted_by(Board.note_words, key=lambda note: (note.pk, "META"), prefix="NOTE#",
                             counting="stream", amount=lambda note: int(note.words))


STREAM_MODELS = [Board, Folder, DailyPins, Pin, Note]


@functools.cache
def tallies(shards: int, table: str = "Tallies") -> Tuple[Any, Any]:
    """A post and its likes in ``table``, the post's ``views`` counted from the stream over ``shards`` shards: the
    models as deployed with that ``shards=`` (a factory: the feeder id is the prefix, stable through a reshard; one
    pair per number of shards and table)."""
    meta = type("Meta", (), {"table_name": table, "region": REGION, "stream_view_type": STREAM_NEW_AND_OLD_IMAGE})

    class Post(CounterMixin, Model):
        Meta = meta
        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        views = CounterField(shards=shards)

    class Like(CounterMixin, Model):
        Meta = meta
        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        post = counted_by(Post.views, key=lambda like: (like.pk, "META"), prefix="LIKE#", counting="stream")

    return Post, Like
