"""
What audits and repairs report: data, never logs. Imported from :mod:`pynamodb_counters`.
"""
from __future__ import annotations

import base64
import warnings
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Dict, List, Optional, Tuple, Type

from pynamodb.constants import BINARY, NUMBER
from pynamodb.models import Model

from .._keys import ParentKey, key_attributes
from ..write._items import StoredNumber

__all__ = ["AuditReport", "Drift", "FeederChange", "FeederEntry", "FeederReport", "Repair", "RepairReport",
           "Unverifiable", "json_key", "json_stored"]


def json_key(model: Type[Model], key: ParentKey) -> List[Any]:
    """``key`` as a JSON-ready list, each value as ``--parent`` takes it back: a string as is, a number as a
    number, bytes in base64, any other value (a date) as its attribute serializes it for DynamoDB."""
    values: List[Any] = []
    for attribute, value in zip(key_attributes(model), key):
        if isinstance(value, (str, bool)) or value is None:
            values.append(value)
        elif attribute.attr_type == NUMBER and isinstance(value, (int, float)):
            values.append(value)
        elif attribute.attr_type == NUMBER:
            values.append(str(value))  # a Decimal: exactly, as a string
        elif attribute.attr_type == BINARY and isinstance(value, (bytes, bytearray)):
            values.append(base64.b64encode(bytes(value)).decode("ascii"))
        else:
            values.append(str(attribute.serialize(value)))
    return values


def json_stored(value: Optional[StoredNumber]) -> Any:
    """A stored counter for JSON: a number, or the exact number as a string when it is not whole."""
    return str(value) if isinstance(value, Decimal) else value


@dataclass(frozen=True)
class Drift:
    """One counter that differs from the number of its parent's children.

    :ivar model: the parent model.
    :ivar key: the parent's key, ``(hash,)`` or ``(hash, range)``.
    :ivar attribute: the counter's Python attribute name.
    :ivar stored: the value stored, or ``None`` when the item lacks the attribute: an ``int``, or a
      :class:`~decimal.Decimal` when the stored number is not whole (in :meth:`as_dict`, a string such as
      ``"3.5"``).
    :ivar actual: the number of children counted; for a counter fed from the stream, as they were at the last
      record the handler counted into it (the count less the changes of the records still waiting).
    :ivar sequence: the parent's counted-write sequence when observed (``None`` if never counted); a repair
      conditions on it.
    """

    model: Type[Model]
    key: ParentKey
    attribute: str
    stored: Optional[StoredNumber]
    actual: int
    sequence: Optional[int] = None

    def as_dict(self) -> Dict[str, Any]:
        """A JSON-ready record: model, key (a list, each value as the CLI's ``--parent`` takes it back), attribute,
        stored, actual."""
        return {"model": self.model.__name__, "key": json_key(self.model, self.key), "attribute": self.attribute,
                "stored": json_stored(self.stored), "actual": self.actual}


@dataclass(frozen=True)
class Unverifiable:
    """A parent whose children cannot be counted exactly here, so it is neither reported as drift nor repaired:
    its counter was fed by relations this process has not loaded (:attr:`unloaded`), or :attr:`cause` says what
    else stood in the way (it changed during every count, a child holds a value its relation cannot count, a
    ``prefix=`` relation sends the children of its partition to several parents).

    :ivar unloaded: the feeder ids the parent records that name no loaded relation (``prefix=REACTION#``, or
      ``app.reactions:Reaction.post`` as earlier releases recorded them); import the modules declaring them (the
      command's ``--import``), or forget the entries of relations removed from the code
      (:func:`~pynamodb_counters.migrate_feeders`). Empty when :attr:`cause` says why.
    :ivar cause: why its children cannot be counted, when it is not a feeder that is not loaded; empty otherwise.
    """

    model: Type[Model]
    key: ParentKey
    attribute: str
    stored: Optional[StoredNumber]
    unloaded: Tuple[str, ...] = ()
    cause: str = ""

    @property
    def reason(self) -> str:
        """``unverifiable: fed by prefix=REACTION#, which is not loaded``, or ``unverifiable: <cause>``."""
        if self.cause:
            return f"unverifiable: {self.cause}"
        which = "which are" if len(self.unloaded) > 1 else "which is"
        return f"unverifiable: fed by {', '.join(self.unloaded)}, {which} not loaded"

    def as_dict(self) -> Dict[str, Any]:
        """A JSON-ready record: model, key, attribute, unloaded, reason."""
        return {"model": self.model.__name__, "key": json_key(self.model, self.key), "attribute": self.attribute,
                "unloaded": list(self.unloaded), "reason": self.reason}


@dataclass(frozen=True)
class AuditReport:
    """What an audit found.

    :ivar drifts: one :class:`Drift` per drifted counter.
    :ivar parents_checked: how many parents were counted.
    :ivar read_units: read capacity consumed, as the server reported it, with the cost model's estimate for any
      request it reported nothing for.
    :ivar read_units_estimated: whether any part of ``read_units`` comes from the cost model.
    :ivar unverifiable: the parents fed by relations that are not loaded (:class:`Unverifiable`): not counted,
      not drift, never repaired.
    :ivar missing: the explicit ``parents=`` keys that name no stored parent (not counted).
    :ivar candidates: in an audit from an export, the parents whose stored total differs from their children in
      the export, as the export holds them (:attr:`drifts` are those still drifted on the live table); ``()``
      otherwise.
    """

    model: Type[Model]
    attribute: str
    drifts: Tuple[Drift, ...]
    parents_checked: int
    read_units: float
    read_units_estimated: bool
    unverifiable: Tuple[Unverifiable, ...] = ()
    missing: Tuple[Tuple[Any, ...], ...] = ()
    candidates: Tuple[Drift, ...] = ()

    @property
    def drift_count(self) -> int:
        """How many counters drifted: ``len(drifts)``."""
        return len(self.drifts)

    @property
    def drifted(self) -> int:
        """How many counters drifted. Deprecated: a count that reads like a truth value (``assert not
        report.drifted``); use :attr:`drift_count`, or test :attr:`drifts`. It goes in the next release.

        :raises DeprecationWarning: as a warning, each time it is read.
        """
        warnings.warn("AuditReport.drifted is deprecated and goes in the next release: use AuditReport.drift_count "
                      "(a number), or test AuditReport.drifts (the drifts)", DeprecationWarning, stacklevel=2)
        return self.drift_count

    def as_dict(self) -> Dict[str, Any]:
        """A JSON-ready summary with every drift (``drift_count``; ``drifted`` too, the same number, for one more
        release)."""
        return {"model": self.model.__name__, "attribute": self.attribute, "parents_checked": self.parents_checked,
                "drift_count": self.drift_count, "drifted": self.drift_count, "read_units": self.read_units,
                "read_units_estimated": self.read_units_estimated, "drifts": [d.as_dict() for d in self.drifts],
                "unverifiable": [u.as_dict() for u in self.unverifiable],
                "missing": [json_key(self.model, key) for key in self.missing],
                "candidates": [c.as_dict() for c in self.candidates]}


@dataclass(frozen=True)
class Repair:
    """What a repair did to one drift.

    :ivar drift: the drift, as the audit reported it.
    :ivar status: ``"repaired"``, ``"exact"`` (a recount found nothing to fix), ``"planned"`` (a dry run),
      ``"refused"`` (the parent is fed by relations not loaded; nothing written, see :attr:`reason`) or
      ``"failed"`` (see :attr:`reason`).
    :ivar before: the counter before, as the last attempt observed it.
    :ivar after: the counter after (the children counted).
    :ivar attempts: how many attempts the repair made (``0`` in a dry run).
    :ivar reason: why it was refused or failed; empty otherwise.
    """

    drift: Drift
    status: str
    before: Optional[StoredNumber]
    after: int
    attempts: int
    reason: str = ""

    def as_dict(self) -> Dict[str, Any]:
        """A JSON-ready record."""
        return dict(self.drift.as_dict(), status=self.status, before=json_stored(self.before), after=self.after,
                    attempts=self.attempts, reason=self.reason)


@dataclass(frozen=True)
class RepairReport:
    """One :class:`Repair` per drift, in order."""

    repairs: Tuple[Repair, ...] = field(default_factory=tuple)

    @property
    def complete(self) -> bool:
        """Whether no repair failed or was refused."""
        return all(r.status not in ("failed", "refused") for r in self.repairs)

    def as_dict(self) -> Dict[str, Any]:
        return {"complete": self.complete, "repairs": [r.as_dict() for r in self.repairs]}


@dataclass(frozen=True)
class FeederEntry:
    """One feeder id recorded on a counter's parents, and what this process knows of it.

    :ivar feeder: the id as recorded (``prefix=LIKE#``).
    :ivar status: ``"current"`` (a loaded relation's id), ``"legacy"`` (a loaded relation's id as earlier
      releases recorded it, ``module:Class.relation``) or ``"unknown"`` (no loaded relation: an audit reports
      its parents unverifiable).
    :ivar relation: the loaded relation it names (``Like.post``), ``None`` when unknown.
    :ivar parents: how many parents record it.
    """

    feeder: str
    status: str
    relation: Optional[str]
    parents: int

    def as_dict(self) -> Dict[str, Any]:
        """A JSON-ready record: feeder, status, relation, parents."""
        return {"feeder": self.feeder, "status": self.status, "relation": self.relation, "parents": self.parents}


@dataclass(frozen=True)
class FeederChange:
    """What a migration of feeder records does to one item: the parent item (shard ``0``) or one of its shards.

    :ivar added: the feeder ids added (the current ids of migrated legacy ones), first.
    :ivar removed: the feeder ids removed (legacy ones migrated, forgotten ones), after.
    :ivar status: ``"planned"`` (a dry run), ``"changed"``, or ``"gone"`` (the item was deleted meanwhile).
    """

    model: Type[Model]
    key: ParentKey
    shard: int
    added: Tuple[str, ...]
    removed: Tuple[str, ...]
    status: str

    def as_dict(self) -> Dict[str, Any]:
        """A JSON-ready record: model, key (the parent's), shard, added, removed, status."""
        return {"model": self.model.__name__, "key": json_key(self.model, self.key), "shard": self.shard,
                "added": list(self.added), "removed": list(self.removed), "status": self.status}


@dataclass(frozen=True)
class FeederReport:
    """What :func:`~pynamodb_counters.migrate_feeders` found and did.

    :ivar parents_checked: how many parents were read.
    :ivar entries: every feeder id recorded for the counter, with how many parents record it.
    :ivar changes: one :class:`FeederChange` per item rewritten (or to rewrite, in a dry run).
    :ivar applied: whether the changes were written (``False``: a dry run).
    """

    model: Type[Model]
    attribute: str
    parents_checked: int
    entries: Tuple[FeederEntry, ...]
    changes: Tuple[FeederChange, ...]
    applied: bool

    def as_dict(self) -> Dict[str, Any]:
        """A JSON-ready summary with every entry and change."""
        return {"model": self.model.__name__, "attribute": self.attribute, "parents_checked": self.parents_checked,
                "applied": self.applied, "entries": [e.as_dict() for e in self.entries],
                "changes": [c.as_dict() for c in self.changes]}
