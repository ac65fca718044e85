"""
Bulk writes in chunks: many counted saves and deletes grouped into transactions of at most ``max_actions``
actions, children of the same parents together so that their deltas merge into one Update. Pure, no I/O.
"""
from __future__ import annotations

from enum import Enum
from typing import AbstractSet, FrozenSet, List, Sequence, Set, Tuple

from pynamodb.attributes import Attribute
from pynamodb.models import Model

from .._keys import ItemId, item_id, key_of
from ..declare._shards import shard_key
from ..declare._spec import counters_of, shard_count, spec_of
from ..exceptions import CountingBypassError, InvalidTransactionError, TransactionTooLargeError
from ._deltas import counted_from, decide
from ._writes import Write, WriteKind, delete_write, save_write

__all__ = ["BulkOperation", "Entry", "plan_chunks"]


class BulkOperation(str, Enum):
    """What a bulk write does with a child (:attr:`~pynamodb_counters.ChildOutcome.operation`); each equals its
    text (``BulkOperation.SAVE == "save"``, and ``str()`` gives it)."""

    SAVE = "save"
    """Saved and counted: a create, or an edit of the stored child, its counts following the change."""
    DELETE = "delete"
    """Deleted and uncounted."""

    def __str__(self) -> str:  # its text, printed or formatted, on every Python
        return str(self.value)


Entry = Tuple[int, BulkOperation, Model]
"""One child of a bulk write: its input position, its operation, and the child."""


def plan_chunks(operations: Sequence[Tuple[BulkOperation, Model]], max_actions: int,
                skip: AbstractSet[int] = frozenset()) -> List[List[Entry]]:
    """Group operations into chunks of at most ``max_actions`` actions (each child's own actions, its shard
    items included, plus one per distinct parent item), children of the same parents next to each other so their
    deltas merge. The operations at the positions in ``skip`` are left out.

    :raises TransactionTooLargeError: a child whose actions alone exceed ``max_actions``.
    """
    numbered: List[Tuple[Tuple[ItemId, ...], int, FrozenSet[ItemId], Entry]] = []
    seen: Set[ItemId] = set()
    for position, (operation, child) in enumerate(operations):
        if position in skip:
            continue
        model = type(child)
        spec = spec_of(model)
        if not spec.relations:
            if spec.streamed:
                raise CountingBypassError(f"bulk writes count children in their transactions; {model.__name__}'s "
                                          f"relations are counted from the stream: write its items with PynamoDB's "
                                          f"{model.__name__}.batch_write(), and count_stream counts them")
            raise CountingBypassError(f"bulk writes count children; {model.__name__} has no counted_by relation")
        write = save_write(child) if operation == BulkOperation.SAVE else delete_write(child)
        own = item_id(model, key_of(child))
        if own in seen:
            raise InvalidTransactionError(f"{model.__name__} {own[1:]} appears twice in one bulk write")
        seen.add(own)
        counting = counted_from(write)
        assert counting is not None
        decision = decide(write, counting)
        changes = decision.deltas.changes
        parents = tuple(sorted({item_id(c.parent, shard_key(c.key, c.shard)) for c in changes}, key=repr))
        # a limit held by the parent takes one increment per transaction: such a parent is never shared in a chunk
        single = frozenset(item_id(c.parent, c.key) for c in changes
                           if c.delta > 0 and isinstance(counters_of(c.parent)[c.attribute].limit, Attribute))
        size = _own_actions(write, decision.basis is None)
        if size + len(parents) > max_actions:
            raise TransactionTooLargeError(
                f"{model.__name__} {own[1:]} needs {size + len(parents)} actions ({size} of its own, its shard "
                f"items included, and {len(parents)} parent updates); a transaction here carries at most "
                f"{max_actions}. Nothing was sent")
        numbered.append((parents, size, single, (position, operation, child)))
    numbered.sort(key=lambda entry: repr(entry[0]))
    chunks: List[List[Entry]] = []
    chunk: List[Entry] = []
    chunk_parents: Set[ItemId] = set()
    chunk_single: Set[ItemId] = set()
    actions = 0
    for parents, size, single, entry in numbered:
        new = chunk_parents | set(parents)
        if chunk and (actions + size + len(new) > max_actions or single & chunk_single):
            chunks.append(chunk)
            chunk, new, actions, chunk_single = [], set(parents), 0, set()
        chunk.append(entry)
        chunk_parents = new
        chunk_single |= single
        actions += size
    if chunk:
        chunks.append(chunk)
    return chunks


def _own_actions(write: Write, new: bool) -> int:
    """The actions a counted child's save or delete carries besides its parents' Updates: its own Put, Update or
    Delete and, when it writes or deletes them with it (a child that is itself a sharded parent, created or
    deleted; not an edit), its shard items."""
    with_shards = write.with_shards and (write.kind is not WriteKind.SAVE or new)
    return 1 + (shard_count(write.model) - 1 if with_shards else 0)
