"""
Children that expire: :func:`count_expiries` takes the counts of counted children deleted by DynamoDB's TTL off
their parents, from the table's stream, exactly once.

Each expiry is taken off as the library's own delete would take it off (every relation declared
``expiries="stream"``: ``when=``, ``amount=``, shards, rollups), computed from the old image, in one
TransactWriteItems with a marker item of its stream record (see ``declare._expiry_rules``): the expiries of a
batch go in as few transactions as DynamoDB's limits allow, each parent's changes merged into one ``ADD``
(``_markers.commit_marked``, run by the commit's recoveries). A record delivered again finds its marker and is
skipped. Every other record (inserts, edits, deletes by anyone but the TTL, the library's own included, already
counted) is left alone.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Iterable, List, Mapping, Optional, Sequence, Set, Tuple, Type, Union

from pynamodb.expressions.condition import Condition
from pynamodb.expressions.operand import Path

from .._write_results import CounterChange
from ..declare._expiry_rules import MARKER, STREAM
from ..declare._spec import check_told_apart, relations_of, spec_of
from ..declare._stored_names import WRITE_ID
from ..exceptions import AmbiguousItemError, ChildValueError, ConfigurationError, InvalidArgumentError, ParentKeyError
from ..write._deltas import deltas
from ..write._markers import expiry_write
from ..write._send import RetryPolicy
from ._markers import Marked, commit_marked, marked
from ._records import check_named, check_tables, load, models_of, records_of, table_of
from ._results import ExpiryResult, Skipped, SkipReason

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.models import Model

__all__ = ["SERVICE", "count_expiries", "is_expiry", "not_a_marker"]

logger = logging.getLogger("pynamodb_counters.streams")

SERVICE = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
"""The ``userIdentity`` of a stream record of a deletion by DynamoDB's TTL."""


def is_expiry(record: Mapping[str, Any]) -> bool:
    """Whether ``record`` is a deletion by DynamoDB's TTL: a ``REMOVE`` whose ``userIdentity`` is the service's."""
    identity = record.get("userIdentity") or {}
    return record.get("eventName") == "REMOVE" and identity.get("type") == SERVICE["type"] and \
        identity.get("principalId") == SERVICE["principalId"]


def count_expiries(event: Union[Mapping[str, Any], Sequence[Mapping[str, Any]]], models: Iterable[Type[Model]], *,
                   table: Optional[str] = None, retry: Optional[RetryPolicy] = None) -> ExpiryResult:
    """Take off the counts of the children of ``models`` that DynamoDB deleted by TTL, from stream records.

    :param event: a Lambda event of a DynamoDB stream (``{"Records": [...]}``), or its records (as ``GetRecords``
      returns them), in stream order.
    :param models: the counted child models whose expiries are counted (each has a relation declared
      ``expiries="stream"``); a polymorphic model's subclasses are found from the old image.
    :param table: the records' table, where they do not name it (``GetRecords`` records have no
      ``eventSourceARN``); needed only when ``models`` are in several tables (such records are refused without
      it).
    :param retry: the retry policy of each transaction (else the first model's ``Meta.counter_retry``).
    :returns: :class:`ExpiryResult`, Lambda's partial batch response: on a failure, Lambda delivers again from the
      first record not applied; every record before it is applied whole, none after it at all.
    :raises InvalidArgumentError: ``event`` is not a stream event, ``models`` are not counted children whose
      expiries are counted through the stream, or records that name no table (``GetRecords``'s) are given
      without ``table=`` for ``models`` in several tables. Nothing was written.
    :raises ConfigurationError: a model of ``models`` whose items nothing tells from another counted child's of its
      table, or a deletion by TTL without its old image (the stream's view type is ``KEYS_ONLY`` or ``NEW_IMAGE``).
      Nothing was written.
    """
    records = records_of(event, "count_expiries")
    given = _models(models)
    check_named(records, given, table, "count_expiries")
    check_tables(records, given, table, "count_expiries")
    expiries, skipped, stop = _classify(records, given, table)
    counted: List[str] = []
    changes: List[CounterChange] = []
    gone: List[CounterChange] = []
    capacity: List[Mapping[str, Any]] = []
    outcome = commit_marked(expiries, retry)
    skipped.extend(Skipped(expiry.event, expiry.sequence, SkipReason.TAKEN_OFF) for expiry in outcome.found)
    for chunk, committed in outcome.committed:
        counted.extend(expiry.event for expiry, decision in zip(chunk, committed.plan.decisions)
                       if decision is not None)
        changes.extend(committed.result.changes)
        gone.extend(committed.result.rollups_gone)
        capacity.extend(committed.result.consumed_capacity)
    stop = outcome.stop or stop  # the records it commits all come before a record that stopped the batch
    if stop is None:
        return ExpiryResult(None, counted, skipped, changes, gone, capacity, None)
    event_id, sequence, failure = stop
    logger.error("count_expiries: stream record %s and the records after it were not applied: %s", event_id, failure)
    return ExpiryResult(sequence, counted, skipped, changes, gone, capacity, failure)


def _classify(records: Sequence[Mapping[str, Any]], models: Tuple[Type[Model], ...], table: Optional[str]
              ) -> Tuple[List[Marked], List[Skipped], Optional[Tuple[str, str, BaseException]]]:
    """The expiries to take off, in stream order, each once; the records skipped; and the first record whose
    expiry cannot be computed (a ``key=``, ``when=`` or ``amount=`` that fails on its old image), where the
    batch stops.

    :raises ConfigurationError: a deletion by TTL without its old image.
    """
    expiries: List[Marked] = []
    skipped: List[Skipped] = []
    seen: Set[str] = set()
    for record in records:
        try:
            found = _expiry(record, models, table)
        except (ParentKeyError, ChildValueError, AmbiguousItemError) as error:
            return expiries, skipped, (str(record["eventID"]), str(record["dynamodb"].get("SequenceNumber", "")),
                                       error)
        if isinstance(found, Skipped):
            skipped.append(found)
        elif found.event in seen:
            skipped.append(Skipped(found.event, found.sequence, SkipReason.REPEATED))
        else:
            seen.add(found.event)
            expiries.append(found)
    return expiries, skipped, None


def not_a_marker() -> Condition:
    """The condition an item of a child's table meets when it is not a marker of the library (an expiry's, or a
    stream record's counted outside its parent's partition), for your own Scans, such as
    ``Invite.scan(filter_condition=not_a_marker())``."""
    return Path(MARKER).does_not_exist()


def _models(models: Iterable[Type[Model]]) -> Tuple[Type[Model], ...]:
    """``models``, checked.

    :raises InvalidArgumentError: not counted children with a relation counting their expiries through the stream.
    """
    given = models_of(models, "count_expiries", "Session")
    for model in given:
        if not isinstance(model, type) or not relations_of(model):
            raise InvalidArgumentError(f"count_expiries(models=...): {model!r} is not a counted child model (a model "
                                       f"with counted_by relations). Nothing was written")
        if not any(relation.expiries == STREAM for relation in relations_of(model)):
            raise InvalidArgumentError(f"count_expiries(models=...): no relation of {model.__name__} counts its "
                                       f"expiries through the stream (declare counted_by(..., expiries='stream')). "
                                       f"Nothing was written")
    check_told_apart(given, "count_expiries", children_only=True)
    return given


def _expiry(record: Mapping[str, Any], models: Tuple[Type[Model], ...], table: Optional[str]
            ) -> Union[Marked, Skipped]:
    """The expiry ``record`` takes off, or why it is skipped."""
    change = record["dynamodb"]
    event, sequence = str(record["eventID"]), str(change.get("SequenceNumber", ""))
    if not is_expiry(record):
        return Skipped(event, sequence, SkipReason.NOT_TTL)
    image = change.get("OldImage")
    if image is None:
        raise ConfigurationError(f"stream record {event} is a deletion by TTL without its OldImage: the stream's view "
                                 f"type is {change.get('StreamViewType', 'KEYS_ONLY or NEW_IMAGE')}. Set it to "
                                 f"NEW_AND_OLD_IMAGES or OLD_IMAGE (see the 'Children that expire' page). Nothing was "
                                 f"written")
    if MARKER in image:
        return Skipped(event, sequence, SkipReason.A_MARKER)
    instance = load(image, models, table_of(record, table), expiring=True)
    if instance is None:
        return Skipped(event, sequence, SkipReason.UNKNOWN)
    if WRITE_ID not in image:
        return Skipped(event, sequence, SkipReason.NEVER_COUNTED)
    model = type(instance)
    found = deltas([relation for relation in spec_of(model).counting if relation.expiries == STREAM], instance, None)
    if not found.counted and not found.gone:
        return Skipped(event, sequence, SkipReason.NOTHING)
    return marked(event, sequence, expiry_write(instance, image, event), found.changes)

