"""The suite's second driver: with ``pytest --driver=async``, every counted write, read and transaction a test makes
through the sync API (``save()``, ``delete()``, ``update()``, ``get()``, ``refresh()``, ``total()``,
``totals()``, ``commit()``) is made through its async twin (``asave()``...) on one event loop, so that the sync
tests of every relation kind run against the async driver too, not copied.

A call made while the loop runs (another writer run by an interceptor or a signal's receiver in the middle of an
async write) or from another thread is made through the sync API, as another process would make it.
"""
from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any, Callable, Iterator

from pynamodb.models import Model

from pynamodb_counters import CountedTransaction, CounterField, CounterMixin, aio

# (owner, sync name, async name, how it is bound)
TWINS = (
    (CounterMixin, "save", "asave", "method"),
    (CounterMixin, "delete", "adelete", "method"),
    (CounterMixin, "update", "aupdate", "method"),
    (CounterMixin, "refresh", "arefresh", "method"),
    (CounterMixin, "get", "aget", "classmethod"),
    (CounterField, "total", "atotal", "method"),
    (CounterField, "totals", "atotals", "method"),
    (CountedTransaction, "commit", "acommit", "method"),
)


def _loop_running() -> bool:
    """Whether an event loop runs in this thread (the driver's, or a test's own ``asyncio.run()``)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class AsyncDriver:
    """One event loop for the session, and a count of the calls it made (a run that made none proved nothing)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.get_ident()
        self.calls = 0

    def through_loop(self, sync: Callable[..., Any], twin: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() != self.thread or _loop_running():
                return sync(*args, **kwargs)
            self.calls += 1
            return self.loop.run_until_complete(twin(*args, **kwargs))
        return call

    @contextlib.contextmanager
    def driving(self) -> Iterator[None]:
        """The sync API made through the async twins while the block runs."""
        saved = []
        for owner, name, twin_name, kind in TWINS:
            found = owner.__dict__.get(name)
            saved.append((owner, name, found))
            if kind == "classmethod":
                sync_get = getattr(Model, name).__func__  # PynamoDB's own: the mixin does not define it
                twin_get = getattr(owner, twin_name).__func__

                def bound(cls: Any, *args: Any, _sync: Any = sync_get, _twin: Any = twin_get, **kwargs: Any) -> Any:
                    return self.through_loop(lambda *a, **k: _sync(cls, *a, **k),
                                             lambda *a, **k: _twin(cls, *a, **k))(*args, **kwargs)
                setattr(owner, name, classmethod(bound))
            else:
                sync = getattr(owner, name) if hasattr(owner, name) else getattr(Model, name)
                setattr(owner, name, self.through_loop(sync, getattr(owner, twin_name)))
        try:
            yield
        finally:
            for owner, name, found in reversed(saved):
                if found is None:
                    delattr(owner, name)
                else:
                    setattr(owner, name, found)

    def close(self) -> None:
        self.loop.run_until_complete(aio.aclose())
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()


ENGINE = """
import sys
from pynamodb_counters.testing import ServedMoto
with ServedMoto(latency=float(sys.argv[1]), item_backups=True) as engine:
    print(engine.endpoint_url, flush=True)
    sys.stdin.read()  # until the test closes it
"""


@contextlib.contextmanager
def engine_elsewhere(latency: float = 0.0) -> Iterator[str]:
    """The served engine in a process of its own (its endpoint URL): a loop measured in this process then shares no
    interpreter lock with the engine, as an app's loop shares none with DynamoDB. ``latency``: seconds added to
    every request outside the engine's one-at-a-time lock (a slow network)."""
    import subprocess
    import sys

    engine = subprocess.Popen([sys.executable, "-c", ENGINE, str(latency)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert engine.stdout is not None
        endpoint = engine.stdout.readline().strip()
        if not endpoint.startswith("http://"):
            raise RuntimeError(f"the served engine did not start in its own process (it printed {endpoint!r})")
        yield endpoint
    finally:
        assert engine.stdin is not None
        engine.stdin.close()
        engine.wait(timeout=30)
