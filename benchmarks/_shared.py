"""
What the benchmarks of ``python -m benchmarks`` share: dummy credentials, the served engine in a child process,
request counting on a botocore client, item sizes, machine facts, tables and JSON output.

The engine and the item-size rules come from :mod:`benchmarks.audit`, the first benchmark; this module adds the
engine option that writes need (``ServedMoto(item_backups=True)``) and the command-line plumbing.
"""
from __future__ import annotations

import argparse
import gc
import inspect
import json
import math
import multiprocessing
import os
import platform
import statistics
import sys
import threading
from collections import Counter
from datetime import datetime, timezone
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence

from pynamodb_counters.testing.server import ServedMoto

__all__ = ["BenchmarkError", "ChildEngine", "LocalEngine", "RequestCounter", "add_common_options", "item_bytes",
           "machine", "median", "now", "run_main", "say", "serve_queries_from_partition", "set_latency",
           "stream_records", "table", "use_dummy_credentials", "value_bytes", "write_json"]

REGION = "us-east-1"


class BenchmarkError(Exception):
    """The audit did not find exactly the planted drift, or the engine misbehaved."""


def use_dummy_credentials() -> None:
    """Dummy credentials before any botocore client exists: nothing may reach AWS."""
    os.environ["AWS_ACCESS_KEY_ID"] = "testing"
    os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"
    os.environ["AWS_DEFAULT_REGION"] = REGION
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        os.environ.pop(name, None)


def serve_queries_from_partition() -> Callable[[], None]:
    """Make moto's table Query read only the queried partition, in this process; returns the undo.

    Stock moto answers every Query by sorting *all* the table's items (``Table.all_items()``) and then keeping
    those with the queried hash key: O(table) engine CPU per Query, about 0.5 s at 50,000 items, a hundred times
    the latency this benchmark models. DynamoDB reads only the partition. This hands the same Query the
    partition's items, sorted by range key as moto would, and leaves everything else (index queries, Scans,
    tables without a range key) to moto.
    """
    from moto.dynamodb.models.table import Table

    original_query, original_all_items = Table.query, Table.all_items
    signature = inspect.signature(original_query)
    state = threading.local()

    def all_items(self: Any) -> Any:
        partition = getattr(state, "partition", None)
        return original_all_items(self) if partition is None else partition

    def query(self: Any, *args: Any, **kwargs: Any) -> Any:
        arguments = signature.bind(self, *args, **kwargs).arguments
        hash_key = arguments.get("hash_key")
        if arguments.get("index_name") or hash_key is None or not self.range_key_attr:
            return original_query(self, *args, **kwargs)
        state.partition = sorted(self.items.get(hash_key, {}).values(), key=lambda item: item.range_key)
        try:
            return original_query(self, *args, **kwargs)
        finally:
            state.partition = None

    Table.query, Table.all_items = query, all_items

    def undo() -> None:
        Table.query, Table.all_items = original_query, original_all_items

    return undo


def set_latency(engine: ServedMoto, seconds: float) -> None:
    """Change a started engine's per-request latency (from the next request on)."""
    engine.latency = seconds


class LocalEngine:
    """A :class:`ServedMoto` in this process (its threads share the GIL with the audit's)."""

    def __init__(self, partition_queries: bool, item_backups: bool = False, keep_alive: bool = False) -> None:
        self._partition_queries = partition_queries
        self._item_backups = item_backups
        self._keep_alive = keep_alive
        self._undo: Optional[Callable[[], None]] = None
        self._server: Optional[ServedMoto] = None
        self._front: Any = None
        self.endpoint_url = ""

    def __enter__(self) -> LocalEngine:
        if self._partition_queries:
            self._undo = serve_queries_from_partition()
        self._server = ServedMoto(latency=0.0, item_backups=self._item_backups).start()
        self.endpoint_url = self._server.endpoint_url
        if self._keep_alive:
            self.endpoint_url = self._keep_alive_front()
        return self

    def _keep_alive_front(self) -> str:
        """The same engine (its one-request-at-a-time app, latency included) served by waitress, which keeps
        connections open as DynamoDB does (werkzeug closes each one): ``pip install waitress``."""
        try:
            from waitress.server import create_server
        except ImportError as error:
            raise BenchmarkError("--keep-alive needs waitress: pip install waitress") from error
        assert self._server is not None
        self._front = create_server(self._server._app, host="127.0.0.1", port=0, threads=256,
                                    connection_limit=1000, channel_timeout=120)
        threading.Thread(target=self._front.run, name="keep-alive-front", daemon=True).start()
        return f"http://127.0.0.1:{self._front.effective_port}"

    def __exit__(self, *exc_info: Any) -> None:
        if self._front is not None:
            self._front.close()
        if self._server is not None:
            self._server.stop()
        if self._undo is not None:
            self._undo()

    @property
    def requests_served(self) -> int:
        assert self._server is not None
        return self._server.requests_served

    def set_latency(self, seconds: float) -> None:
        assert self._server is not None
        set_latency(self._server, seconds)

    def trim(self) -> None:
        """Drop moto's references to every model instance it made, then collect garbage: no state changes.

        moto tracks each instance of its models for its dashboard until a reset, including the copy of every item
        each Scan page returns: without this, each Scan audit leaves a copy of the whole table behind, and the
        garbage collector has more to walk on every later run.
        """
        from moto.core.model_instances import reset_model_data

        reset_model_data()
        gc.collect()


def value_bytes(value: Dict[str, Any]) -> int:
    """A DynamoDB attribute value's size, by AWS's item-size rules."""
    ((kind, raw),) = value.items()
    if kind == "S":
        return len(raw.encode("utf-8"))
    if kind == "N":
        digits = raw.lstrip("-+").split("e")[0].split("E")[0].replace(".", "").strip("0") or "0"
        return math.ceil(len(digits) / 2) + 1
    if kind == "B":
        return len(raw) if isinstance(raw, (bytes, bytearray)) else len(raw) * 3 // 4
    if kind in ("BOOL", "NULL"):
        return 1
    if kind in ("SS", "NS", "BS"):
        return sum(value_bytes({kind[0]: element}) for element in raw)
    if kind == "L":
        return 3 + sum(1 + value_bytes(element) for element in raw)
    if kind == "M":
        return 3 + sum(1 + len(name.encode("utf-8")) + value_bytes(element) for name, element in raw.items())
    raise BenchmarkError(f"unknown attribute type {kind!r}")


def item_bytes(item: Dict[str, Dict[str, Any]]) -> int:
    """An item's size as DynamoDB meters it: attribute names plus values."""
    return sum(len(name.encode("utf-8")) + value_bytes(value) for name, value in item.items())


def say(message: str = "") -> None:
    print(message, flush=True)


# -- the engine -------------------------------------------------------------------------------------------------
def _serve(connection: Any, partition_queries: bool, item_backups: bool, keep_alive: bool = False) -> None:
    """The child process of a :class:`ChildEngine`: a served engine answering the parent's commands."""
    with LocalEngine(partition_queries, item_backups, keep_alive) as engine:
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


class ChildEngine:
    """:class:`~pynamodb_counters.testing.server.ServedMoto` in a child process, as in :mod:`benchmarks.audit`.

    :param partition_queries: serve table Queries from the queried partition
      (:func:`benchmarks.audit.serve_queries_from_partition`) instead of moto's sort of the whole table.
    :param item_backups: transactions back up the items they touch, not whole tables
      (``ServedMoto(item_backups=True)``).
    :param keep_alive: serve it through waitress, which keeps connections open as DynamoDB does (werkzeug
      closes each one).
    """

    def __init__(self, *, partition_queries: bool = True, item_backups: bool = True, keep_alive: bool = False) -> None:
        self._options = (partition_queries, item_backups, keep_alive)
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


# -- streams ------------------------------------------------------------------------------------------------------
def stream_records(table_name: str) -> List[Dict[str, Any]]:
    """Every record of ``table_name``'s stream, from TRIM_HORIZON, as GetRecords returns them (moto in-process,
    with ``AWS_ACCOUNT_ID_ENDPOINT_MODE=disabled``)."""
    import boto3

    arn = boto3.client("dynamodb", region_name=REGION).describe_table(TableName=table_name)["Table"][
        "LatestStreamArn"]
    streams = boto3.client("dynamodbstreams", region_name=REGION)
    records: List[Dict[str, Any]] = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        while iterator:
            page = streams.get_records(ShardIterator=iterator, Limit=1000)
            records.extend(page["Records"])
            if not page["Records"]:
                break
            iterator = page.get("NextShardIterator")
    return records


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
