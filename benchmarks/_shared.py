"""
What the benchmarks of ``python -m benchmarks`` share: dummy credentials, the served engine in a child process,
request counting on a botocore client, item sizes, machine facts, tables and JSON output.

The engine and the item-size rules come from :mod:`benchmarks.audit`, the first benchmark; this module adds the
one engine change that writes need (:func:`back_up_touched_items`) and the command-line plumbing.
"""
from __future__ import annotations

import argparse
import copy
import json
import multiprocessing
import os
import platform
import statistics
import sys
import threading
from collections import Counter
from datetime import datetime, timezone
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from benchmarks.audit import (
    BenchmarkError,
    LocalEngine,
    item_bytes,
    say,
    use_dummy_credentials,
)

__all__ = ["BenchmarkError", "ChildEngine", "RequestCounter", "add_common_options", "back_up_touched_items", "now",
           "item_bytes", "machine", "median", "run_main", "say", "table", "use_dummy_credentials", "write_json"]

REGION = "us-east-1"


# -- the engine -------------------------------------------------------------------------------------------------
def back_up_touched_items() -> Callable[[], None]:
    """Make moto's TransactWriteItems back up only the items it touches, in this process; returns the undo.

    Stock moto deep-copies the *whole table* before each action of a TransactWriteItems (once per action, not
    even once per table), so that it can restore the copy if the transaction is cancelled: a 100-action
    transaction on a table of 10,000 items copies a million items. That O(actions x table) engine CPU would swamp
    what the write benchmarks measure. DynamoDB does no such thing. This keeps moto's transaction code as it is,
    makes its table copy a no-op, and instead deep-copies the items the transaction names (their state before
    it), putting them back if the transaction raises: the same all-or-nothing outcome, in O(actions).
    The engine serves one request at a time (:class:`~pynamodb_counters.testing.server.ServedMoto`), so the
    class attribute it sets for the duration of a transaction is seen by no other request.
    """
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.dynamo_type import DynamoType
    from moto.dynamodb.models.table import Table

    original = DynamoDBBackend.transact_write_items

    def transact_write_items(self: Any, transact_items: List[Dict[str, Any]]) -> Any:
        backups: Dict[Tuple[str, Any, Any], Any] = {}
        for entry in transact_items:
            kind, operation = next(iter(entry.items()))
            found = self.tables.get(operation.get("TableName"))
            if found is None:
                continue
            key = operation.get("Item") if kind == "Put" else operation.get("Key")
            if not isinstance(key, dict) or found.hash_key_attr not in key:
                continue
            hash_value = DynamoType(key[found.hash_key_attr])
            range_value = DynamoType(key[found.range_key_attr]) if found.range_key_attr in key else None
            where = (found.name, hash_value, range_value)
            if where not in backups:
                backups[where] = copy.deepcopy(found.get_item(hash_value, range_value))
        Table.__deepcopy__ = lambda table_self, memo: table_self
        try:
            return original(self, transact_items)
        except BaseException:
            for (name, hash_value, range_value), item in backups.items():
                restore = self.tables[name]
                if range_value is None:
                    if item is None:
                        restore.items.pop(hash_value, None)
                    else:
                        restore.items[hash_value] = item
                elif item is None:
                    restore.items.get(hash_value, {}).pop(range_value, None)
                else:
                    restore.items[hash_value][range_value] = item
            raise
        finally:
            del Table.__deepcopy__

    DynamoDBBackend.transact_write_items = transact_write_items

    def undo() -> None:
        DynamoDBBackend.transact_write_items = original

    return undo


def _serve(connection: Any, partition_queries: bool, item_backups: bool) -> None:
    """The child process of a :class:`ChildEngine`: a served engine answering the parent's commands."""
    undo = back_up_touched_items() if item_backups else None
    try:
        with LocalEngine(partition_queries) as engine:
            connection.send(engine.endpoint_url)
            while True:
                try:
                    command, value = connection.recv()
                except EOFError:
                    return
                if command == "requests":
                    connection.send(engine.requests_served)
                elif command == "latency":
                    engine.set_latency(value)
                    connection.send(value)
                elif command == "trim":
                    engine.trim()
                    connection.send(None)
                else:
                    connection.send(None)
                    return
    finally:
        if undo is not None:
            undo()


class ChildEngine:
    """:class:`~pynamodb_counters.testing.server.ServedMoto` in a child process, as in :mod:`benchmarks.audit`.

    :param partition_queries: serve table Queries from the queried partition
      (:func:`benchmarks.audit.serve_queries_from_partition`) instead of moto's sort of the whole table.
    :param item_backups: transactions back up the items they touch, not whole tables
      (:func:`back_up_touched_items`).
    """

    def __init__(self, *, partition_queries: bool = True, item_backups: bool = True) -> None:
        self._options = (partition_queries, item_backups)
        self._process: Any = None
        self._connection: Any = None
        self.endpoint_url = ""

    def __enter__(self) -> ChildEngine:
        context = multiprocessing.get_context("spawn")
        self._connection, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child, *self._options), name="served-moto",
                                        daemon=True)
        self._process.start()
        child.close()
        self.endpoint_url = self._receive()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self._process is None:
            return
        try:
            self._connection.send(("stop", None))
            self._receive()
        except (BenchmarkError, OSError):
            pass
        self._process.join(timeout=10)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join(timeout=5)
        self._connection.close()
        self._process = None

    def _receive(self) -> Any:
        if not self._connection.poll(120):
            raise BenchmarkError("the engine process did not answer within 120 s")
        try:
            return self._connection.recv()
        except EOFError as error:
            raise BenchmarkError(f"the engine process died (exit code {self._process.exitcode})") from error

    def _call(self, command: str, value: Any = None) -> Any:
        self._connection.send((command, value))
        return self._receive()

    @property
    def requests_served(self) -> int:
        return int(self._call("requests"))

    def set_latency(self, seconds: float) -> None:
        self._call("latency", seconds)

    def trim(self) -> None:
        self._call("trim")


def point_models_at(models: Iterable[Any], host: str, pool: int = 10) -> None:
    """Point PynamoDB models at ``host`` and drop their cached connections (and so their botocore clients)."""
    for model in models:
        meta: Any = model.Meta
        meta.host = host
        meta.region = REGION
        meta.max_pool_connections = pool
        model._connection = None


# -- counting requests on the client --------------------------------------------------------------------------
class RequestCounter:
    """Counts the requests a botocore client sends, by operation, and keeps the last ``TransactItems`` sent.

    A ``before-send`` handler that returns ``None``: the request goes on to the network as usual. Registering
    it on a client sees every attempt, retries included.
    """

    def __init__(self) -> None:
        self.by_operation: Counter[str] = Counter()
        self.transact_actions: List[int] = []  # actions per TransactWriteItems request
        self.transact_bodies: List[Dict[str, Any]] = []
        self.keep_bodies = False
        self._lock = threading.Lock()

    def attach(self, client: Any) -> RequestCounter:
        client.meta.events.register("before-send.dynamodb", self)
        return self

    def detach(self, client: Any) -> None:
        client.meta.events.unregister("before-send.dynamodb", self)

    def __call__(self, request: Any, **_: Any) -> None:
        target = request.headers.get("X-Amz-Target", b"")
        name = (target.decode() if isinstance(target, bytes) else str(target)).rsplit(".", 1)[-1]
        with self._lock:
            self.by_operation[name] += 1
            if name == "TransactWriteItems":
                body = json.loads(request.body)
                self.transact_actions.append(len(body["TransactItems"]))
                if self.keep_bodies:
                    self.transact_bodies.append(body)
        return None

    @property
    def total(self) -> int:
        return sum(self.by_operation.values())

    def reset(self) -> None:
        with self._lock:
            self.by_operation.clear()
            self.transact_actions.clear()
            self.transact_bodies.clear()


# -- figures and output ---------------------------------------------------------------------------------------
def machine() -> Dict[str, Any]:
    import botocore
    import moto
    import pynamodb

    import pynamodb_counters

    return {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
            "moto": moto.__version__, "pynamodb": pynamodb.__version__, "botocore": botocore.__version__,
            "pynamodb_counters": pynamodb_counters.__version__}


def describe_machine() -> str:
    facts = machine()
    return (f"{facts['cpus']} CPUs, Python {facts['python']}, PynamoDB {facts['pynamodb']}, botocore "
            f"{facts['botocore']}, moto {facts['moto']}")


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def add_common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="a smaller, faster run (figures are noisier)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON to PATH")


def write_json(path: str, figures: Dict[str, Any]) -> None:
    with open(path, "w", encoding="utf-8") as out:
        json.dump(figures, out, indent=2, default=str)
        out.write("\n")
    say(f"figures written to {path}")


def run_main(run: Callable[[argparse.Namespace], Dict[str, Any]], parser: argparse.ArgumentParser,
             argv: Optional[Sequence[str]] = None) -> int:
    """Parse ``argv``, run one benchmark, write its JSON; exit status 1 when it fails its own checks."""
    options = parser.parse_args(argv)
    use_dummy_credentials()
    try:
        figures = run(options)
    except BenchmarkError as error:
        print(f"benchmark failed: {error}", file=sys.stderr)
        return 1
    if options.json:
        write_json(options.json, {"generated_at": now(), "machine": machine(), **figures})
    return 0


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> str:
    """A plain-text table. ``align`` has one letter per column, ``l`` or ``r``; by default the first column is
    aligned left and the others right."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    align = align or "l" + "r" * (len(headers) - 1)
    line = "  ".join("-" * w for w in widths)
    out = [line, "  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip(), line]
    out += ["  ".join(c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(r, widths, align)).rstrip()
            for r in rows]
    out.append(line)
    return "\n".join(out)
