"""
What a counted child's write changes: :func:`deltas`, the one function that decides it, for a create, an edit
(a move included), an update and a delete alike. Pure, no I/O.

It compares, relation by relation, the stored child as PynamoDB loads it (``before``: ``None`` for a new child)
with the child as PynamoDB will load it once written (``after``: ``None`` for a delete):

* a relation the child starts counting for is **added** (a first count: the only change that may create a
  rollup);
* one it stops counting for is **removed**; a move to another parent is both;
* one whose parent stays and whose amount changes is **changed** by the difference (nothing when it is zero);
* what would be removed from, or changed in, a rollup found gone (expired) is **gone**: not sent, reported. A
  gone rollup stays gone for the children it counted; only a first count creates it again.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, AbstractSet, Any, List, Optional, Sequence, Tuple, Type

from ._results import CounterChange

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.models import Model

    from .relations import Relation

__all__ = ["Deltas", "deltas"]

Counted = Tuple["Relation", CounterChange]
"""One counter change with the relation that makes it."""

Parent = Tuple[Type[Any], Tuple[Any, ...]]
"""A parent item: its model and key."""


@dataclass(frozen=True)
class Deltas:
    """The counter changes of one counted child's write, each with its relation, by kind."""

    removed: Tuple[Counted, ...] = ()
    added: Tuple[Counted, ...] = ()
    changed: Tuple[Counted, ...] = ()
    gone: Tuple[CounterChange, ...] = ()

    @property
    def counted(self) -> Tuple[Counted, ...]:
        """Every change sent: the removed, then the added, then the changed."""
        return self.removed + self.added + self.changed

    @property
    def changes(self) -> Tuple[CounterChange, ...]:
        """:attr:`counted` without the relations."""
        return tuple(change for _, change in self.counted)

    def of(self, kind: str) -> Tuple[CounterChange, ...]:
        """The changes of one kind (``"removed"``, ``"added"`` or ``"changed"``) without their relations."""
        pairs: Tuple[Counted, ...] = getattr(self, kind)
        return tuple(change for _, change in pairs)


NONE = Deltas()
"""A write that changes no counter."""


def deltas(relations: Sequence[Relation], before: Optional[Model], after: Optional[Model],
           gone: AbstractSet[Parent] = frozenset()) -> Deltas:
    """The changes of a write from ``before`` to ``after`` (PynamoDB's loaded views; ``None`` for absent), the
    parents in ``gone`` being rollups found gone.

    :raises ParentKeyError: a key function gave an unusable parent key.
    :raises ChildValueError: a ``when=`` or ``amount=`` function failed or gave an unusable value.
    """
    removed: List[Counted] = []
    added: List[Counted] = []
    changed: List[Counted] = []
    lost: List[CounterChange] = []
    for relation in relations:
        old = relation.changes(before, -1) if before is not None else []
        new = relation.changes(after, 1) if after is not None else []
        if old and new and (old[0].key, old[0].shard) == (new[0].key, new[0].shard):
            difference = old[0].delta + new[0].delta
            if difference:
                change = replace(new[0], delta=difference)
                if (change.parent, change.key) in gone:
                    lost.append(change)
                else:
                    changed.append((relation, change))
            continue
        for change in old:
            if (change.parent, change.key) in gone:
                lost.append(change)
            else:
                removed.append((relation, change))
        added.extend((relation, change) for change in new)
    if not (removed or added or changed or lost):
        return NONE
    return Deltas(tuple(removed), tuple(added), tuple(changed), tuple(lost))
