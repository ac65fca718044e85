"""
The attributes the library itself stores on users' items, by the names they are stored under: a counted
child's write and edit ids, a parent's sequence, feeder set and shard slots, an expiry marker's mark. What they
mean must outlive the code: never rename one.

Declarations only, no I/O.
"""
from __future__ import annotations

from typing import Any

from pynamodb.attributes import Attribute, NumberAttribute, UnicodeAttribute, UnicodeSetAttribute

__all__ = ["EDITED_BY", "EDIT_ID", "FEEDERS", "FEEDER_SEPARATOR", "MARKER", "OUTSIDE", "PROBE", "SEQUENCE", "SHARD",
           "SHARD_COUNT", "STORED_NAMES", "STREAM_MARK", "WRITE_ID", "outside_entry", "stream_mark_name"]

WRITE_ID = "_cwid"
"""The attribute each counted child item carries: the token of the transaction that created it. A retry whose
response was lost recognises its own committed write by it, even where the server forgets or ignores tokens."""

EDIT_ID = "_ceid"
"""The attribute a counted edit or update of a child sets: the token of the transaction that last edited it. A
retried edit whose response was lost recognises its own committed write by it; the child's :data:`WRITE_ID`
stays the create's, so that a retry of the create is still recognised after an edit."""

EDITED_BY: Attribute[str] = UnicodeAttribute(attr_name=EDIT_ID)
""":data:`EDIT_ID` as an attribute, for the Update of a counted edit."""

SEQUENCE: Attribute[float] = NumberAttribute(attr_name="_cseq")
"""The counted-write sequence each parent item carries: every counted write that touches the item adds 1, as
does every repair. A repair conditions on it, so no counted write can land unseen between an audit's count
and the repair, not even a like and an unlike that leave the counter where it was."""

FEEDERS: Attribute[Any] = UnicodeSetAttribute(attr_name="_cfeed")
"""The relations that have fed each counter of a parent item (or shard item): every counted write adds, in the
same Update, one entry per counter it changes and relation feeding it, ``"<counter attribute name><<feeder id>"``
(``like_tally<prefix=LIKE#``, see :func:`feeder_id`). An audit that cannot see one of them reports the parent as
unverifiable instead of counting too few children."""

FEEDER_SEPARATOR = "<"
"""Between the counter's attribute name and the feeder id in a :data:`FEEDERS` entry."""

SHARD: Attribute[float] = NumberAttribute(attr_name="_cshard")
"""Marks a shard item and holds its index (``1`` and up). Scans of a parent model's table skip these items with
:func:`~pynamodb_counters.not_a_shard`."""

SHARD_COUNT: Attribute[float] = NumberAttribute(attr_name="_cshards")
"""On a parent item: how many shards (the parent included) have been created for it."""

MARKER = "_cexpiry"
"""The attribute that makes an item a marker of the library (it holds the child's table), and the start of an
expiry marker's hash key (``_cexpiry#<eventID>``): see ``_expiry_rules``. A stream record's marker (a child counted
from the stream outside its parent's partition) carries it too, under a hash key of its own
(:data:`STREAM_MARK` ``#<eventID>``), so that every reader that leaves markers alone leaves both alone."""

STREAM_MARK = "_cstream"
"""The start of the name of the attribute that marks, on a parent item (or shard item), the last stream record a
relation counted into it by :func:`~pynamodb_counters.streams.count_stream`: ``_cstream:<feeder entry>``
(:func:`stream_mark_name`) holds its sequence number, zero-padded to 40 digits. One per relation counted from the
stream into the item: a mark says "counted" only of what its own relation counts, whichever handler counts the
others. Also the start of the hash key of the marker of a stream record counted outside its parent's partition
(``_cstream#<eventID>``)."""


PROBE = "_cprobe"
"""The attribute that makes an item an audit's probe: an item an audit of a counter fed from the stream writes into
a parent's partition of the child table before it counts the children, and deletes after (its sort key is
``_cprobe#<id>``), so that the stream shows which records the count saw. It holds the counter it proves
(``Post.like_tally``); :func:`~pynamodb_counters.streams.count_stream` skips its records."""


def stream_mark_name(feeder_entry: str) -> str:
    """The name of the mark of the stream records a relation counted into an item (:data:`STREAM_MARK`), from the
    relation's entry in the item's feeder set (``like_tally<prefix=LIKE#``): it means the same as long as the
    feeder record does, through a module renamed or a model declared in a factory."""
    return f"{STREAM_MARK}:{feeder_entry}"


OUTSIDE = "outside;"
"""What starts the feeder id in a parent's feeder entry (:data:`FEEDERS`) written by
:func:`~pynamodb_counters.streams.count_stream` for a child counted into it from outside its partition
(``like_tally<outside;prefix=LIKE#``): such children are not in the parent's partition, so an audit that counts a
relation's children there (its ``prefix=``) reports the parent unverifiable."""


def outside_entry(feeder_entry: str) -> str:
    """The feeder entry of a relation's child counted into a parent from outside its partition (:data:`OUTSIDE`)."""
    counter, _, feeder = feeder_entry.partition(FEEDER_SEPARATOR)
    return f"{counter}{FEEDER_SEPARATOR}{OUTSIDE}{feeder}"


STORED_NAMES = (WRITE_ID, EDIT_ID, SEQUENCE.attr_name, FEEDERS.attr_name, SHARD.attr_name, SHARD_COUNT.attr_name,
                MARKER, STREAM_MARK, PROBE)
"""Every attribute name the library stores on items, from the definitions above: a counted model's own attribute
stored under one of them is refused when its class is made."""
