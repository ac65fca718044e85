"""
What a counted write reports: the counter changes it made and what it cost.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Optional, Tuple, Type

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.models import Model

__all__ = ["CounterChange", "WriteResult"]


@dataclass(frozen=True)
class CounterChange:
    """One change to one counter, as committed (or, on a rejected write, as it would have been).

    :ivar parent: the parent model class.
    :ivar key: the parent's key, ``(hash,)`` or ``(hash, range)``, as Python values.
    :ivar attribute: the counter's Python attribute name on the parent model.
    :ivar delta: the signed change, ``+1`` for an added child and ``-1`` for a removed one.
    :ivar shard: which shard item took the change: ``0`` (the parent item) unless the counter is sharded.
    """

    parent: Type[Model]
    key: Tuple[Any, ...]
    attribute: str
    delta: int
    shard: int = 0


@dataclass(frozen=True)
class WriteResult:
    """The outcome of one counted transaction.

    :ivar token: the ``ClientRequestToken`` every attempt carried (also stored on added children as their
      write id).
    :ivar changes: every counter change the transaction made, one per child and relation, in request order.
    :ivar consumed_capacity: ``ConsumedCapacity`` as DynamoDB reported it (one entry per table); empty where the
      server reports none, as moto does.
    :ivar attempts: how many requests it took, every round included (a write refused because its stored child
      had changed, and sent again, counts both).
    :ivar recovered: ``True`` when an attempt's response was lost after the server committed and a later attempt
      recognised the committed write (nothing was counted twice).
    :ivar uncertain: ``True`` when the write was taken as recovered without proof: after an attempt whose response
      was lost, every child it deletes was found gone. They are gone and the counters are exact either way, but
      this write may not be what removed them (the lost attempt may not have committed, and the children may never
      have existed), so its ``changes`` may not have happened. Also ``True`` when an earlier round of the write
      (refused, then counted again and sent again) had an attempt whose response was lost: where the server
      forgets tokens, that attempt may have committed changes that ``changes`` does not list (the counters are
      exact either way).
    :ivar duplicate: ``True`` when ``save(ignore_duplicate=True)`` found the child already stored (nothing changed).
    :ivar missing: ``True`` when ``delete(ignore_missing=True)`` found no child to delete (nothing changed).
    :ivar rollups_gone: the changes not made because their parent, a rollup created by its first count
      (``counted_by(..., create_parent=True)``), was gone (expired by TTL): the decrements of deleted or moved
      children, and the changes of amount of edited ones, which were written all the same.
    """

    token: str
    changes: Tuple[CounterChange, ...] = ()
    consumed_capacity: Tuple[Mapping[str, Any], ...] = ()
    attempts: int = 1
    recovered: bool = False
    uncertain: bool = False
    duplicate: bool = False
    missing: bool = False
    rollups_gone: Tuple[CounterChange, ...] = ()

    @property
    def capacity_units(self) -> Optional[float]:
        """Total write capacity units DynamoDB reported, or ``None`` where it reported none."""
        if not self.consumed_capacity:
            return None
        return float(sum(entry.get("CapacityUnits", 0.0) for entry in self.consumed_capacity))
