"""
A stream record counted with a marker, as one write of the commit: a counted child deleted by DynamoDB's TTL
(:func:`expiry_write`, from the record's old image), or a record of a child counted from the stream into parents
outside its partition (:func:`streamed_write`, from its old and new images). :class:`RecordMarker` is the write's
own action in the transaction that counts it: instead of writing the child (DynamoDB deleted it, or anyone wrote
it), it creates the record's marker (``declare._expiry_rules``), create-only, so that the record is counted once.
No I/O; :func:`expiry_write` records on the instance the item it is counted from, and the marker's expiry is read
off the clock.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Dict, Optional

from .._keys import ItemId, key_of
from ..declare._expiry_rules import MARKER, MARKER_LIFETIME, STREAM_MARKER, marker_key, ttl_attribute
from ..declare._spec import spec_of
from ..declare._stored_names import WRITE_ID
from ..exceptions import ConditionFailedError, CounterError, DuplicateChildError
from ._actions import CHECK_FAILED, Cancellation, ChildAction
from ._deltas import Decision
from ._stored import remember_stored
from ._writes import Write, WriteKind

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.models import Model

__all__ = ["RecordMarker", "expiry_write", "streamed_write"]


def expiry_write(instance: Model, item: Dict[str, Any], event: str) -> Write:
    """The write that takes off the counts of ``instance``, loaded from ``item`` (the stream record's old image),
    deleted by TTL, as stream record ``event`` says."""
    remember_stored(instance, item)  # what it is counted from
    return Write(WriteKind.EXPIRY, type(instance), spec_of(type(instance)), key_of(instance), instance, event=event)


def streamed_write(before: Optional[Model], after: Optional[Model], event: str) -> Write:
    """The write that counts stream record ``event`` of a child counted from the stream into parents outside its
    partition: from ``before`` to ``after`` (the child in the record's old and new images; ``None`` where the
    record has none)."""
    child = after if after is not None else before
    assert child is not None
    return Write(WriteKind.STREAMED, type(child), spec_of(type(child)), key_of(child), child, event=event,
                 images=(before, after))


class RecordMarker(ChildAction):
    """A marked write's own action: the create-only Put of its stream record's marker, in the child's table, which
    expires itself two days later through the child's ``TTLAttribute``; keyed ``_cexpiry#<eventID>`` for an
    expiry, ``_cstream#<eventID>`` for a record counted outside its parent's partition, so that the one record of a
    deletion by TTL that both take stores two markers. Found stored, the record was counted before (a batch
    delivered again): :class:`~pynamodb_counters.exceptions.DuplicateChildError`."""

    verb = "Put"
    relearns = False

    def __init__(self, index: int, write: Write, decision: Decision, where: Optional[ItemId] = None,
                 now: Optional[float] = None) -> None:
        super().__init__(index, write, decision, where)
        assert write.event is not None
        start = STREAM_MARKER if write.kind is WriteKind.STREAMED else MARKER
        self.key_item = marker_key(self.model, write.event, start)
        values = [next(iter(value.values())) for value in self.key_item.values()]
        self.where = (self.model.Meta.table_name, values[0], values[1] if len(values) > 1 else None)
        self.expires = int(now if now is not None else time.time()) + MARKER_LIFETIME

    @property
    def what(self) -> str:
        """What the record counted: an expiry, or a stream record."""
        return "expiry" if self.write.kind is WriteKind.EXPIRY else "stream record"

    @property
    def label(self) -> str:
        state = "expired" if self.write.kind is WriteKind.EXPIRY else "counted from the stream"
        return f"{self.model.__name__} {self.key!r} ({state}, stream record {self.write.event})"

    def request(self, token: str) -> Dict[str, Any]:
        ttl = ttl_attribute(self.model)
        assert ttl is not None
        item = dict(self.key_item)
        item[MARKER] = {"S": self.model.Meta.table_name}
        item[ttl.attr_name] = {"N": str(self.expires)}
        item[WRITE_ID] = {"S": token}
        return {"TableName": self.model.Meta.table_name, "Item": item,
                "ConditionExpression": "attribute_not_exists(#k)",
                "ExpressionAttributeNames": {"#k": next(iter(self.key_item))},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}

    def stored_after(self, request: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        return None  # the child is gone, or not the library's to know

    def own(self, said: Cancellation, token: str) -> bool:
        return said.code == CHECK_FAILED and (said.item or {}).get(WRITE_ID) == {"S": token}

    def condition_error(self, said: Cancellation) -> CounterError:
        if said.item and MARKER in said.item:
            taken = "taken off" if self.write.kind is WriteKind.EXPIRY else "counted"
            return DuplicateChildError(f"the {self.what} of {self.label} was {taken} already; it was not counted "
                                       f"again", said.error, raw_item=said.item, **self.about(said))
        return ConditionFailedError(f"the marker key of {self.label} holds an item the library did not write; "
                                    f"nothing was written", said.error, **self.about(said))
