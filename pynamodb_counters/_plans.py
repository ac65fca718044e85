"""
A counted write on its way to DynamoDB and back: :class:`Plan` and :class:`Slot` (a TransactWriteItems request
and what each of its actions stands for) and :class:`Sent` (what sending it returned).

Pure data, shared by the planner (``_planner``), the reader of outcomes (``_outcomes``), the sender
(``_connection``) and the commit pipeline (``_pipeline``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Set, Tuple, Type

from pynamodb.models import Model

from ._deltas import NONE, Deltas
from ._results import CounterChange

if TYPE_CHECKING:  # pragma: no cover
    import botocore.exceptions

__all__ = ["ItemId", "Plan", "Sent", "Slot"]

_CHILD_KINDS = frozenset(("put", "edit", "delete"))

ItemId = Tuple[str, Any, Any]  # (table name, serialized hash key, serialized range key)


@dataclass
class Slot:
    """What one action of a plan stands for, so that cancellation reasons (one per action, in order) can be
    read back.

    :ivar kind: ``"put"`` / ``"edit"`` / ``"delete"`` for a counted child (a new one, a stored one saved again or
      updated, a deleted one), ``"parent"`` for a parent's counter Update (on the
      parent item or one of its shard items), ``"shard"`` for creating or deleting a shard item with its parent,
      ``"other"`` for a caller's uncounted write, ``"gone"`` for the check that a rollup found gone is still
      absent.
    :ivar key: the item's key; for ``"parent"`` and ``"shard"`` slots, the parent's key (see :attr:`shard`).
    :ivar shard: the shard item the slot writes, ``0`` for the parent item itself.
    :ivar counted: a child slot's counter changes, as the planner decided them.
    :ivar stored: a counted update's child as stored once written (a raw item), where it is not the instance's.
    :ivar updating: an ``"edit"`` slot that is an ``update()`` (for its messages).
    :ivar deltas: a parent slot's change per counter (Python name).
    :ivar fed_by: a parent slot's FED_BY entries: the relations that fed it.
    :ivar rollup: a parent slot fed only by relations that create their parent (rollups).
    :ivar creates: a parent slot fed only by first counts of relations that create their parent.
    :ivar defaults: a created parent's ``parent_defaults``, from its first child.
    :ivar absent: a parent slot that must find its item absent: a rollup found gone, counted into again.
    :ivar must_exist: an ``"other"`` slot that must find its item stored (an uncounted update of a counted child).
    """

    kind: str
    model: Type[Model]
    key: Tuple[Any, ...]
    instance: Optional[Model] = None
    counted: Deltas = NONE
    stored: Optional[Dict[str, Any]] = None
    updating: bool = False
    deltas: Dict[str, int] = field(default_factory=dict)
    shard: int = 0
    fed_by: Set[str] = field(default_factory=set)
    rollup: bool = True
    creates: bool = True
    defaults: Optional[Dict[str, Any]] = None
    absent: bool = False
    must_exist: bool = False

    @property
    def is_child(self) -> bool:
        """Whether the slot is a counted child's own action (``"put"``, ``"edit"`` or ``"delete"``)."""
        return self.kind in _CHILD_KINDS

    @property
    def changes(self) -> Tuple[CounterChange, ...]:
        """A child slot's counter changes, in request order."""
        return self.counted.changes


@dataclass
class Plan:
    """A TransactWriteItems request, ready to send, and what each of its actions means."""

    items: List[Dict[str, Any]]
    slots: List[Slot]
    token: str

    @property
    def children(self) -> List[Slot]:
        """The counted child operations, in the order they were added."""
        return [slot for slot in self.slots if slot.is_child]


@dataclass(frozen=True)
class Sent:
    """What the last attempt at sending a plan returned: a response, or a cancellation that retrying cannot fix.

    :ivar response: the TransactWriteItems response, when it committed.
    :ivar cancellation_reasons: the ``CancellationReasons`` of a cancelled transaction (``None`` if it committed).
    :ivar error: the cancellation error itself.
    :ivar attempts: how many requests were made.
    :ivar ambiguous: whether an earlier attempt may have committed although its response was lost.
    """

    response: Optional[Dict[str, Any]]
    cancellation_reasons: Optional[List[Dict[str, Any]]]
    error: Optional[botocore.exceptions.ClientError]
    attempts: int
    ambiguous: bool
