"""
What a counter fed from the stream holds at its mark, proven: the I/O an audit adds for relations declared
``counting="stream"``.

:func:`~pynamodb_counters.streams.count_stream` counts a parent's children in stream order and marks the parent
with the last record it counted (``_cstream:<child table>``), in the update that counts it. Records after the
mark wait for the handler: a recount holds them, the counter does not yet. So the audit compares the counter with
what the children were **at the mark**: the recount, less the changes of the records after the mark. To know
which records the recount saw, it writes a **probe** item into the parent's partition of the child table before
counting and deletes it after. The records of one partition key reach the stream in order, so every write the
count saw comes before the probe's removal, and a write between the probe's creation and its removal (one the
count may or may not have seen) shows there: the parent is counted again, as a parent that moved is.

The stream is read for the parents of a chunk at once, from each shard's start (shards that ended before every
mark are passed over), until each probe's removal is seen; records of other partitions are dropped as they are
read. The probe is ``<child hash key: the parent's>``, ``<child range key: _cprobe#<id>>``, with ``_cprobe``
naming the counter; it is written create-only, deleted only if it still holds ``_cprobe``, and the handler skips
its records.
"""
from __future__ import annotations

import threading
import time
import uuid
import weakref
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple, Type, Union

import botocore.config
import botocore.exceptions
from pynamodb.constants import NUMBER, STRING
from pynamodb.exceptions import PynamoDBException
from pynamodb.expressions.operand import Path

from .._keys import ParentKey, key_attributes, serialize_key
from ..declare._attributes import CounterField
from ..declare._expiry_rules import STREAM
from ..declare._relations import Relation
from ..declare._stored_names import PROBE, stream_mark_name
from ..exceptions import ChildValueError, ParentKeyError, TransactionError
from ..streams._counting import record_changes
from ..streams._records import padded
from ..write._send import pynamodb_connection

__all__ = ["PROBE_WAIT", "Probe", "StreamProof", "streams_client"]

PROBE_WAIT = 30.0
"""How long, in seconds, an audit waits for its probes' records to reach the stream (DynamoDB Streams shows a
write within about a second)."""

Waiting = Union[int, str]
"""What the records after a parent's mark change in its counter, or why that is not known (a cause)."""


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
    """The probes, the stream reads and the arithmetic that prove a counter fed from the stream at its mark."""

    def __init__(self, counter: CounterField, feeders: Sequence[Relation]) -> None:
        self.counter = counter
        self.model: Any = counter.model
        self.attribute = str(counter.name)
        streamed = [relation for relation in feeders if relation.counting == STREAM]
        self.children: Dict[str, Tuple[Type[Any], ...]] = {}
        for relation in streamed:
            table = relation.child_model.Meta.table_name
            self.children[table] = self.children.get(table, ()) + (relation.child_model,)
        self.marks = {table: stream_mark_name(table) for table in self.children}
        self.cause = self._unprovable(streamed)
        self._arns: Dict[str, Optional[str]] = {}

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
    def waiting(self, parents: Sequence[Tuple[ParentKey, Mapping[Tuple[str, int], str], Sequence[Probe]]],
                wait: float = PROBE_WAIT) -> Dict[ParentKey, Waiting]:
        """For each parent (its key, its marks by child table and shard, its probes): the sum of the changes the
        records after its marks make in the counter (each shard item's after its own), up to its probe's removal;
        or the cause why it is not known (a record that changes it came between the probe's creation and removal:
        the parent moved during the count).

        :raises TransactionError: a child table has no stream, or the stream cannot be read.
        """
        found: Dict[ParentKey, Waiting] = {key: 0 for key, _, _ in parents}
        for table, models in self.children.items():
            probes = [probe for _, _, made in parents for probe in made if probe.table == table]
            if not probes:
                continue
            oldest = min((mark for _, marks, _ in parents for (named, _), mark in marks.items() if named == table),
                         default="")
            records = self._records(table, {probe.partition for probe in probes},
                                    {probe.range_value for probe in probes}, oldest, wait)
            for key, marks, made in parents:
                for probe in made:
                    held = found[key]
                    if probe.table != table or isinstance(held, str):
                        continue
                    shards = {shard: mark for (named, shard), mark in marks.items() if named == table}
                    change = self._changes(key, shards, probe, records, models)
                    found[key] = change if isinstance(change, str) else held + change
        return found

    def _changes(self, key: ParentKey, marks: Mapping[int, str], probe: Probe,
                 records: Mapping[str, List[Mapping[str, Any]]], models: Tuple[Type[Any], ...]) -> Waiting:
        """What the records of ``probe``'s partition change in ``key``'s counter, each shard item's after its mark
        (``marks``, by shard), or a cause."""
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
        total = 0
        counted = min(marks.values(), default="")  # every shard item counted the records up to here
        for record in partition:
            sequence = padded(record["dynamodb"]["SequenceNumber"])
            if sequence <= counted or sequence >= closed:
                continue
            try:
                changes = record_changes(record, models, probe.table)
            except (ParentKeyError, ChildValueError) as error:
                return f"a record waiting for count_stream cannot be counted ({error})"
            delta = sum(change.delta for change in changes
                        if change.attribute == self.attribute and tuple(change.key) == tuple(key)
                        and change.parent.Meta.table_name == self.model.Meta.table_name
                        and sequence > marks.get(change.shard, ""))
            if delta and sequence > opened:
                return MOVED
            total += delta
        return total

    def _records(self, table: str, partitions: Set[str], probes: Set[str], after: str, wait: float
                 ) -> Dict[str, List[Mapping[str, Any]]]:
        """The records of ``table``'s stream in ``partitions``, by partition, in sequence order: every shard read
        from its start (but those that ended at or before ``after``), until the removal of every probe in
        ``probes`` is seen, or ``wait`` seconds have passed."""
        client, arn = self._client(table), self._arn(table)
        child = self.children[table][0]
        hash_name, range_name = (attribute.attr_name for attribute in key_attributes(child)[:2])
        kept: Dict[str, List[Mapping[str, Any]]] = {}
        removed: Set[str] = set()
        open_shards: List[str] = []
        try:
            for shard in _shards(client, arn):
                ending = shard.get("SequenceNumberRange", {}).get("EndingSequenceNumber")
                if ending is not None and after and padded(ending) <= after:
                    continue
                iterator = client.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                                     ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
                left = self._read(client, iterator, hash_name, range_name, partitions, probes, kept, removed,
                                  ended=ending is not None)
                if left is not None:
                    open_shards.append(left)
            deadline, pause = time.monotonic() + wait, 0.05
            while open_shards and not probes <= removed and time.monotonic() < deadline:
                time.sleep(pause)  # DynamoDB shows a write in its stream within about a second
                pause = min(pause * 2, 1.0)
                open_shards = [left for left in (self._read(client, iterator, hash_name, range_name, partitions,
                                                            probes, kept, removed) for iterator in open_shards)
                               if left is not None]
        except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as error:
            raise TransactionError(f"the stream of {table} cannot be read to audit {self.model.__name__}."
                                   f"{self.attribute} ({error}): the audit of a counter fed from the stream reads "
                                   f"it (dynamodb:DescribeStream, GetShardIterator, GetRecords)", error) from error
        for records in kept.values():
            records.sort(key=lambda record: padded(record["dynamodb"]["SequenceNumber"]))
        return kept

    @staticmethod
    def _read(client: Any, iterator: Optional[str], hash_name: str, range_name: str, partitions: Set[str],
              probes: Set[str], kept: Dict[str, List[Mapping[str, Any]]], removed: Set[str], ended: bool = False
              ) -> Optional[str]:
        """Read one shard from ``iterator`` to its current end, keeping the records of ``partitions``; the
        iterator to read on from (an open shard), or ``None`` (a shard that ended). A shard that ``ended`` is read
        to its last record, through the empty pages DynamoDB Streams may return before it: a partition's records
        before its probe may be there (a parent shard's)."""
        while iterator:
            page = client.get_records(ShardIterator=iterator, Limit=1000)
            for record in page.get("Records", []):
                keys = record.get("dynamodb", {}).get("Keys", {})
                partition = _value(keys.get(hash_name))
                if partition not in partitions:
                    continue
                kept.setdefault(partition, []).append(record)
                probe = (keys.get(range_name) or {}).get(STRING)
                if probe in probes and record.get("eventName") == "REMOVE":
                    removed.add(probe)
            following: Optional[str] = page.get("NextShardIterator")
            if not page.get("Records") and not ended:
                return following  # the shard's current end
            iterator = following
        return None

    def _client(self, table: str) -> Any:
        return streams_client(self.children[table][0])

    def _arn(self, table: str) -> str:
        """The child table's latest stream.

        :raises TransactionError: the table has no stream.
        """
        if table not in self._arns:
            described = self.children[table][0]._get_connection().describe_table()
            self._arns[table] = described.get("LatestStreamArn") if described.get("StreamSpecification", {}).get(
                "StreamEnabled", True) else None
        arn: Optional[str] = self._arns[table]
        if not arn:
            raise TransactionError(f"{table} has no stream: {self.model.__name__}.{self.attribute} is fed from it "
                                   f"and cannot be audited without it")
        return arn


MOVED = "moved"
"""What :meth:`StreamProof._changes` gives for a parent written during its count."""


_clients: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_clients_lock = threading.Lock()


def streams_client(model: Type[Any]) -> Any:
    """A DynamoDB Streams client with ``model``'s connection settings (its region, credentials, timeouts and
    ``Meta.host``), made once per PynamoDB connection."""
    connection = pynamodb_connection(model)
    with _clients_lock:
        client = _clients.get(connection)
        if client is None:
            config = botocore.config.Config(connect_timeout=connection._connect_timeout_seconds,
                                            read_timeout=connection._read_timeout_seconds,
                                            retries={"mode": "standard"})
            client = _clients[connection] = connection.session.create_client(
                "dynamodbstreams", connection.region, endpoint_url=connection.host, config=config)
        return client


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


