"""
Stream records counted with a marker each (``write._markers``), for both handlers: the deletions by TTL that
:func:`~pynamodb_counters.streams.count_expiries` takes off, and the records that
:func:`~pynamodb_counters.streams.count_stream` counts into parents outside the child's partition.

:func:`commit_marked` commits them in stream order, in as few TransactWriteItems as DynamoDB's limit on actions
allows: each record is its marker and an Update of each parent item it names that the transaction does not name
yet, each parent's changes merged into one ``ADD``. The commit's recoveries run them
(``write._recoveries.MARKER_RECOVERIES``): a record whose marker is stored (counted before: a batch delivered
again) is left out and the rest sent again; a counter that stream records would take below zero is floored; a
parent gone is left out. A transaction that fails stops the batch at its first record not left out.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Iterable, List, Optional, Sequence, Set, Tuple

from pynamodb.exceptions import PynamoDBException

from .._keys import ItemId, item_id
from .._write_results import CounterChange
from ..declare._shards import shard_key
from ..exceptions import CounterError
from ..write._commit import Committed, Rejected, commit_in_part, policy_for
from ..write._plan import MAX_ACTIONS
from ..write._recoveries import MARKER_RECOVERIES
from ..write._send import RetryPolicy
from ..write._writes import Write

__all__ = ["Marked", "MarkedOutcome", "commit_marked", "marked"]


@dataclass(frozen=True)
class Marked:
    """One stream record to count with its marker: its record, its write, and the parent items it names."""

    event: str
    sequence: str
    write: Write
    items: Tuple[ItemId, ...]


def marked(event: str, sequence: str, write: Write, changes: Iterable[CounterChange]) -> Marked:
    """Stream record ``event`` (``sequence``), counted by ``write`` with its marker, making ``changes``."""
    items = [item_id(change.parent, shard_key(change.key, change.shard)) for change in changes]
    return Marked(event, sequence, write, tuple(dict.fromkeys(items)))


@dataclass
class MarkedOutcome:
    """What :func:`commit_marked` did.

    :ivar committed: each transaction committed, with the records of its chunk (by position: its plan's decisions
      are ``None`` for those left out).
    :ivar found: the records whose marker was stored already (counted before), left out.
    :ivar stop: the first record not applied, its sequence number and why; ``None`` where all were.
    """

    committed: List[Tuple[List[Marked], Committed]] = field(default_factory=list)
    found: List[Marked] = field(default_factory=list)
    stop: Optional[Tuple[str, str, BaseException]] = None


def commit_marked(records: Sequence[Marked], retry: Optional[RetryPolicy]) -> MarkedOutcome:
    """Commit ``records`` (in stream order, each once), chunk by chunk, stopping at the first chunk refused.

    :param retry: the retry policy of each transaction (else the first model's ``Meta.counter_retry``).
    """
    outcome = MarkedOutcome()
    for chunk in _chunks(records):
        left: Set[int] = set()

        def found(position: int, error: CounterError, chunk: List[Marked] = chunk, left: Set[int] = left) -> None:
            left.add(position)  # its marker is stored: a batch delivered again (``_recoveries.TakenOffAlready``)
            outcome.found.append(chunk[position])

        writes = [record.write for record in chunk]
        try:
            done = commit_in_part(writes, str(uuid.uuid4()), policy_for(writes, retry), MARKER_RECOVERIES,
                                  on_left_out=found)
            if isinstance(done, Rejected):
                done.raise_error()
        except (CounterError, PynamoDBException) as refused:
            first = next(record for position, record in enumerate(chunk) if position not in left)
            outcome.stop = (first.event, first.sequence, refused)
            break
        if done is not None:  # committed; None: every record of the chunk was counted already
            outcome.committed.append((chunk, done))
    return outcome


def _chunks(records: Sequence[Marked]) -> Iterable[List[Marked]]:
    """The records in stream order, in as few transactions as DynamoDB's limit on actions allows: each record is
    its marker and an Update of each parent item it names that the transaction does not name yet."""
    chunk: List[Marked] = []
    named: Set[ItemId] = set()
    for record in records:
        more = 1 + len(set(record.items) - named)
        if chunk and len(chunk) + len(named) + more > MAX_ACTIONS:
            yield chunk
            chunk, named = [], set()
        chunk.append(record)
        named.update(record.items)
    if chunk:
        yield chunk
