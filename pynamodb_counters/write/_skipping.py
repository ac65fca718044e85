"""
:func:`skip_counting`: the documented way to write children without counting them (backfills, migrations).

The block's state is a :class:`_Scope` held in a context variable. Copies of the context (asyncio tasks,
``contextvars.copy_context()``, executors that copy it) share the scope object, not a snapshot of it: when the
block exits it closes its scope, so no copy made inside it keeps skipping afterwards.
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import FrozenSet, Iterator, Optional

__all__ = ["SKIPPING", "counting_skipped", "skip_counting"]


class _Scope:
    """One open :func:`skip_counting` block: the models it skips (all when empty), the enclosing block's scope,
    and whether the block is still open."""

    __slots__ = ("models", "outer", "open")

    def __init__(self, models: FrozenSet[type], outer: Optional[_Scope]) -> None:
        self.models = models
        self.outer = outer
        self.open = True

    def skips(self, model: type) -> bool:
        """Whether this block, or an enclosing one, is open and skips ``model``."""
        scope: Optional[_Scope] = self
        while scope is not None:
            if scope.open and (not scope.models or any(issubclass(model, m) for m in scope.models)):
                return True
            scope = scope.outer
        return False


_scope: contextvars.ContextVar[Optional[_Scope]] = contextvars.ContextVar("pynamodb_counters_skipped",
                                                                          default=None)
SKIPPING = _scope
"""The innermost open block's scope, ``None`` outside any block: a write path that reads it first
(``SKIPPING.get() is not None and counting_skipped(model)``) makes no call at all when no block is open."""


@contextlib.contextmanager
def skip_counting(*models: type) -> Iterator[None]:
    """Inside this block, saves, deletes and updates of ``models`` (all models when none is named) are plain
    PynamoDB writes: no transaction, no guard, no counter change, no signal; ``batch_write()`` and key updates
    are allowed, and a parent's ``save()`` writes its counters as they are on the instance.

    Counters drift by whatever is written inside: audit and repair them afterwards. The block is local to the
    current thread (and asyncio task); other threads keep counting.

    Tasks and callbacks that inherit a copy of the context from inside the block (an ``asyncio`` task created in
    it, ``contextvars.copy_context().run(...)`` in another thread) skip counting **while the block is open**, and
    count again as soon as it exits, even if they are still running: no write that starts after the block exits
    is skipped by it. A write that had already started (decided to skip) when the block exited finishes as an
    uncounted write.

    ::

        with skip_counting(Like):
            with Like.batch_write() as batch:
                for like in imported_likes:
                    batch.save(like)
    """
    scope = _Scope(frozenset(models), _scope.get())
    token = _scope.set(scope)
    try:
        yield
    finally:
        scope.open = False
        _scope.reset(token)


def counting_skipped(model: type) -> bool:
    """Whether writes of ``model`` are uncounted here (inside an open, matching :func:`skip_counting` block)."""
    scope = _scope.get()
    return scope is not None and scope.skips(model)
