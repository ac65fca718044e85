"""
:func:`skip_counting`: the documented way to write children without counting them (backfills, migrations).
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import FrozenSet, Iterator, Optional

__all__ = ["counting_skipped", "skip_counting"]

# None: nothing skipped; an empty set: every model skipped; otherwise the skipped models (and subclasses).
_ALL: FrozenSet[type] = frozenset()
_skipped: contextvars.ContextVar[Optional[FrozenSet[type]]] = contextvars.ContextVar(
    "pynamodb_counters_skipped", default=None
)


@contextlib.contextmanager
def skip_counting(*models: type) -> Iterator[None]:
    """Inside this block, saves, deletes and updates of ``models`` (all models when none is named) are plain
    PynamoDB writes: no transaction, no guard, no counter change, no signal; ``batch_write()`` and key updates
    are allowed, and a parent's ``save()`` writes its counters as they are on the instance.

    Counters drift by whatever is written inside: audit and repair them afterwards. The block is local to the
    current thread (and asyncio task); other threads keep counting.

    ::

        with skip_counting(Like):
            with Like.batch_write() as batch:
                for like in imported_likes:
                    batch.save(like)
    """
    current = _skipped.get()
    if current is not None and not current:  # everything is already skipped
        added: FrozenSet[type] = _ALL
    elif not models:
        added = _ALL
    else:
        added = frozenset(models) | (current or frozenset())
    token = _skipped.set(added)
    try:
        yield
    finally:
        _skipped.reset(token)


def counting_skipped(model: type) -> bool:
    """Whether writes of ``model`` are uncounted here (inside a matching :func:`skip_counting` block)."""
    skipped = _skipped.get()
    if skipped is None:
        return False
    return not skipped or any(issubclass(model, m) for m in skipped)
