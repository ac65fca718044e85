"""
The reads and writes of one audited counter: its parents, their children, and the conditional repair.

An :class:`Auditor` observes a parent (its counter, its counted-write sequence and the relations recorded as
feeding it: one strongly consistent GetItem, or a BatchGetItem of its shard items), visits the parents of one
segment of a Scan, counts the children of each relation feeding the counter, checks an observation (observing
the parent again, and recounting while its sequence moves), and repairs a :class:`~pynamodb_counters.Drift`
with one conditional write. It charges every read to the audit's cost model. The loops over parents (explicit
keys, a parallel Scan, a list of drifts) and what they report are :mod:`pynamodb_counters.reconcile`'s.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from typing import Any, Dict, FrozenSet, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from pynamodb.constants import COUNT
from pynamodb.exceptions import PynamoDBException, UpdateError

from .._costs import read_units
from .._keys import ParentKey, key_attributes, serialize_key
from ..declare._attributes import CounterField
from ..declare._relations import Relation
from ..declare._spec import identity_of, shard_count
from ..declare._stored_names import FEEDER_SEPARATOR, FEEDERS, MARKER, OUTSIDE, SEQUENCE, SHARD_COUNT
from ..exceptions import TransactionError
from ..signals import counter_repaired, send_safely
from ..write._conditions import parent_condition, sequence_is
from ..write._fetches import read_shards, scan_parents
from ..write._items import ShardItems, StoredNumber, count_of, counter_shards, stored_number
from ..write._set_counter import write_total
from ._audit_rules import (
    Uncountable,
    audited,
    counted_child,
    expired,
    loaded_feeders,
    shares_partitions,
    sum_stored,
)
from ._reports import Drift, Repair, Unverifiable
from ._stream_proof import MOVED, Probe, StreamProof

__all__ = ["MOVING", "Auditor", "Budget", "Observation"]

MOVING = "it changed during every count (live writes): audit it again"
"""The :attr:`~pynamodb_counters.Unverifiable.cause` of a parent that never held still around a count."""

PROBE_FAILED = "its probe could not be written ({error}): an audit of a counter fed from the stream writes one"
"""The :attr:`~pynamodb_counters.Unverifiable.cause` of a parent of a counter fed from the stream whose probe
(``reconcile._stream_proof``) could not be written: nothing was."""

OUTSIDE_PARTITION = ("{relation} counted children into it from outside its partition (from the stream, with a marker "
                     "each): a Query of its partition under prefix= cannot count them. Audit such children with "
                     "children=... (a Query of a global secondary index, say), or keep them in their parent's "
                     "partition")
"""The :attr:`~pynamodb_counters.Unverifiable.cause` of a parent whose feeder records show children counted into it
from outside its partition, by a relation an audit counts under its ``prefix=``."""


@dataclass(frozen=True)
class Observation:
    """One parent as read: whether it exists, its counter (summed over its shards), its counted-write sequence, the
    relations recorded as feeding it, and whether a Scan saw it alone in its partition (then its children under a
    ``prefix=`` are its own, and are counted without being read)."""

    key: ParentKey
    exists: bool
    stored: Optional[StoredNumber]
    sequence: Optional[int]
    feeders: FrozenSet[str] = frozenset()
    alone: bool = False
    marks: Mapping[Tuple[str, int], str] = field(default_factory=dict, hash=False)
    """Where its counter is fed from the stream, the last record each relation counted into each of its shard
    items (``_cstream:<feeder entry>``; ``""`` where none), by mark name and shard: what a count is compared at."""


class Budget:
    """A shared count of parents a limited Scan may still visit."""

    def __init__(self, limit: Optional[int]) -> None:
        self.left = limit
        self.lock = threading.Lock()

    def take(self) -> bool:
        """Whether one more parent may be visited (and count it)."""
        if self.left is None:
            return True
        with self.lock:
            if self.left <= 0:
                return False
            self.left -= 1
            return True


class Auditor:
    """Reads one counter, its parents and their children; all the I/O of audits and repairs."""

    def __init__(self, target: Union[CounterField, Relation], item_bytes: int) -> None:
        counter, self.feeders = audited(target)
        model: Any = counter.model
        self.counter, self.model, self.attribute = counter, model, str(counter.name)
        self.loaded = loaded_feeders(counter)
        self.entry = f"{counter.attr_name}{FEEDER_SEPARATOR}"
        # a rollup's bucket past its TTL is no longer counted into (DynamoDB deletes it within days): not drift;
        # any other parent past its TTL still takes counted writes until it is deleted, and is audited as usual
        self.rollup = any(relation.create_parent for relation in self.feeders)
        self.proof = StreamProof(counter, self.feeders)
        self.item_bytes = item_bytes
        self.units = 0.0
        self.estimated = False
        self._lock = threading.Lock()

    # -- reading ---------------------------------------------------------------------------------------------
    def _charge(self, response: Dict[str, Any], estimate_bytes: int) -> None:
        capacity = response.get("ConsumedCapacity")
        if isinstance(capacity, list):
            units = sum(float(c.get("CapacityUnits", 0.0)) for c in capacity) if capacity else None
        else:
            units = float(capacity["CapacityUnits"]) if isinstance(capacity, dict) else None
        with self._lock:
            if units is None:
                self.estimated = True
                units = read_units(estimate_bytes)
            self.units += units

    def observe(self, key: ParentKey) -> Observation:
        """The parent's counter and sequence, strongly consistent: one GetItem, or, on a sharded counter, one
        BatchGetItem of its shard items, whose counters and sequences are summed."""
        return self._from_items(key, self.read(key))

    def observe_all(self, keys: Sequence[ParentKey]) -> Dict[ParentKey, Observation]:
        """Each parent's counter and sequence, strongly consistent: BatchGetItems of their items (and shard items),
        100 keys a request."""
        def charge(page: Dict[str, Any]) -> None:
            self._charge(page, self.item_bytes * sum(map(len, page.get("Responses", {}).values())))

        found = read_shards(self.model, list(keys), self.counter.shards, consistent_read=True, charge=charge)
        return {key: self._from_items(key, items) for key, items in found.items()}

    def _from_items(self, key: ParentKey, items: ShardItems) -> Observation:
        if not items[0] or MARKER in items[0] or (self.rollup and expired(self.model, items[0])):
            return Observation(key, False, None, None)  # no parent: an expiry marker, a rollup past its TTL
        shards = [item for _, item in counter_shards(self.counter, items)]
        counts = [stored_number(item, self.counter.attr_name) for item in shards]
        sequences = [count_of(item, SEQUENCE.attr_name) for item in shards]
        sequence = sum_stored(sequences)
        feeders = frozenset(entry[len(self.entry):] for item in items
                           for entry in ((item or {}).get(FEEDERS.attr_name) or {}).get("SS", ())
                           if entry.startswith(self.entry))
        marks = {(name, index): str(((item or {}).get(name) or {}).get("S", ""))
                 for name in self.proof.mark_names for index, item in counter_shards(self.counter, items)}
        return Observation(key, True, sum_stored(counts), None if sequence is None else int(sequence), feeders,
                           marks=marks)

    def unverifiable(self, observation: Observation) -> Optional[Unverifiable]:
        """The parent as unverifiable when it records feeders that are not loaded here, or its counter is fed from
        the stream in a way an audit cannot prove, else ``None``."""
        if self.proof and self.proof.cause:
            return Unverifiable(self.model, observation.key, self.attribute, observation.stored,
                                cause=self.proof.cause)
        outside = sorted(feeder[len(OUTSIDE):] for feeder in observation.feeders if feeder.startswith(OUTSIDE))
        counted_here = [self.loaded[feeder] for feeder in outside if feeder in self.loaded
                        and self.loaded[feeder].prefix is not None]
        if counted_here:
            return Unverifiable(self.model, observation.key, self.attribute, observation.stored,
                                cause=OUTSIDE_PARTITION.format(relation=counted_here[0]))
        unloaded = observation.feeders - self.loaded.keys() - {OUTSIDE + feeder for feeder in outside
                                                               if feeder in self.loaded}
        if not unloaded:
            return None
        return Unverifiable(self.model, observation.key, self.attribute, observation.stored, tuple(sorted(unloaded)))

    def read(self, key: ParentKey, parent: Optional[Dict[str, Any]] = None, known: bool = False) -> ShardItems:
        """The parent's shard items, strongly consistent: the parent item alone (one GetItem) on a model without
        sharded counters and no shards left to fold, else one BatchGetItem. With ``known``, ``parent`` is the
        parent item just read (by a Scan), and is not read again."""
        if shard_count(self.model) == 1:
            if not known:
                hash_key, range_key = serialize_key(self.model, key)
                response = self.model._get_connection().get_item(hash_key, range_key=range_key,
                                                                 consistent_read=True)
                self._charge(response, self.item_bytes)
                parent, known = response.get("Item"), True
            if (count_of(parent, SHARD_COUNT.attr_name) or 1) == 1:
                return [parent]

        def charge(page: Dict[str, Any]) -> None:
            self._charge(page, self.item_bytes * sum(map(len, page.get("Responses", {}).values())))

        return read_shards(self.model, [key], self.counter.shards, consistent_read=True, charge=charge,
                           parents={key: parent} if known else None)[key]

    def scan(self, segment: int, segments: int, key_prefix: Optional[str], budget: Budget
             ) -> Iterator[Observation]:
        """The parents in one segment of a strongly consistent Scan."""
        def charge(page: Dict[str, Any], scanned: int) -> None:
            self._charge(page, self.item_bytes * scanned)

        partition: List[Observation] = []  # a Scan returns each partition's items together
        for key, item in scan_parents(self.model, self.feeders, key_prefix, segment, segments, charge):
            if partition and partition[0].key[0] != key[0]:
                yield from self._seen(partition)
                partition = []
            if not budget.take():
                yield from partition  # cut short by the limit: its other parents were not seen
                return
            partition.append(self._from_items(key, self.read(key, item, known=True)))
        yield from self._seen(partition)

    @staticmethod
    def _seen(partition: List[Observation]) -> List[Observation]:
        """The parents of one partition, each marked alone when it is the only one."""
        return [replace(partition[0], alone=True)] if len(partition) == 1 else partition

    def count(self, key: ParentKey, alone: bool = False) -> int:
        """The children of one parent, across every relation feeding the counter; with ``alone``, the parent is
        known to be the only one of its partition.

        :raises Uncountable: a child cannot be loaded or counted, or names another parent of the partition.
        """
        total = 0
        for relation in self.feeders:
            if relation.children is not None:
                counted = int(relation.children(key))
                self._charge({}, self.item_bytes * counted)  # the caller's reads: the cost model's guess
                total += counted
                continue
            total += self._count_prefix(relation, key, alone)
        return total

    def _count_prefix(self, relation: Relation, key: ParentKey, alone: bool) -> int:
        """The children of one parent under ``relation``'s prefix: a strongly consistent Query of its partition,
        which counts them (``Select=COUNT``), or reads them where each child must be loaded (``when=``,
        ``amount=``) or shown to name this parent: where parents may share a partition (their model has a range
        key) and the parent is not known to be ``alone`` in its own.

        :raises Uncountable: a child cannot be loaded or counted, or names another parent of the partition.
        """
        child = relation.child_model
        child_hash, range_attribute = key_attributes(child)[0], key_attributes(child)[-1]
        assert relation.prefix is not None
        hash_value = child_hash.serialize(key[0])
        connection = child._get_connection()
        counted = identity_of(child).condition  # the items of its model alone
        named = key if shares_partitions(relation) and not alone else None
        read = relation.conditional or named is not None
        count, start = 0, None
        while True:  # the same read capacity either way: a Query is billed for the items it reads
            page = connection.query(hash_value, range_key_condition=range_attribute.startswith(relation.prefix),
                                    filter_condition=counted, consistent_read=True,
                                    select=None if read else COUNT, exclusive_start_key=start,
                                    return_consumed_capacity="TOTAL")
            self._charge(page, self.item_bytes * int(page.get("ScannedCount", 0)))
            if read:
                count += sum(counted_child(relation, item, named) for item in page.get("Items", []))
            else:
                count += int(page.get("Count", 0))
            start = page.get("LastEvaluatedKey")
            if not start:
                return count

    def check_all(self, observations: Sequence[Observation], rounds: int = 3
                  ) -> List[Union[Drift, Unverifiable, None]]:
        """:meth:`check` for several parents, their second reads in one BatchGetItem (per 100): each parent's
        children are counted, then every parent counted is observed again at once, and each that held still
        around its count is judged. One that moved is checked again alone, with one round fewer."""
        findings: Dict[ParentKey, Union[Drift, Unverifiable, None]] = {}
        counted: Dict[ParentKey, Tuple[Observation, int, List[Probe]]] = {}
        for before in observations:
            refused = self.unverifiable(before)
            if refused is None:
                try:
                    counted[before.key] = (before, *self._probed_count(before))
                    continue
                except Uncountable as error:
                    refused = Unverifiable(self.model, before.key, self.attribute, before.stored, cause=str(error))
            findings[before.key] = refused
        after = self.observe_all(list(counted)) if counted else {}
        waiting = self._waiting(list(counted.values()))
        for key, (before, actual, _) in counted.items():
            findings[key] = self._judge(before, actual, after[key], rounds, waiting.get(key, 0))
        return [findings[observation.key] for observation in observations]

    def _probed_count(self, before: Observation) -> Tuple[int, List[Probe]]:
        """:meth:`count` the parent's children; where its counter is fed from the stream, between the creation and
        the removal of its probes (which it returns).

        :raises Uncountable: a child cannot be counted, or a probe cannot be written.
        """
        if not self.proof:
            return self.count(before.key, before.alone), []
        try:
            probes = self.proof.probe(before.key)
        except PynamoDBException as error:
            raise Uncountable(PROBE_FAILED.format(error=error)) from error
        try:
            return self.count(before.key, before.alone), probes
        finally:
            self.proof.withdraw(probes)

    def _waiting(self, counted: Sequence[Tuple[Observation, int, List[Probe]]]) -> Dict[ParentKey, Union[int, str]]:
        """What the records after each probed parent's marks change in its counter (or why it is not known)."""
        probed = [(before.key, before.marks, probes) for before, _, probes in counted if probes]
        return self.proof.waiting(probed) if probed else {}

    def check(self, observation: Observation, rounds: int = 3) -> Union[Drift, Unverifiable, None]:
        """The drift of one observed parent, ``None`` when it is exact, or :class:`Unverifiable` when its children
        cannot all be counted (a feeder that is not loaded, a child that cannot be counted) or it never held
        still.

        "Exact" needs the same proof as a drift: the children are counted between two observations of the parent,
        and only a count the parent held still around (its counter and counted-write sequence the same before
        and after) is compared with the counter. When the parent moved, it is counted again, at most ``rounds``
        times; a parent that moved during every count is :class:`Unverifiable` (``cause`` says so), never
        exact and never drift.
        """
        refused = self.unverifiable(observation)
        if refused is not None:
            return refused
        try:
            actual, probes = self._probed_count(observation)
        except Uncountable as error:
            return Unverifiable(self.model, observation.key, self.attribute, observation.stored, cause=str(error))
        after = self.observe(observation.key)
        waiting = self._waiting([(observation, actual, probes)])
        return self._judge(observation, actual, after, rounds, waiting.get(observation.key, 0))

    def _judge(self, before: Observation, actual: int, after: Observation, rounds: int,
               waiting: Union[int, str] = 0) -> Union[Drift, Unverifiable, None]:
        """The finding of a count made between the observations ``before`` and ``after``: drift or exact when the
        parent held still around it, else counted again from ``after`` (``rounds`` counts in all). ``waiting``:
        for a counter fed from the stream, what the records after the parent's marks change in it (the count at
        the marks is ``actual`` less that), or why that is not known."""
        if not after.exists:
            return None  # deleted meanwhile: nothing to repair
        if isinstance(waiting, str) and waiting != MOVED:
            return Unverifiable(self.model, before.key, self.attribute, before.stored, cause=waiting)
        if waiting != MOVED and (after.sequence, after.stored) == (before.sequence, before.stored):
            actual -= int(waiting)
            if before.stored == actual:
                return None
            return Drift(self.model, before.key, self.attribute, before.stored, actual, before.sequence)
        if rounds <= 1:
            return Unverifiable(self.model, after.key, self.attribute, after.stored, cause=MOVING)
        return self.check(after, rounds - 1)

    # -- writing ---------------------------------------------------------------------------------------------
    def repair(self, drift: Drift, max_attempts: int) -> Repair:
        """Apply one drift's difference conditionally, recounting when live writes moved the parent, and refusing
        a parent fed by relations that are not loaded. Each attempt reads the parent first: the drift may come
        from an older audit, or another process."""
        stored, sequence, actual = drift.stored, drift.sequence, drift.actual
        stale = False  # whether the last attempt's condition failed: count again
        for attempt in range(1, max_attempts + 1):
            seen = self.observe(drift.key)
            if not seen.exists:
                return Repair(drift, "failed", stored, actual, attempt, "the parent no longer exists")
            refused = self.unverifiable(seen)
            if refused is not None:
                return Repair(drift, "refused", seen.stored, actual, attempt, refused.reason)
            if stale or (seen.stored, seen.sequence) != (stored, sequence):  # moved since observed: count again
                fresh = self.check(seen)
                if fresh is None:
                    return Repair(drift, "exact", seen.stored, int(seen.stored or 0), attempt)
                if isinstance(fresh, Unverifiable) and fresh.cause == MOVING:
                    continue  # it moved during every count: the next attempt observes it again
                if isinstance(fresh, Unverifiable):
                    return Repair(drift, "refused", fresh.stored, actual, attempt, fresh.reason)
                stored, sequence, actual = fresh.stored, fresh.sequence, fresh.actual
            stale = True
            if self._apply(drift.key, stored, sequence, actual):
                send_safely(counter_repaired, self.model, key=drift.key, attribute=self.attribute, before=stored,
                            after=actual, drift=drift)
                return Repair(drift, "repaired", stored, actual, attempt)
        return Repair(drift, "failed", stored, actual, max_attempts,
                      f"the parent kept changing through {max_attempts} attempts; run the repair again")

    def _apply(self, key: ParentKey, stored: Optional[StoredNumber], sequence: Optional[int], actual: int) -> bool:
        """Set the counter to ``actual`` if it still holds ``stored`` at ``sequence``; ``False`` when the parent
        moved (or a transaction writing it right now conflicted). An unsharded counter takes one conditional
        UpdateItem adding the difference; a sharded one, a TransactWriteItems conditioned on every shard."""
        items = self.read(key) if shard_count(self.model) > 1 else []
        if len(counter_shards(self.counter, items)) > 1:  # counts on several items: condition them all
            seen = self._from_items(key, items)
            return seen.exists and (seen.stored, seen.sequence) == (stored, sequence) and \
                write_total(self.counter, key, items, actual)
        condition = parent_condition(self.model)
        condition &= sequence_is(sequence)
        condition &= self.counter.does_not_exist() if stored is None else self.counter == stored
        change = self.counter.add(actual - stored) if isinstance(stored, int) else self.counter.set(actual)
        hash_key, range_key = serialize_key(self.model, key)
        try:
            self.model._get_connection().update_item(hash_key, range_key=range_key,
                                                     actions=[change, SEQUENCE.add(1)], condition=condition)
        except UpdateError as error:
            if error.cause_response_code not in ("ConditionalCheckFailedException", "TransactionConflictException"):
                raise TransactionError(f"DynamoDB rejected the repair of {key!r}: {error}", error) from error
            return False
        return True
