"""
Children that expire: :func:`count_expiries` takes the counts of counted children deleted by DynamoDB's TTL off
their parents, from the table's stream, exactly once.

DynamoDB deletes an item past the time its ``TTLAttribute`` holds by itself, outside any transaction, and writes a
``REMOVE`` record to the table's stream whose ``userIdentity`` is DynamoDB's own service, with the deleted item
as ``OldImage``. Run as an AWS Lambda on the stream (with ``ReportBatchItemFailures``)::

    from pynamodb_counters.streams import count_expiries

    def handler(event, context):
        return count_expiries(event, models=[Session])

or on records read with ``GetRecords`` (``count_expiries(response["Records"], models=[Session], table="Sessions")``).

Each expiry is taken off as the library's own delete would take it off (every relation declared
``expiries="stream"``: ``when=``, ``amount=``, shards, rollups), computed from the old image, in one
TransactWriteItems with a marker item of its stream record (see ``_expiry_rules``): the expiries of a batch go
in as few transactions as DynamoDB's limits allow, each parent's changes merged into one ``ADD``. A record
delivered again finds its marker and is skipped. Every other record (inserts, edits, deletes by anyone but the
TTL, the library's own included, already counted) is left alone.
"""
from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple, Type, Union

from pynamodb.exceptions import PynamoDBException
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.operand import Path

from .._keys import ItemId, as_returned, discriminator_of, item_id
from .._write_results import CounterChange
from ..declare._expiry_rules import MARKER, STREAM, ttl_attribute
from ..declare._shards import shard_key
from ..declare._spec import relations_of, spec_of
from ..declare._stored_names import WRITE_ID
from ..exceptions import (
    ChildValueError,
    ConfigurationError,
    CounterError,
    InvalidArgumentError,
    ParentKeyError,
)
from ..write._commit import Rejected, commit_in_part, policy_for
from ..write._deltas import deltas
from ..write._expiries import expiry_write
from ..write._plan import MAX_ACTIONS
from ..write._recoveries import EXPIRY_RECOVERIES
from ..write._send import RetryPolicy
from ..write._writes import Write

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.models import Model

__all__ = ["SERVICE", "ExpiryResult", "SkipReason", "Skipped", "count_expiries", "not_a_marker"]

logger = logging.getLogger(__name__)

SERVICE = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
"""The ``userIdentity`` of a stream record of a deletion by DynamoDB's TTL."""



class SkipReason(str, Enum):
    """Why a stream record was left alone (:attr:`Skipped.reason`); each equals its text."""

    NOT_TTL = "not a deletion by TTL"
    """An insert, a modification, or a delete by anyone but DynamoDB's TTL (the library's own delete counted it
    already; a delete around the library is for an audit)."""
    UNKNOWN = "not a counted child of the models given"
    """The deleted item fits none of the models given (its table, key and TTL attributes, class and prefixes), or
    several."""
    NEVER_COUNTED = "never counted (written around the library: no write id)"
    """The deleted item holds no write id of the library (``_cwid``): written with ``skip_counting()``, by a
    migration or a raw PutItem, it was never counted."""
    NOTHING = "counts for nothing (no relation counting its expiries counts it)"
    """The deleted child counts in none of the relations declared ``expiries="stream"`` (``when=`` false)."""
    A_MARKER = "an expiry marker of the library"
    """The deleted item is one of the library's expiry markers, removed by its own TTL."""
    REPEATED = "delivered twice in this batch"
    """The same record (``eventID``) appears earlier in the batch: it is taken off once."""
    TAKEN_OFF = "taken off already (its marker is stored: a batch delivered again)"
    """The record was taken off before (its marker is stored): a batch delivered again."""



@dataclass(frozen=True)
class Skipped:
    """A stream record :func:`count_expiries` left alone, and why.

    :ivar event: its ``eventID``.
    :ivar sequence: its ``SequenceNumber``.
    :ivar reason: why it was skipped.
    """

    event: str
    sequence: str
    reason: SkipReason


class ExpiryResult(Dict[str, Any]):
    """What :func:`count_expiries` did. As a dict it is the partial batch response Lambda reads:
    ``{"batchItemFailures": [{"itemIdentifier": <SequenceNumber>}]}``, naming the first record not applied
    (empty when all were).

    :ivar counted: the ``eventID`` of each expiry taken off by this call.
    :ivar skipped: each record left alone, with why (:class:`Skipped`).
    :ivar changes: the counter changes committed.
    :ivar gone: the changes left out because their parent is gone (deleted, or a rollup past its TTL): its
      counters went with it.
    :ivar consumed_capacity: DynamoDB's ``ConsumedCapacity`` of each transaction committed.
    :ivar error: why the first record not applied was not, or ``None``.
    """

    def __init__(self, failure: Optional[str], counted: Sequence[str], skipped: Sequence[Skipped],
                 changes: Sequence[CounterChange], gone: Sequence[CounterChange],
                 consumed_capacity: Sequence[Mapping[str, Any]], error: Optional[BaseException]) -> None:
        super().__init__(batchItemFailures=[] if failure is None else [{"itemIdentifier": failure}])
        self.counted = tuple(counted)
        self.skipped = tuple(skipped)
        self.changes = tuple(changes)
        self.gone = tuple(gone)
        self.consumed_capacity = tuple(consumed_capacity)
        self.error = error


@dataclass(frozen=True)
class _Expiry:
    """One expiry to take off: its record, its write, and the items its transaction actions name."""

    event: str
    sequence: str
    write: Write
    items: Tuple[ItemId, ...]


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
    :raises ConfigurationError: a deletion by TTL without its old image (the stream's view type is ``KEYS_ONLY`` or
      ``NEW_IMAGE``). Nothing was written.
    """
    records = _records(event)
    given = _models(models)
    _check_named(records, given, table)
    expiries, skipped, stop = _classify(records, given, table)
    counted: List[str] = []
    changes: List[CounterChange] = []
    gone: List[CounterChange] = []
    capacity: List[Mapping[str, Any]] = []
    for chunk in _chunks(expiries):
        left: Set[int] = set()

        def taken_off(position: int, error: CounterError, chunk: List[_Expiry] = chunk, left: Set[int] = left
                      ) -> None:
            left.add(position)  # its marker is stored: a batch delivered again (``_recoveries.TakenOffAlready``)
            skipped.append(Skipped(chunk[position].event, chunk[position].sequence, SkipReason.TAKEN_OFF))

        writes = [expiry.write for expiry in chunk]
        try:
            outcome = commit_in_part(writes, str(uuid.uuid4()), policy_for(writes, retry), EXPIRY_RECOVERIES,
                                     on_left_out=taken_off)
            if isinstance(outcome, Rejected):
                outcome.raise_error()
        except (CounterError, PynamoDBException) as refused:
            first = next(expiry for position, expiry in enumerate(chunk) if position not in left)
            stop = (first.event, first.sequence, refused)
            break
        if outcome is not None:  # committed; None: every expiry of the chunk was taken off already
            counted.extend(expiry.event for position, expiry in enumerate(chunk) if position not in left)
            changes.extend(outcome.result.changes)
            gone.extend(outcome.result.rollups_gone)
            capacity.extend(outcome.result.consumed_capacity)
    if stop is None:
        return ExpiryResult(None, counted, skipped, changes, gone, capacity, None)
    event_id, sequence, failure = stop
    logger.error("count_expiries: stream record %s and the records after it were not applied: %s", event_id, failure)
    return ExpiryResult(sequence, counted, skipped, changes, gone, capacity, failure)


def _classify(records: Sequence[Mapping[str, Any]], models: Tuple[Type[Model], ...], table: Optional[str]
              ) -> Tuple[List[_Expiry], List[Skipped], Optional[Tuple[str, str, Exception]]]:
    """The expiries to take off, in stream order, each once; the records skipped; and the first record whose
    expiry cannot be computed (a ``key=``, ``when=`` or ``amount=`` that fails on its old image), where the
    batch stops.

    :raises ConfigurationError: a deletion by TTL without its old image.
    """
    expiries: List[_Expiry] = []
    skipped: List[Skipped] = []
    seen: Set[str] = set()
    for record in records:
        try:
            found = _expiry(record, models, table)
        except (ParentKeyError, ChildValueError) as error:
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
    """The condition an item of a child's table meets when it is not an expiry marker, for your own Scans, such
    as ``Invite.scan(filter_condition=not_a_marker())``."""
    return Path(MARKER).does_not_exist()


def _records(event: Any) -> List[Mapping[str, Any]]:
    """The records of ``event``.

    :raises InvalidArgumentError: not a stream event nor a list of records.
    """
    records = event.get("Records") if isinstance(event, Mapping) else event
    if not isinstance(records, (list, tuple)) or not all(isinstance(record, Mapping) and "dynamodb" in record
                                                         and "eventID" in record for record in records):
        raise InvalidArgumentError(f"count_expiries() takes a DynamoDB stream event ({{'Records': [...]}}, as Lambda "
                                   f"delivers it) or its records (as GetRecords returns them), not "
                                   f"{str(event)[:120]}. Nothing was written")
    return list(records)


def _check_named(records: Sequence[Mapping[str, Any]], models: Tuple[Type[Model], ...], table: Optional[str]
                 ) -> None:
    """Refuse records that name no table, for ``models`` in several tables, without ``table=``: no record could
    be told to be of one model's table rather than another's, and each would be skipped.

    :raises InvalidArgumentError: asking for ``table=``.
    """
    tables = sorted({model.Meta.table_name for model in models})
    if table is not None or len(tables) < 2:
        return
    if any(":table/" not in str(record.get("eventSourceARN") or "") for record in records):
        raise InvalidArgumentError(f"count_expiries(): the records name no table (no eventSourceARN, as GetRecords "
                                   f"returns them), and the models are in {len(tables)} tables: {', '.join(tables)}\n"
                                   f"Give the records' table with table=, such as table={tables[0]!r} for the "
                                   f"records of {tables[0]}'s stream. Nothing was written.")


def _models(models: Iterable[Type[Model]]) -> Tuple[Type[Model], ...]:
    """``models``, checked.

    :raises InvalidArgumentError: not counted children with a relation counting their expiries through the stream.
    """
    if isinstance(models, type) or isinstance(models, (str, bytes)):
        raise InvalidArgumentError(f"count_expiries(models=...) takes a list of models, such as [Session], not "
                                   f"{models!r}. Nothing was written")
    given = tuple(models)
    if not given:
        raise InvalidArgumentError("count_expiries(models=...) needs at least one model. Nothing was written")
    for model in given:
        if not isinstance(model, type) or not relations_of(model):
            raise InvalidArgumentError(f"count_expiries(models=...): {model!r} is not a counted child model (a model "
                                       f"with counted_by relations). Nothing was written")
        if not any(relation.expiries == STREAM for relation in relations_of(model)):
            raise InvalidArgumentError(f"count_expiries(models=...): no relation of {model.__name__} counts its "
                                       f"expiries through the stream (declare counted_by(..., expiries='stream')). "
                                       f"Nothing was written")
    return given


def _expiry(record: Mapping[str, Any], models: Tuple[Type[Model], ...], table: Optional[str]
            ) -> Union[_Expiry, Skipped]:
    """The expiry ``record`` takes off, or why it is skipped."""
    change = record["dynamodb"]
    event, sequence = str(record["eventID"]), str(change.get("SequenceNumber", ""))
    identity = record.get("userIdentity") or {}
    if record.get("eventName") != "REMOVE" or identity.get("type") != SERVICE["type"] or \
            identity.get("principalId") != SERVICE["principalId"]:
        return Skipped(event, sequence, SkipReason.NOT_TTL)
    image = change.get("OldImage")
    if image is None:
        raise ConfigurationError(f"stream record {event} is a deletion by TTL without its OldImage: the stream's view "
                                 f"type is {change.get('StreamViewType', 'KEYS_ONLY or NEW_IMAGE')}. Set it to "
                                 f"NEW_AND_OLD_IMAGES or OLD_IMAGE (see the 'Children that expire' page). Nothing was "
                                 f"written")
    if MARKER in image:
        return Skipped(event, sequence, SkipReason.A_MARKER)
    instance = _load(record, image, models, table)
    if instance is None:
        return Skipped(event, sequence, SkipReason.UNKNOWN)
    if WRITE_ID not in image:
        return Skipped(event, sequence, SkipReason.NEVER_COUNTED)
    model = type(instance)
    found = deltas([relation for relation in spec_of(model).counting if relation.expiries == STREAM], instance, None)
    if not found.counted and not found.gone:
        return Skipped(event, sequence, SkipReason.NOTHING)
    items = [item_id(change.parent, shard_key(change.key, change.shard)) for change in found.changes]
    write = expiry_write(instance, image, event)
    return _Expiry(event, sequence, write, tuple(dict.fromkeys(items)))


def _load(record: Mapping[str, Any], image: Dict[str, Any], models: Tuple[Type[Model], ...],
          table: Optional[str]) -> Optional[Model]:
    """The child the old image holds, as the one model of ``models`` it fits loads it, else ``None``: in the
    record's table, with its key attributes and TTL attribute, its class (a polymorphic model's) and its relations'
    prefixes."""
    source = str(record.get("eventSourceARN") or "")
    named = source.split(":table/", 1)[1].split("/", 1)[0] if ":table/" in source else table
    loaded: List[Model] = []
    for model in models:
        ttl = ttl_attribute(model)
        attributes = model.get_attributes()
        names = [attributes[name].attr_name for name in (model._hash_keyname, model._range_keyname) if name]
        if named is not None and model.Meta.table_name != named or ttl is None or ttl.attr_name not in image \
                or not all(name in image for name in names):
            continue
        if not _prefixed(model, image):
            continue
        discriminator = discriminator_of(model)
        if discriminator is not None:
            stored = (image.get(discriminator.attr_name) or {}).get("S")
            if stored not in {discriminator.get_discriminator(cls)
                              for cls in discriminator.get_registered_subclasses(model)}:
                continue
        try:
            instance = model.from_raw_data(as_returned(image))
        except (PynamoDBException, ValueError, TypeError, KeyError):  # an item this model cannot load is not its own
            continue
        if not any(type(instance) is type(other) for other in loaded):
            loaded.append(instance)
    return loaded[0] if len(loaded) == 1 else None


def _prefixed(model: Type[Model], image: Dict[str, Any]) -> bool:
    """Whether the image's sort key starts with one of the model's relations' ``prefix=``, where all have one."""
    prefixes = [relation.prefix for relation in relations_of(model)]
    if not model._range_keyname or not all(prefixes):
        return True
    raw = image.get(model.get_attributes()[model._range_keyname].attr_name) or {}
    value = str(next(iter(raw.values()), ""))
    return any(value.startswith(str(prefix)) for prefix in prefixes)


def _chunks(expiries: Sequence[_Expiry]) -> Iterable[List[_Expiry]]:
    """The expiries in stream order, in as few transactions as DynamoDB's limit on actions allows: each expiry is
    its marker and an Update of each parent item it names that the transaction does not name yet."""
    chunk: List[_Expiry] = []
    named: Set[ItemId] = set()
    for expiry in expiries:
        more = 1 + len(set(expiry.items) - named)
        if chunk and len(chunk) + len(named) + more > MAX_ACTIONS:
            yield chunk
            chunk, named = [], set()
        chunk.append(expiry)
        named.update(expiry.items)
    if chunk:
        yield chunk

