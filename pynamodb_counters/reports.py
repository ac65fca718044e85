"""
What audits and repairs report: data, never logs. Imported from :mod:`pynamodb_counters.reconcile`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple, Type

from pynamodb.models import Model

from .relations import ParentKey

__all__ = ["AuditReport", "Drift", "Repair", "RepairReport"]


@dataclass(frozen=True)
class Drift:
    """One counter that differs from the number of its parent's children.

    :ivar model: the parent model.
    :ivar key: the parent's key, ``(hash,)`` or ``(hash, range)``.
    :ivar attribute: the counter's Python attribute name.
    :ivar stored: the value stored, or ``None`` when the item lacks the attribute.
    :ivar actual: the number of children counted.
    :ivar sequence: the parent's counted-write sequence when observed (``None`` if never counted); a repair
      conditions on it.
    """

    model: Type[Model]
    key: ParentKey
    attribute: str
    stored: Optional[int]
    actual: int
    sequence: Optional[int] = None

    def as_dict(self) -> Dict[str, Any]:
        """A JSON-ready record: model, key (a list), attribute, stored, actual."""
        return {"model": self.model.__name__, "key": list(self.key), "attribute": self.attribute,
                "stored": self.stored, "actual": self.actual}


@dataclass(frozen=True)
class AuditReport:
    """What an audit found.

    :ivar drifts: one :class:`Drift` per drifted counter.
    :ivar parents_checked: how many parents were counted.
    :ivar read_units: read capacity consumed, as the server reported it, with the cost model's estimate for any
      request it reported nothing for.
    :ivar read_units_estimated: whether any part of :attr:`read_units` comes from the cost model.
    """

    model: Type[Model]
    attribute: str
    drifts: Tuple[Drift, ...]
    parents_checked: int
    read_units: float
    read_units_estimated: bool

    @property
    def drifted(self) -> int:
        """How many counters drifted."""
        return len(self.drifts)

    def as_dict(self) -> Dict[str, Any]:
        """A JSON-ready summary with every drift."""
        return {"model": self.model.__name__, "attribute": self.attribute, "parents_checked": self.parents_checked,
                "drifted": self.drifted, "read_units": self.read_units,
                "read_units_estimated": self.read_units_estimated, "drifts": [d.as_dict() for d in self.drifts]}


@dataclass(frozen=True)
class Repair:
    """What a repair did to one drift.

    :ivar status: ``"repaired"``, ``"exact"`` (a recount found nothing to fix), ``"planned"`` (a dry run) or
      ``"failed"`` (see :attr:`reason`).
    :ivar before: the counter before, as the last attempt observed it.
    :ivar after: the counter after (the children counted).
    """

    drift: Drift
    status: str
    before: Optional[int]
    after: int
    attempts: int
    reason: str = ""

    def as_dict(self) -> Dict[str, Any]:
        """A JSON-ready record."""
        return dict(self.drift.as_dict(), status=self.status, before=self.before, after=self.after,
                    attempts=self.attempts, reason=self.reason)


@dataclass(frozen=True)
class RepairReport:
    """One :class:`Repair` per drift, in order."""

    repairs: Tuple[Repair, ...] = field(default_factory=tuple)

    @property
    def complete(self) -> bool:
        """Whether no repair failed."""
        return all(r.status != "failed" for r in self.repairs)

    def as_dict(self) -> Dict[str, Any]:
        return {"complete": self.complete, "repairs": [r.as_dict() for r in self.repairs]}
