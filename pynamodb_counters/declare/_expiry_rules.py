"""
How a counted child that expires is counted: the ``expiries=`` of :func:`~pynamodb_counters.counted_by`, checked
when the relation is declared and when a subclass inheriting it is made, and the marker item that records each
expiry taken off. Pure, no I/O.

DynamoDB deletes an item past the time its ``TTLAttribute`` holds by itself, outside any transaction of the
library, so a relation of a model with a ``TTLAttribute`` says how its expiries are counted:

* ``expiries="stream"``: :func:`pynamodb_counters.streams.count_expiries`, run on the table's stream, takes each
  expired child off; every expiry it takes off writes a **marker** item in the child's table, in the same
  transaction as the decrements, keyed by the stream record's ``eventID``: a record delivered again finds its
  marker and is not counted twice. A marker expires itself, through the same ``TTLAttribute``, two days later
  (a stream keeps records for 24 hours), so markers never grow past two days of expiries.
* ``expiries="ignored"``: knowingly not: the counter keeps counting expired children (until a repair).

A child counted from the stream (``counting="stream"``) into a parent outside its partition is counted with a
marker too, one per stream record, keyed ``_cstream#<eventID>`` (:func:`marker_key` with :data:`STREAM_MARKER`), so
that the marker of a deletion by TTL that both paths take never collides with its expiry marker. Whether its model
can hold one is known only when such a record comes (:func:`check_record_markers`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Optional, Type

from pynamodb.attributes import Attribute, TTLAttribute
from pynamodb.constants import NUMBER, STRING

from ..exceptions import ConfigurationError
from ._stored_names import MARKER, STREAM_MARK

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.models import Model

__all__ = ["EXPIRIES", "IGNORED", "MARKER", "MARKER_LIFETIME", "STREAM", "STREAM_MARKER", "check_expiries",
           "check_inherited_expiries", "check_record_markers", "marker_key", "ttl_attribute"]

STREAM = "stream"
"""``expiries="stream"``: expiries are taken off by ``count_expiries`` on the table's stream."""
IGNORED = "ignored"
"""``expiries="ignored"``: expiries are knowingly not taken off."""
EXPIRIES = (STREAM, IGNORED)

MARKER_LIFETIME = 2 * 24 * 3600
"""How long a marker is kept, in seconds: longer than a stream keeps its records (24 hours)."""

STREAM_MARKER = STREAM_MARK
"""The start of the hash key of a stream record's marker (``_cstream#<eventID>``), where an expiry's is
:data:`MARKER` (``_cexpiry#<eventID>``)."""


def ttl_attribute(model: type) -> Optional[Attribute[Any]]:
    """``model``'s ``TTLAttribute``, or ``None``."""
    return next((attribute for attribute in _attributes(model).values() if isinstance(attribute, TTLAttribute)), None)


_SAY_HOW = ("expiries='stream': pynamodb_counters.streams.count_expiries takes them off from the table's stream (see "
            "the 'Children that expire' page);\n"
            "expiries='ignored': knowingly not, the counter keeps counting expired children until a repair.")
"""The advice closing an error on a relation that does not say how its expiries are counted."""


def check_expiries(owner: type, where: str, expiries: Optional[str]) -> None:
    """Refuse a relation of ``owner`` that does not say how the expiries of a child with a ``TTLAttribute`` are
    counted, says it of a child that never expires, or counts them through the stream in a table whose key
    cannot hold a marker.

    :raises ConfigurationError: saying why the counters would drift and what to declare.
    """
    attributes = _attributes(owner)
    ttl = _ttl_name(attributes)
    if expiries is not None and expiries not in EXPIRIES:
        raise ConfigurationError(f"{where}: expiries= is 'stream' or 'ignored', not {expiries!r}\n"
                                 f"'stream': taken off from the table's stream by "
                                 f"pynamodb_counters.streams.count_expiries; 'ignored': knowingly not")
    if ttl is None:
        if expiries is not None:
            raise ConfigurationError(f"{where}: expiries={expiries!r}, but {owner.__name__} has no TTLAttribute\n"
                                     f"expiries= is for a child whose model has one (DynamoDB deletes it by "
                                     f"itself): leave expiries= out")
        return
    if expiries is None:
        raise ConfigurationError(
            f"{where} needs expiries=: {owner.__name__}.{ttl} is a TTLAttribute\n"
            f"DynamoDB deletes expired {owner.__name__} items by itself, outside any transaction of the library: "
            f"the counter would stay high for every child that expires.\n{_SAY_HOW}")
    if expiries == STREAM:
        _check_marker_key(owner, where, attributes, "expiries='stream'", "Each expiry taken off", MARKER)


def check_record_markers(model: type, where: str, declaring: bool = False) -> None:
    """Refuse to count a stream record of ``model`` with a marker (a child counted from the stream into a parent
    outside its partition, ``where``) where its table cannot hold one that expires: ``model`` has no
    ``TTLAttribute`` (markers would never expire), or its key cannot hold a marker's. Checked at a record's count,
    and, ``declaring``, when a relation whose parent is in another table is declared (all of its children are
    outside their parent's partition: ``model``'s attributes are read from its namespace).

    :raises ConfigurationError: saying what to declare.
    """
    attributes = _attributes(model)
    needs = "counting from the stream into a parent outside its partition"
    if _ttl_name(attributes) is None:
        raise ConfigurationError(
            f"{where}: counted from the stream into a parent outside its partition, each stream record is counted "
            f"with a marker item in {model.__name__}'s table, which expires through {model.__name__}'s "
            f"TTLAttribute, and {model.__name__} has none (its markers would never expire).\n"
            f"Declare one on {model.__name__} (such as expires_at = TTLAttribute(null=True): a child without a time "
            f"never expires) and enable TTL on that attribute of the table; or store the children "
            f"in their parent's partition (their hash key is the parent's), or count the relation with "
            f"counting='transaction'." + ("" if declaring else " Nothing was written for this record"))
    _check_marker_key(model, where, attributes, needs, "Each stream record counted", STREAM_MARKER)


def check_inherited_expiries(owner: type, base: type, where: str, counter: str, expiries: Optional[str]) -> None:
    """Refuse ``owner``, a subclass of ``base``, where a relation it inherits from ``base`` (``where``, counting
    into ``counter``) does not say how the expiries of ``owner``'s items are counted: ``owner`` adds a
    ``TTLAttribute``, or its key cannot hold a marker. A subclass without a ``TTLAttribute`` never expires: nothing
    to count off.

    :raises ConfigurationError: naming ``owner``, the relation, and where to declare what.
    """
    attributes = _attributes(owner)
    ttl = _ttl_name(attributes)
    if ttl is None:
        return
    if expiries is None:
        raise ConfigurationError(
            f"{owner.__name__} inherits {where} without expiries=, and {owner.__name__}.{ttl} is a TTLAttribute\n"
            f"DynamoDB deletes expired {owner.__name__} items by itself, outside any transaction of the library: "
            f"{counter} would stay high for every one that expires.\n"
            f"Declare the TTLAttribute on {base.__name__}, where the relation is (null=True: an item without a time "
            f"never expires), and say there how expiries are counted.\n{_SAY_HOW}")
    if expiries == STREAM:
        _check_marker_key(owner, f"{owner.__name__} inherits {where}", attributes, "expiries='stream'",
                          "Each expiry taken off", MARKER)


def _check_marker_key(owner: type, where: str, attributes: Dict[str, Attribute[Any]], needs: str, each: str,
                      start: str) -> None:
    """Refuse markers (``needs``: what counts with them; ``each``: what each marker records, its hash key starting
    with ``start``) on a model whose key cannot hold a marker's."""
    for attribute in attributes.values():
        wanted = (STRING,) if attribute.is_hash_key else (STRING, NUMBER) if attribute.is_range_key else None
        if wanted is not None and attribute.attr_type not in wanted:
            part = "hash" if attribute.is_hash_key else "range"
            kinds = " or ".join("string" if kind == STRING else "number" for kind in wanted)
            raise ConfigurationError(
                f"{where}: {needs} needs {owner.__name__}'s {part} key to be a {kinds} attribute, not "
                f"{type(attribute).__name__}\n"
                f"{each} is recorded in a marker item of {owner.__name__}'s table, keyed "
                f"'{start}#<eventID>'.")


def marker_key(model: Type[Model], event_id: str, start: str = MARKER) -> Dict[str, Dict[str, str]]:
    """The raw key of the marker of the stream record ``event_id`` in ``model``'s table: an expiry's
    (``start``: :data:`MARKER`), or a record's counted outside its parent's partition (:data:`STREAM_MARKER`)."""
    attributes = model.get_attributes()
    key = {attributes[model._hash_keyname].attr_name: {STRING: f"{start}#{event_id}"}}  # type: ignore[index]
    if model._range_keyname:
        attribute = attributes[model._range_keyname]
        key[attribute.attr_name] = {NUMBER: "0"} if attribute.attr_type == NUMBER else {STRING: MARKER}
    return key


def _ttl_name(attributes: Dict[str, Attribute[Any]]) -> Optional[str]:
    """The Python name of the ``TTLAttribute`` among ``attributes``, or ``None``."""
    return next((name for name, attribute in attributes.items() if isinstance(attribute, TTLAttribute)), None)


def _attributes(model: type) -> Dict[str, Attribute[Any]]:
    """``model``'s attributes by Python name, from its namespace and its bases' (read in its class body too)."""
    found: Dict[str, Attribute[Any]] = {}
    for klass in reversed(model.__mro__):
        found.update((name, value) for name, value in vars(klass).items() if isinstance(value, Attribute))
    return found

