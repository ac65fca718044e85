"""
How a counted child that expires is counted: the ``expiries=`` of :func:`~pynamodb_counters.counted_by`, checked
when the relation is declared, and the marker item that records each expiry taken off. Pure, no I/O.

DynamoDB deletes an item past the time its ``TTLAttribute`` holds by itself, outside any transaction of the
library, so a relation of a model with a ``TTLAttribute`` says how its expiries are counted:

* ``expiries="stream"``: :func:`pynamodb_counters.streams.count_expiries`, run on the table's stream, takes each
  expired child off; every expiry it takes off writes a **marker** item in the child's table, in the same
  transaction as the decrements, keyed by the stream record's ``eventID``: a record delivered again finds its
  marker and is not counted twice. A marker expires itself, through the same ``TTLAttribute``, two days later
  (a stream keeps records for 24 hours), so markers never grow past two days of expiries.
* ``expiries="ignored"``: knowingly not: the counter keeps counting expired children (until a repair).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Optional, Type

from pynamodb.attributes import Attribute, TTLAttribute
from pynamodb.constants import NUMBER, STRING

from .exceptions import ConfigurationError

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.models import Model

__all__ = ["EXPIRIES", "IGNORED", "MARKER", "MARKER_LIFETIME", "STREAM", "check_expiries", "is_marker",
           "marker_key", "ttl_attribute"]

STREAM = "stream"
"""``expiries="stream"``: expiries are taken off by ``count_expiries`` on the table's stream."""
IGNORED = "ignored"
"""``expiries="ignored"``: expiries are knowingly not taken off."""
EXPIRIES = (STREAM, IGNORED)

MARKER = "_cexpiry"
"""The attribute that makes an item an expiry marker (it holds the expired child's table), and the start of a
marker's hash key (``_cexpiry#<eventID>``)."""
MARKER_LIFETIME = 2 * 24 * 3600
"""How long a marker is kept, in seconds: longer than a stream keeps its records (24 hours)."""


def ttl_attribute(model: type) -> Optional[Attribute[Any]]:
    """``model``'s ``TTLAttribute``, or ``None``."""
    return next((attribute for attribute in _attributes(model).values() if isinstance(attribute, TTLAttribute)), None)


def check_expiries(owner: type, where: str, expiries: Optional[str]) -> None:
    """Refuse a relation of ``owner`` that does not say how the expiries of a child with a ``TTLAttribute`` are
    counted, says it of a child that never expires, or counts them through the stream in a table whose key
    cannot hold a marker.

    :raises ConfigurationError: saying why the counters would drift and what to declare.
    """
    attributes = _attributes(owner)
    ttl = next((name for name, attribute in attributes.items() if isinstance(attribute, TTLAttribute)), None)
    if expiries is not None and expiries not in EXPIRIES:
        raise ConfigurationError(f"{where}: expiries= is 'stream' (taken off from the table's stream by "
                                 f"pynamodb_counters.streams.count_expiries) or 'ignored' (knowingly not), not "
                                 f"{expiries!r}")
    if ttl is None:
        if expiries is not None:
            raise ConfigurationError(f"{where}: expiries={expiries!r} is for a child whose model has a TTLAttribute "
                                     f"(DynamoDB deletes it by itself); {owner.__name__} has none: leave expiries= "
                                     f"out")
        return
    if expiries is None:
        raise ConfigurationError(
            f"{where}: {owner.__name__}.{ttl} is a TTLAttribute, so DynamoDB deletes expired {owner.__name__} items "
            f"by itself, outside any transaction of the library: the counter would stay high for every child that "
            f"expires. Say how expiries are counted: expiries='stream' (run "
            f"pynamodb_counters.streams.count_expiries on the table's stream, see the 'Children that expire' page) "
            f"or expiries='ignored' (knowingly not: the counter keeps counting expired children until a repair)")
    if expiries == STREAM:
        for attribute in attributes.values():
            wanted = (STRING,) if attribute.is_hash_key else (STRING, NUMBER) if attribute.is_range_key else None
            if wanted is not None and attribute.attr_type not in wanted:
                part = "hash" if attribute.is_hash_key else "range"
                raise ConfigurationError(
                    f"{where}: expiries='stream' records each expiry taken off in a marker item of "
                    f"{owner.__name__}'s table, keyed '{MARKER}#<eventID>', so its {part} key must be a "
                    f"{' or '.join('string' if kind == STRING else 'number' for kind in wanted)} attribute, not "
                    f"{type(attribute).__name__}")


def marker_key(model: Type[Model], event_id: str) -> Dict[str, Dict[str, str]]:
    """The raw key of the marker of the stream record ``event_id`` in ``model``'s table."""
    attributes = model.get_attributes()
    key = {attributes[model._hash_keyname].attr_name: {STRING: f"{MARKER}#{event_id}"}}  # type: ignore[index]
    if model._range_keyname:
        attribute = attributes[model._range_keyname]
        key[attribute.attr_name] = {NUMBER: "0"} if attribute.attr_type == NUMBER else {STRING: MARKER}
    return key


def is_marker(item: Optional[Dict[str, Any]]) -> bool:
    """Whether a raw item is an expiry marker, as the library writes it."""
    return item is not None and MARKER in item


def _attributes(model: type) -> Dict[str, Attribute[Any]]:
    """``model``'s attributes by Python name, from its namespace and its bases' (read in its class body too)."""
    found: Dict[str, Attribute[Any]] = {}
    for klass in reversed(model.__mro__):
        found.update((name, value) for name, value in vars(klass).items() if isinstance(value, Attribute))
    return found

