"""
What a counter fed from the stream holds at its marks, proven: the I/O an audit adds for relations declared
``counting="stream"``.

:func:`~pynamodb_counters.streams.count_stream` counts a parent's children in stream order and marks the parent
(each shard item) with the last record each relation counted into it (``_cstream:<feeder entry>``), in the update
that counts it. Records after a mark wait for the handler: a recount holds them, the counter does not yet. So the
audit compares the counter with what the children were **at the marks**: the recount, less the changes of the
records after them. To know which records the recount saw, it writes a **probe** item into the parent's
partition of the child table before counting and deletes it after. The records of one partition key reach the
stream in order, so every write the count saw comes before the probe's removal, and a write between the probe's
creation and its removal (one the count may or may not have seen) shows there: the parent is counted again, as a
parent that moved is.

A mark proves which records were counted; nothing else does. A parent item without the mark of a relation whose
records in the stream change it (its records came before the parent existed, or it was deleted and created
again, or no record was counted into it yet) cannot be told from one whose records wait: it is unverifiable, with
that cause, until the handler has counted into it or the stream no longer holds them.

The streams of the child table are read (every stream DynamoDB still lists for it: one disabled and enabled again
keeps the old one readable for 24 hours, and its event source mapping still delivers it) for the parents of a
chunk at once, from each shard's start (shards that ended before every mark are passed over), until each probe's
removal is seen; records of other partitions are dropped as they are read. The probe is ``<child hash key: the
parent's>``, ``<child range key: _cprobe#<id>>``, with ``_cprobe`` naming the counter; it is written create-only,
deleted only if it still holds ``_cprobe``, and the handler skips its records.

An audit from an export reads the streams once (:func:`latest_records`): a parent whose partition has a record
after its marks as exported may have had records waiting then, so the export cannot clear it, and the live table
decides.
"""
from __future__ import annotations

import threading
import time
import uuid
import weakref
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Set, Tuple, Type, Union

import botocore.config
import botocore.exceptions
from pynamodb.constants import NUMBER, STRING
from pynamodb.exceptions import PynamoDBException
from pynamodb.expressions.operand import Path

from .._keys import ParentKey, key_attributes, serialize_key
from ..declare._attributes import CounterField
from ..declare._expiry_rules import STREAM
from ..declare._relations import Relation
from ..declare._spec import relations_of
from ..declare._stored_names import PROBE, stream_mark_name
from ..exceptions import AmbiguousItemError, ChildValueError, ConfigurationError, ParentKeyError, TransactionError
from ..streams._counting import record_changes
from ..streams._records import padded
from ..write._deltas import feeder_entry_of
from ..write._send import pynamodb_connection

__all__ = ["MOVED", "PROBE_WAIT", "Probe", "StreamProof", "latest_records", "streams_client"]

PROBE_WAIT = 30.0
"""How long, in seconds, an audit waits for its probes' records to reach the stream (DynamoDB Streams shows a
write within about a second)."""

Waiting = Union[int, str]
"""What the records after a parent's marks change in its counter, or why that is not known (a cause)."""

Marks = Mapping[Tuple[str, int], str]
"""A parent's marks as read: by mark name and shard index, the sequence number stored (``""``: none)."""


@dataclass(frozen=True)
class Probe:
    """One probe item, written into a parent's partition of a child table."""

    table: str
    partition: str
    """The hash key value the probe shares with the parent and its children, as stream records carry it."""
    range_value: str
    key: Tuple[Any, Any]
    """The probe's key, serialized as PynamoDB's table connection takes it."""


class StreamProof:
    """The probes, the stream reads and the arithmetic that prove a counter fed from the stream at its marks.

    :ivar marks: the name of each mark of the counter's relations, with the relation it is of.
    :ivar progress: for each child model feeding the counter from the stream, the names of the marks of all its
      relations counted from the stream into items of the counter's table.
    :ivar mark_names: every mark an audit reads on the counter's items: :attr:`progress`'s.
    """

    def __init__(self, counter: CounterField, feeders: Sequence[Relation]) -> None:
        self.counter = counter
        self.model: Any = counter.model
        self.attribute = str(counter.name)
        streamed = [relation for relation in feeders if relation.counting == STREAM]
        self.children: Dict[str, Tuple[Type[Any], ...]] = {}
        for relation in streamed:
            table = relation.child_model.Meta.table_name
            self.children[table] = self.children.get(table, ()) + (relation.child_model,)
        self.marks: Dict[str, Relation] = {stream_mark_name(relation.feeder_entry): relation for relation in streamed}
        # the marks of every relation of each child model counting into the counter's items from the stream: one
        # handler counts all of a model's relations, in order, so the latest of them says how far it got there
        self.progress: Dict[Type[Any], Tuple[str, ...]] = {}
        parents = {relation.parent_model.Meta.table_name for relation in streamed}
        for relation in streamed:
            self.progress[relation.child_model] = tuple(
                stream_mark_name(other.feeder_entry) for other in relations_of(relation.child_model)
                if other.counting == STREAM and other.parent_model.Meta.table_name in parents)
        self.mark_names = tuple(dict.fromkeys(name for names in self.progress.values() for name in names))
        self.cause = self._unprovable(streamed)

    def __bool__(self) -> bool:
        return bool(self.children)

    def _unprovable(self, streamed: Sequence[Relation]) -> Optional[str]:
        """Why no parent of the counter can be proven, or ``None``."""
        parent_hash = key_attributes(self.model)[0]
        for relation in streamed:
            child = relation.child_model
            attributes = key_attributes(child)
            if relation.prefix is None:
                return (f"{relation} counts its children with children=, which may see the audit's probe in the "
                        f"partition: declare prefix= to audit it")
            if len(attributes) < 2 or attributes[1].attr_type != STRING:
                return (f"{relation}: the audit's probe needs a string range key in {child.Meta.table_name}, "
                        f"beside the children")
            if attributes[0].attr_type != parent_hash.attr_type or parent_hash.attr_type not in (STRING, NUMBER):
                return (f"{relation}: children counted from the stream are stored in their parent's partition, a "
                        f"string or number hash key of the parent's type")
        return None

    # -- probes ------------------------------------------------------------------------------------------------
    def probe(self, key: ParentKey) -> List[Probe]:
        """Write a probe into ``key``'s partition of each child table, create-only.

        :raises PynamoDBException: a probe could not be written (nothing was).
        """
        hash_value = serialize_key(self.model, key)[0]
        made: List[Probe] = []
        try:
            for table, models in self.children.items():
                child = models[0]
                range_value = f"{PROBE}#{uuid.uuid4().hex}"
                probe = Probe(table, _number(hash_value) if key_attributes(child)[0].attr_type == NUMBER
                              else str(hash_value), range_value, (hash_value, range_value))
                child._get_connection().put_item(
                    probe.key[0], range_key=probe.key[1],
                    attributes={PROBE: {STRING: f"{self.model.__name__}.{self.attribute}"}},
                    condition=Path(key_attributes(child)[0].attr_name).does_not_exist())
                made.append(probe)
        except BaseException:
            self.withdraw(made)
            raise
        return made

    def withdraw(self, probes: Sequence[Probe]) -> None:
        """Delete ``probes``, each only while it is still a probe.

        :raises TransactionError: a probe could not be deleted; the message names its key, to delete it by hand
          (the handler skips its records meanwhile).
        """
        for probe in probes:
            child = self.children[probe.table][0]
            try:
                child._get_connection().delete_item(probe.key[0], range_key=probe.key[1],
                                                    condition=Path(PROBE).exists())
            except PynamoDBException as error:
                raise TransactionError(f"the audit's probe {probe.key!r} in {probe.table} could not be deleted "
                                       f"({error}): delete it by hand (count_stream skips its records)",
                                       error) from error

    # -- the stream ----------------------------------------------------------------------------------------------
    def waiting(self, parents: Sequence[Tuple[ParentKey, Marks, Sequence[Probe]]], wait: float = PROBE_WAIT
                ) -> Dict[ParentKey, Waiting]:
        """For each parent (its key, its marks by name and shard, its probes): the sum of the changes the records
        after its marks make in the counter (each relation's and each shard item's after its own), up to its
        probe's removal; or the cause why it is not known: a record that changes it came between the probe's
        creation and removal (:data:`MOVED`: the parent moved during the count), or a record that changes an item
        without the mark of the record's relation.

        :raises ConfigurationError: a child table has no stream.
        :raises TransactionError: a stream cannot be read.
        """
        found: Dict[ParentKey, Waiting] = {key: 0 for key, _, _ in parents}
        for table, models in self.children.items():
            probes = [probe for _, _, made in parents for probe in made if probe.table == table]
            if not probes:
                continue
            names = {name for name, relation in self.marks.items() if relation.child_model.Meta.table_name == table}
            oldest = min((mark for _, marks, _ in parents for (name, _), mark in marks.items() if name in names),
                         default="")
            records = self._records(table, {probe.partition for probe in probes},
                                    {probe.range_value for probe in probes}, oldest, wait)
            for key, marks, made in parents:
                for probe in made:
                    held = found[key]
                    if probe.table != table or isinstance(held, str):
                        continue
                    change = self._changes(key, marks, probe, records, models)
                    found[key] = change if isinstance(change, str) else held + change
        return found

    def _changes(self, key: ParentKey, marks: Marks, probe: Probe,
                 records: Mapping[str, List[Mapping[str, Any]]], models: Tuple[Type[Any], ...]) -> Waiting:
        """What the records of ``probe``'s partition change in ``key``'s counter after the marks ``marks`` (each
        relation's, each shard item's), or a cause."""
        partition = records.get(probe.partition, [])
        range_name = key_attributes(models[0])[1].attr_name
        opened = closed = None
        for record in partition:
            if (record["dynamodb"].get("Keys", {}).get(range_name) or {}).get(STRING) == probe.range_value:
                if record.get("eventName") == "INSERT":
                    opened = padded(record["dynamodb"]["SequenceNumber"])
                elif record.get("eventName") == "REMOVE":
                    closed = padded(record["dynamodb"]["SequenceNumber"])
        if opened is None or closed is None:
            return f"its probe did not reach the stream of {probe.table} in time: audit it again"
        created = self._created(key, partition) if self.model.Meta.table_name == probe.table else None
        total, unmarked = 0, None
        counted = min(marks.values(), default="")  # every item counted the records up to here
        for record in partition:
            sequence = padded(record["dynamodb"]["SequenceNumber"])
            if sequence <= counted or sequence >= closed:
                continue
            try:
                changes = record_changes(record, models, probe.table)
            except (ParentKeyError, ChildValueError, AmbiguousItemError) as error:
                return f"a record waiting for count_stream cannot be counted ({error})"
            for relation, change in changes:
                if change.attribute != self.attribute or tuple(change.key) != tuple(key) \
                        or change.parent.Meta.table_name != self.model.Meta.table_name:
                    continue
                mark = marks.get((stream_mark_name(feeder_entry_of(relation)), change.shard), "")
                if mark and sequence <= mark:
                    continue  # counted
                progress = max((marks.get((name, change.shard), "") for name in
                                self.progress.get(relation.relation.child_model, ())), default="")
                if progress and sequence <= progress:
                    continue  # the handler was past it there, and did not count it: its parent did not exist then
                if sequence > opened:
                    return MOVED
                if not progress and (created is None or sequence < created):
                    unmarked = relation  # before the item existed, or counted into nothing there yet: unknown
                total += change.delta
        if unmarked is not None:
            return UNMARKED.format(relation=unmarked, table=probe.table)
        return total

    def _created(self, key: ParentKey, partition: Sequence[Mapping[str, Any]]) -> Optional[str]:
        """The sequence number of the parent's latest creation (its item's ``INSERT``) among the records of its
        partition, where the parent's table is the child's: a record after it was written while the parent
        existed, so the handler either counted it (and marked the parent) or has yet to."""
        wanted = [(attribute.attr_name, _number(value) if attribute.attr_type == NUMBER else str(value))
                  for attribute, value in zip(key_attributes(self.model), serialize_key(self.model, key))
                  if value is not None]
        created = None
        for record in partition:
            keys = record["dynamodb"].get("Keys", {})
            if record.get("eventName") == "INSERT" and all(_value(keys.get(name)) == value for name, value in wanted):
                created = padded(record["dynamodb"]["SequenceNumber"])
        return created

    def _records(self, table: str, partitions: Set[str], probes: Set[str], after: str, wait: float
                 ) -> Dict[str, List[Mapping[str, Any]]]:
        """The records of ``table``'s streams in ``partitions``, by partition, in sequence order: every shard of
        every stream read from its start (but those that ended at or before ``after``), until the removal of every
        probe in ``probes`` is seen, or ``wait`` seconds have passed."""
        child = self.children[table][0]
        client = streams_client(child)
        hash_name, range_name = (attribute.attr_name for attribute in key_attributes(child)[:2])
        kept: Dict[str, List[Mapping[str, Any]]] = {}
        removed: Set[str] = set()

        def keep(record: Mapping[str, Any]) -> None:
            keys = record.get("dynamodb", {}).get("Keys", {})
            partition = _value(keys.get(hash_name))
            if partition in partitions:
                kept.setdefault(partition, []).append(record)
                probe = (keys.get(range_name) or {}).get(STRING)
                if probe in probes and record.get("eventName") == "REMOVE":
                    removed.add(probe)

        try:
            open_shards = [left for arn in stream_arns(child)
                           for left in _read_stream(client, arn, after, keep)]
            deadline, pause = time.monotonic() + wait, 0.05
            while open_shards and not probes <= removed and time.monotonic() < deadline:
                time.sleep(pause)  # DynamoDB shows a write in its stream within about a second
                pause = min(pause * 2, 1.0)
                open_shards = [left for left in (_read(client, iterator, keep) for iterator in open_shards)
                               if left is not None]
        except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as error:
            raise TransactionError(f"the stream of {table} cannot be read to audit {self.model.__name__}."
                                   f"{self.attribute} ({error}): the audit of a counter fed from the stream reads "
                                   f"it (dynamodb:ListStreams, DescribeStream, GetShardIterator, GetRecords)",
                                   error) from error
        for records in kept.values():
            records.sort(key=lambda record: padded(record["dynamodb"]["SequenceNumber"]))
        return kept


MOVED = "moved"
"""What :meth:`StreamProof._changes` gives for a parent written during its count."""

UNMARKED = ("records of {table}'s stream change it through {relation}, and it carries no mark of that relation "
            "(no record of it was counted into it yet: it was created, or created again, after them, or the handler "
            "has not counted into it): whether count_stream passed them over (its parent did not exist) or will "
            "count them is not known. Audit it again once the handler has counted into it, or once the stream no "
            "longer holds them (24 hours after their writes)")
"""The :attr:`~pynamodb_counters.Unverifiable.cause` of a parent item without a mark whose records are in the
stream."""


def latest_records(model: Type[Any]) -> Dict[str, str]:
    """The last record of each partition in the streams of ``model``'s table (every stream DynamoDB still lists
    for it), by the partition's hash key value as stream records carry it: its sequence number, zero-padded.

    :raises ConfigurationError: the table has no stream.
    :raises TransactionError: a stream cannot be read.
    """
    client = streams_client(model)
    hash_name = key_attributes(model)[0].attr_name
    latest: Dict[str, str] = {}

    def keep(record: Mapping[str, Any]) -> None:
        partition = _value(record.get("dynamodb", {}).get("Keys", {}).get(hash_name))
        if partition is not None:
            sequence = padded(record["dynamodb"]["SequenceNumber"])
            if sequence > latest.get(partition, ""):
                latest[partition] = sequence

    table = model.Meta.table_name
    try:
        for arn in stream_arns(model):
            for _ in _read_stream(client, arn, "", keep):
                pass  # an open shard: read to its current end
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as error:
        raise TransactionError(f"the stream of {table} cannot be read ({error}): an audit of a counter fed from "
                               f"the stream reads it (dynamodb:ListStreams, DescribeStream, GetShardIterator, "
                               f"GetRecords)", error) from error
    return latest


_clients: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_clients_lock = threading.Lock()


def streams_client(model: Type[Any]) -> Any:
    """A DynamoDB Streams client with ``model``'s connection settings (its region, credentials, timeouts and
    ``Meta.host``), made once per PynamoDB connection. It reaches the region's endpoint, never an account-based
    one (recent botocore releases build one from a stream's ARN, which moto in-process does not answer): both serve
    every call."""
    connection = pynamodb_connection(model)
    with _clients_lock:
        client = _clients.get(connection)
        if client is None:
            settings: Dict[str, Any] = {"connect_timeout": connection._connect_timeout_seconds,
                                        "read_timeout": connection._read_timeout_seconds,
                                        "retries": {"mode": "standard"}}
            try:
                config = botocore.config.Config(account_id_endpoint_mode="disabled", **settings)
            except TypeError:  # a botocore before account-based endpoints: the region's is the only one
                config = botocore.config.Config(**settings)
            client = _clients[connection] = connection.session.create_client(
                "dynamodbstreams", connection.region, endpoint_url=connection.host, config=config)
        return client


def stream_arns(model: Type[Any]) -> List[str]:
    """Every stream of ``model``'s table DynamoDB still lists: its latest, and those disabled less than 24 hours
    ago (a stream disabled and enabled again, to change its view type, keeps the old one readable, and its event
    source mapping delivering it).

    :raises ConfigurationError: the table has no stream, naming how to enable it.
    """
    table = model.Meta.table_name
    described = model._get_connection().describe_table()
    latest = described.get("LatestStreamArn") if described.get("StreamSpecification", {}).get(
        "StreamEnabled", True) else None
    if not latest:
        raise ConfigurationError(
            f"{table} has no stream: {model.__name__} is counted from it (counting='stream'), so nothing has been "
            f"counted since its writes, and an audit reads it to prove what was.\n"
            f"Enable it: aws dynamodb update-table --table-name {table} --stream-specification "
            f"StreamEnabled=true,StreamViewType=NEW_AND_OLD_IMAGES (and set Meta.stream_view_type = "
            f"NEW_AND_OLD_IMAGES, which create_table() reads), then deploy the handler (count_stream) on it.")
    client = streams_client(model)
    arns: List[str] = []
    start: Dict[str, str] = {"TableName": table} if len(table) >= 3 else {}  # moto's tables may be shorter
    while True:
        page = client.list_streams(**start)
        arns.extend(stream["StreamArn"] for stream in page.get("Streams", [])
                    if stream.get("TableName") == table and stream["StreamArn"] not in arns)
        last = page.get("LastEvaluatedStreamArn")
        if not last:
            break
        start = {**start, "ExclusiveStartStreamArn": last}
    return arns + ([latest] if latest not in arns else [])


def _read_stream(client: Any, arn: str, after: str, keep: Any) -> Iterator[str]:
    """Read every shard of the stream ``arn`` from its start (but those that ended at or before ``after``), giving
    each record to ``keep``; yields the iterator to read on from of each shard still open."""
    for shard in _shards(client, arn):
        ending = shard.get("SequenceNumberRange", {}).get("EndingSequenceNumber")
        if ending is not None and after and padded(ending) <= after:
            continue
        iterator = client.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                             ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        left = _read(client, iterator, keep, ended=ending is not None)
        if left is not None:
            yield left


def _read(client: Any, iterator: Optional[str], keep: Any, ended: bool = False) -> Optional[str]:
    """Read one shard from ``iterator`` to its current end, giving each record to ``keep``; the iterator to read on
    from (an open shard), or ``None`` (a shard that ended). A shard that ``ended`` is read to its last record,
    through the empty pages DynamoDB Streams may return before it: a partition's records before its probe may be
    there (a parent shard's, or a disabled stream's)."""
    while iterator:
        page = client.get_records(ShardIterator=iterator, Limit=1000)
        for record in page.get("Records", []):
            keep(record)
        following: Optional[str] = page.get("NextShardIterator")
        if not page.get("Records") and not ended:
            return following  # the shard's current end
        iterator = following
    return None


def _shards(client: Any, arn: str) -> List[Mapping[str, Any]]:
    """Every shard of the stream ``arn``, parents before their children (as DescribeStream lists them)."""
    shards: List[Mapping[str, Any]] = []
    start: Dict[str, str] = {}
    while True:
        described = client.describe_stream(StreamArn=arn, **start)["StreamDescription"]
        shards.extend(described.get("Shards", []))
        last = described.get("LastEvaluatedShardId")
        if not last:
            return shards
        start = {"ExclusiveStartShardId": last}


def _value(raw: Optional[Mapping[str, Any]]) -> Optional[str]:
    """A stream record's string or number key value, as the probes hold it."""
    if not raw:
        return None
    if STRING in raw:
        return str(raw[STRING])
    if NUMBER in raw:
        return _number(raw[NUMBER])
    return None


def _number(value: Any) -> str:
    """A number key value in one spelling (``7``, ``7.0`` and ``7E0`` are one key)."""
    return str(Decimal(str(value)).normalize())
