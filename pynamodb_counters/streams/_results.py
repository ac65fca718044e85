"""
What the stream handlers did: each record counted, each left alone and why (:class:`Skipped`), the counter
changes made, and their cost; as a dict, the partial batch response Lambda reads.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Dict, Mapping, Optional, Sequence

from .._write_results import CounterChange

__all__ = ["ExpiryResult", "SkipReason", "Skipped", "StreamResult"]


class SkipReason(str, Enum):
    """Why a stream record was left alone (:attr:`Skipped.reason`), by :func:`count_expiries` or
    :func:`count_stream`; each equals its text."""

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
    """The item is one of the library's markers (an expiry's, or a stream record's counted outside its parent's
    partition), written by a handler or removed by its own TTL. (The text predates stream records' markers, and
    stays as it is.)"""
    A_PROBE = "an audit's probe"
    """The item is a probe an audit of a counter fed from the stream wrote and deleted (``_cprobe``)."""
    REPEATED = "delivered twice in this batch"
    """The same record (``eventID``) appears earlier in the batch: it is taken off once."""
    TAKEN_OFF = "taken off already (its marker is stored: a batch delivered again)"
    """The record was taken off before (its marker is stored): a batch delivered again."""
    NOT_STREAMED = "changes no counter counted from the stream"
    """:func:`count_stream`: the child counts the same in every relation declared ``counting="stream"`` before and
    after the write (an edit of other attributes, ``when=`` false throughout), or has none."""
    COUNTED_ALREADY = "counted already (its parents' marks hold it: a batch delivered again)"
    """:func:`count_stream`: every parent the record changes holds the record in its mark, or, outside the child's
    partition, its marker is stored: it was counted by an earlier delivery."""
    PARENT_MISSING = "its parent does not exist"
    """:func:`count_stream`: every parent the record would change does not exist (and is not a rollup its first
    count creates): the record never blocks the stream, and the result lists the changes left out."""


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

    def __repr__(self) -> str:
        """What was taken off, skipped (by reason) and left out, and the failure Lambda is told of."""
        failure = self["batchItemFailures"][0]["itemIdentifier"] if self["batchItemFailures"] else None
        error = "" if self.error is None else f", error={type(self.error).__name__}"
        return (f"ExpiryResult(counted={len(self.counted)}, skipped={_reasons(self.skipped)}, gone={len(self.gone)}, "
                f"failure={failure!r}{error})")


def _reasons(skipped: Sequence[Skipped]) -> str:
    """How many records were skipped for each reason: ``{UNKNOWN: 2, REPEATED: 1}``."""
    counts: Dict[str, int] = {}
    for record in skipped:
        counts[record.reason.name] = counts.get(record.reason.name, 0) + 1
    return "{" + ", ".join(f"{name}: {count}" for name, count in counts.items()) + "}"


class StreamResult(Dict[str, Any]):
    """What :func:`count_stream` did. As a dict it is the partial batch response Lambda reads:
    ``{"batchItemFailures": [{"itemIdentifier": <SequenceNumber>}]}``, naming the first record not applied
    (empty when all were): Lambda delivers the batch again from it, and what was counted of the records after it
    is not counted again.

    :ivar counted: the ``eventID`` of each record counted by this call (at least one of its changes applied).
    :ivar skipped: each record left alone, with why (:class:`Skipped`).
    :ivar changes: the counter changes applied, as one update of each parent item merges them (a parent's
      changes by several records of the batch add up in one change per counter).
    :ivar missing: the changes left out because their parent does not exist.
    :ivar floored: the decrements left out because the counter held less (it had drifted: an audit finds it);
      what the counter held was taken off, never more.
    :ivar updates: how many parent updates were sent (one UpdateItem per parent item of the batch, more where a
      delivery found part of its records counted already), and committed in the transactions of the records
      counted with markers (one Update per parent item and transaction).
    :ivar write_units: their write capacity by the library's cost model (:mod:`pynamodb_counters` ``write_units``:
      one unit per KB of each item updated, rounded up), refused updates included. The handler reads nothing: a
      refused update returns the item it found. Records counted with markers add each committed transaction's:
      twice the units of each item it writes (its markers, by their size; each parent's Update, whose item a
      transaction does not return, as an item of up to 1 KB: 2 units).
    :ivar consumed_capacity: DynamoDB's ``ConsumedCapacity`` of each update and transaction applied, where the
      server reports it.
    :ivar expiries: what :func:`count_expiries` did with the same records, for the models' relations declared
      ``expiries="stream"`` (``None`` where there are none).
    :ivar error: why the first record not applied was not, or ``None``.
    """

    def __init__(self, failure: Optional[str], counted: Sequence[str], skipped: Sequence[Skipped],
                 changes: Sequence[CounterChange], missing: Sequence[CounterChange],
                 floored: Sequence[CounterChange], updates: int, write_units: float,
                 consumed_capacity: Sequence[Mapping[str, Any]], expiries: Optional[ExpiryResult],
                 error: Optional[BaseException]) -> None:
        super().__init__(batchItemFailures=[] if failure is None else [{"itemIdentifier": failure}])
        self.counted = tuple(counted)
        self.skipped = tuple(skipped)
        self.changes = tuple(changes)
        self.missing = tuple(missing)
        self.floored = tuple(floored)
        self.updates = updates
        self.write_units = write_units
        self.consumed_capacity = tuple(consumed_capacity)
        self.expiries = expiries
        self.error = error

    def __repr__(self) -> str:
        """What was counted, skipped (by reason), left out and floored, and the failure Lambda is told of:
        ``StreamResult(counted=3, skipped={UNKNOWN: 2}, missing=0, floored=0, updates=2, failure=None)``."""
        failure = self["batchItemFailures"][0]["itemIdentifier"] if self["batchItemFailures"] else None
        error = "" if self.error is None else f", error={type(self.error).__name__}"
        return (f"StreamResult(counted={len(self.counted)}, skipped={_reasons(self.skipped)}, "
                f"missing={len(self.missing)}, floored={len(self.floored)}, updates={self.updates}, "
                f"failure={failure!r}{error})")
