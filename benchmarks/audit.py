"""
Benchmark: ``audit()`` of many parents against the recount a user writes without this library, in one run on
the served moto engine.

::

    python -m benchmarks.audit                      # 2,000 parents, 0 to 50 likes each, 5 ms per request
    python -m benchmarks.audit --keys               # also audits of explicit parents= keys (nearly twice as long)
    python -m benchmarks.audit --parents 200        # a quick run
    python -m benchmarks.audit --json figures.json  # also write the figures as JSON

It starts its own :class:`~pynamodb_counters.testing.server.ServedMoto` on 127.0.0.1, in a child process, and
seeds a ``Social`` table without latency: posts with 0 to ``--max-children`` likes, exact counters except a
planted ~5% drift. Then it puts a fixed ``--latency`` in front of every request and times, round-robin:

* ``plain recount``, **the baseline**: what a user writes without this library to find drift, on the plain
  PynamoDB models ``PlainPost`` and ``PlainLike`` (``benchmarks/_models.py``: no ``CounterMixin``; the same table
  and items) through their own connections: a sequential, strongly consistent ``PlainPost.scan(PlainPost.sk ==
  "META")`` of the posts and, for each post, ``PlainLike.count(pk, PlainLike.sk.startswith("LIKE#"),
  consistent_read=True)`` compared with its stored ``like_tally``;
* ``audit(Post.like_tally, ...)`` in each of its modes: ``scan, sequential`` (``segments=1``, the default
  audit), ``scan, N segments`` (a parallel Scan, ``segments=N``, one thread per segment) and, with ``--keys``,
  ``keys, sequential`` and ``keys, N workers``: explicit ``parents=`` keys (one GetItem each instead of the
  Scan), ``workers=1`` and ``workers=N``.

Each mode runs ``--repeat`` times, round-robin. The table shows the median wall time, parents per second, the
ratio against ``plain recount`` (the baseline) and against ``scan, sequential``, and the requests the engine
served. It shows read capacity twice: as the server reported it (``AuditReport.read_units``; for the plain
recount, the ``ConsumedCapacity`` of the responses to its two PynamoDB clients; moto reports a flat 1 unit per
Query or Scan page and 0.5 per GetItem) and as the cost model (:func:`pynamodb_counters.read_units`) gives it for
the sizes of the items written. Every run of every mode must check every post once and find exactly the planted
drift, or the benchmark fails with exit status 1.

Stock moto answers each Query by sorting the whole table, which makes the engine's CPU, not the latency,
dominate at this size. The engine process therefore serves table Queries from the partition
(:func:`serve_queries_from_partition`); ``--stock-moto`` turns that off.

Nothing reaches AWS: the models point at the local engine, and the benchmark sets dummy credentials.
"""
from __future__ import annotations

import argparse
import gc
import itertools
import json
import math
import os
import platform
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from benchmarks._models import PlainLike, PlainPost
from benchmarks._shared import (
    BenchmarkError,
    ChildEngine,
    LocalEngine,
    item_bytes,
    say,
    use_dummy_credentials,
)
from pynamodb_counters import AuditReport, CounterField, CounterMixin, audit, counted_by, read_units, skip_counting

Key = Tuple[str, str]

REGION = "us-east-1"
#: DynamoDB stops a Query or Scan page after 1 MB of items read.
PAGE_BYTES = 1024 * 1024
#: GetItems timed to measure the engine's round trip, with and without the latency.
CALIBRATION_REQUESTS = 20
#: The baseline: what a user writes without this library (:func:`plain_recount`).
PLAIN = "plain recount"
#: The audit as it runs by default, and the baseline before the plain recount.
SEQUENTIAL = "scan, sequential"


# -- the models: the README's Social table ---------------------------------------------------------------------
class Post(CounterMixin, Model):
    class Meta:
        table_name = "Social"
        region = REGION
        host: Optional[str] = None  # pointed at the engine by point_models_at()

    pk = UnicodeAttribute(hash_key=True)  # "POST#00042"
    sk = UnicodeAttribute(range_key=True)  # "META"
    like_tally = CounterField()

    @classmethod
    def audit_filter(cls) -> Any:
        return cls.sk == "META"  # the likes share the table: the Scan keeps only the posts


class Like(CounterMixin, Model):
    class Meta:
        table_name = "Social"
        region = REGION
        host: Optional[str] = None

    pk = UnicodeAttribute(hash_key=True)  # "POST#00042"
    sk = UnicodeAttribute(range_key=True)  # "LIKE#USER#0007"
    liked_at = NumberAttribute()
    post = counted_by(Post.like_tally, key=lambda like: (like.pk, "META"), prefix="LIKE#")


def point_models_at(host: str, pool: int) -> None:
    """Point this module's models and the plain baseline's (``PlainPost``, ``PlainLike``) at the engine."""
    for model in (Post, Like, PlainPost, PlainLike):
        meta: Any = model.Meta
        meta.host = host
        meta.max_pool_connections = pool  # the audit's threads share one connection pool per model
        model._connection = None  # PynamoDB caches one connection per model


Engine = Union[LocalEngine, ChildEngine]


# -- seeding and sizes ----------------------------------------------------------------------------------------


@dataclass
class Sizes:
    """The size of every item seeded, as written (its serialised attributes)."""

    post_bytes: Dict[Key, int] = field(default_factory=dict)
    children_bytes: Dict[Key, int] = field(default_factory=dict)  # the sum of each post's likes
    like_bytes: List[int] = field(default_factory=list)

    @property
    def table_bytes(self) -> int:
        return sum(self.post_bytes.values()) + sum(self.like_bytes)

    def summary(self) -> Dict[str, Any]:
        posts = list(self.post_bytes.values())
        return {"posts": len(posts), "likes": len(self.like_bytes), "table_bytes": self.table_bytes,
                "post_bytes_mean": round(statistics.mean(posts), 1), "post_bytes_max": max(posts),
                "like_bytes_mean": round(statistics.mean(self.like_bytes), 1) if self.like_bytes else 0.0,
                "like_bytes_max": max(self.like_bytes, default=0)}


@dataclass
class Seeded:
    children: Dict[Key, int]
    planted: Dict[Key, Tuple[Optional[int], int]]  # {key: (stored, actual)}, stored None: attribute missing
    sizes: Sizes
    seconds: float
    requests: int


def seed(engine: Engine, parents: int, max_children: int, drift: float, rng: random.Random) -> Seeded:
    """``parents`` posts with 0 to ``max_children`` likes each and exact counters, except about ``drift`` of
    them: counters too high, too low, non-zero without likes, or missing (a counter added to an old model).
    Uncounted, batched writes: 25 items a request."""
    started, before = time.perf_counter(), engine.requests_served
    keys = [(f"POST#{n:05d}", "META") for n in range(parents)]
    children = {key: rng.randint(0, max_children) for key in keys}
    planted: Dict[Key, Tuple[Optional[int], int]] = {}
    for index, key in enumerate(sorted(rng.sample(keys, round(parents * drift)))):
        actual = children[key]
        if index % 3 == 0:
            planted[key] = (None, actual)
        elif actual >= 2:
            planted[key] = (actual + rng.choice([-2, -1, 1, 3]), actual)
        else:
            planted[key] = (actual + rng.choice([1, 4]), actual)
    sizes = Sizes()
    with skip_counting():
        with Post.batch_write() as batch:
            for key in keys:
                stored = planted[key][0] if key in planted else children[key]
                post = Post(pk=key[0], sk=key[1], like_tally=stored if stored is not None else 0)
                batch.save(post)
                attributes = post.serialize()
                if stored is None:  # removed below
                    del attributes[Post.like_tally.attr_name]
                sizes.post_bytes[key] = item_bytes(attributes)
        with Like.batch_write() as batch:
            for key, count in children.items():
                sizes.children_bytes[key] = 0
                for user in range(count):
                    like = Like(pk=key[0], sk=f"LIKE#USER#{user:04d}", liked_at=1764460800 + rng.randrange(86400))
                    batch.save(like)
                    size = item_bytes(like.serialize())
                    sizes.like_bytes.append(size)
                    sizes.children_bytes[key] += size
    connection = Post._get_connection()
    for (pk, sk), (stored, _) in planted.items():
        if stored is None:
            connection.update_item(pk, range_key=sk, actions=[Post.like_tally.remove()])
    return Seeded(children, planted, sizes, time.perf_counter() - started, engine.requests_served - before)


def measure_sizes() -> Sizes:
    """Every item of the table as stored, sized (a raw consistent Scan: slow, 10 s at 50,000 items; a check)."""
    connection = Post._get_connection()
    sizes = Sizes()
    start = None
    while True:
        page = connection.scan(consistent_read=True, exclusive_start_key=start)
        for item in page.get("Items", []):
            size, pk, sk = item_bytes(item), item["pk"]["S"], item["sk"]["S"]
            if sk == "META":
                sizes.post_bytes[(pk, sk)] = size
            elif sk.startswith("LIKE#"):
                sizes.like_bytes.append(size)
                sizes.children_bytes[(pk, "META")] = sizes.children_bytes.get((pk, "META"), 0) + size
        start = page.get("LastEvaluatedKey")
        if not start:
            return sizes


def paged_read_units(total_bytes: float) -> float:
    """RCU of a consistent Query or Scan reading ``total_bytes``: rounded up to 4 KB per 1 MB page."""
    units, left = 0.0, total_bytes
    while True:
        page = min(left, PAGE_BYTES)
        units += read_units(math.ceil(page))
        left -= page
        if left <= 0:
            return units


def model_read_units(sizes: Sizes, seeded: Seeded, *, segments: int = 1, by_keys: bool = False,
                     rereads: bool = True) -> float:
    """What the cost model bills for one audit (or plain recount) of these items.

    Per parent, one consistent ``Select=COUNT`` Query of its likes; with ``rereads``, one more consistent read of
    every parent (the audit reads the parents it counted again, to prove each held still around its count; the
    plain recount does not).
    A Scan adds the Scan pages: every item of the table is read, posts and likes alike, split evenly over the
    segments (page boundaries move the figure by at most one unit per page). An audit of explicit keys adds one
    read per parent instead.
    """
    units = sum(paged_read_units(sizes.children_bytes.get(key, 0)) for key in seeded.children)
    if rereads:
        units += sum(read_units(size) for size in sizes.post_bytes.values())
    if by_keys:
        units += sum(read_units(size) for size in sizes.post_bytes.values())
    else:
        units += segments * paged_read_units(sizes.table_bytes / segments)
    return units


# -- timing ---------------------------------------------------------------------------------------------------
@dataclass
class Mode:
    name: str
    kind: str  # "plain", "scan" or "keys"
    threads: int
    runs: List[float] = field(default_factory=list)
    requests: List[int] = field(default_factory=list)
    server_units: List[float] = field(default_factory=list)
    estimated: bool = False
    model_units: float = 0.0

    @property
    def median(self) -> float:
        return statistics.median(self.runs)


@dataclass
class Found:
    """What one timed run found, whichever mode ran it: the drifts, the parents checked, the capacity reported."""

    drifts: List[Tuple[Key, Tuple[Any, int]]]  # [(key, (stored, actual))], stored None: attribute missing
    checked: int
    read_units: float
    estimated: bool = False  # part of read_units is the audit's own estimate

    @classmethod
    def from_report(cls, report: AuditReport) -> Found:
        drifts = [(drift.key, (drift.stored, drift.actual)) for drift in report.drifts]
        return cls(drifts, report.parents_checked, report.read_units, report.read_units_estimated)


class ServerUnits:
    """Adds up the read capacity the engine reports in each response to a botocore client (an ``after-call``
    handler): for the plain recount, what :attr:`AuditReport.read_units` gives for an audit. PynamoDB asks for
    ``ConsumedCapacity`` on every request but does not total it."""

    def __init__(self) -> None:
        self.units = 0.0

    def attach(self, client: Any) -> None:
        client.meta.events.register("after-call.dynamodb", self)

    def __call__(self, parsed: Dict[str, Any], **_: Any) -> None:
        capacity = parsed.get("ConsumedCapacity")
        if isinstance(capacity, dict):
            self.units += float(capacity.get("CapacityUnits", 0.0))


def plain_recount(units: ServerUnits) -> Found:
    """What a user writes without this library to find drift: plain PynamoDB, through the models' own connections.

    A sequential, strongly consistent Scan of the posts (``sk == "META"``, as ``Post.audit_filter()``), and for
    each post a strongly consistent counting Query of its likes (``Select=COUNT``), compared with the stored
    ``like_tally``. ``units`` is attached to both models' clients and reset here: it only reads their responses.
    """
    units.units = 0.0
    drifts: List[Tuple[Key, Tuple[Any, int]]] = []
    checked = 0
    for post in PlainPost.scan(PlainPost.sk == "META", consistent_read=True):
        checked += 1
        actual = PlainLike.count(post.pk, PlainLike.sk.startswith("LIKE#"), consistent_read=True)
        if post.like_tally != actual:
            drifts.append(((post.pk, post.sk), (post.like_tally, actual)))
    return Found(drifts, checked, units.units)


def verify(run: Found, seeded: Seeded, mode: str) -> None:
    """Fail loudly unless the run checked every parent once and found exactly the planted drift."""
    found = dict(run.drifts)
    problems = []
    if run.checked != len(seeded.children):
        problems.append(f"checked {run.checked} parents, seeded {len(seeded.children)}")
    if len(found) != len(run.drifts):
        problems.append(f"{len(run.drifts) - len(found)} parents reported twice")
    missed = {k: v for k, v in seeded.planted.items() if found.get(k) != v}
    extra = {k: v for k, v in found.items() if k not in seeded.planted}
    if missed:
        problems.append(f"{len(missed)} planted drifts missed or wrong, e.g. {sorted(missed.items())[:3]}")
    if extra:
        problems.append(f"{len(extra)} drifts reported that were not planted, e.g. {sorted(extra.items())[:3]}")
    if problems:
        raise BenchmarkError(f"{mode} did not find exactly the planted drift: " + "; ".join(problems))


def run_mode(engine: Engine, mode: Mode, keys: Sequence[Key], units: ServerUnits) -> Tuple[float, Found, int]:
    """One timed run of ``mode``: its wall time, what it found and the requests the engine served meanwhile."""
    before = engine.requests_served
    started = time.perf_counter()
    result: Union[Found, AuditReport]
    if mode.kind == "plain":
        result = plain_recount(units)
    elif mode.kind == "scan":
        result = audit(Post.like_tally, segments=mode.threads)
    else:
        result = audit(Post.like_tally, parents=keys, workers=mode.threads)
    wall = time.perf_counter() - started
    found = result if isinstance(result, Found) else Found.from_report(result)
    return wall, found, engine.requests_served - before


def round_trip(samples: int = CALIBRATION_REQUESTS) -> float:
    """Median seconds of one GetItem against the engine, as the client sees it."""
    connection = Post._get_connection()
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        connection.get_item("POST#00000", range_key="META", consistent_read=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def count_versus_counter(sizes: Sizes, max_children: int) -> List[Dict[str, Any]]:
    """RCU to read one post's like count: a counting Query of its likes against one GetItem of the counter."""
    like = statistics.mean(sizes.like_bytes) if sizes.like_bytes else 0.0
    post = max(sizes.post_bytes.values())
    rows = []
    for likes in sorted({max_children, 1000, 10000}):
        rows.append({"likes": likes, "like_bytes": round(like, 1),
                     "query_rcu": paged_read_units(likes * like),
                     "query_rcu_at_200_bytes": paged_read_units(likes * 200),
                     "query_requests": max(1, math.ceil(likes * like / PAGE_BYTES)),
                     "getitem_rcu": read_units(post), "post_bytes": post})
    return rows


# -- output ---------------------------------------------------------------------------------------------------


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = "  ".join("-" * w for w in widths)
    out = [line, "  ".join(h.ljust(w) for h, w in zip(headers, widths)), line]
    out += ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    out.append(line)
    return "\n".join(out)


def parse(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.audit",
                                     description="audit() of many parents, sequential and parallel, against "
                                     "the recount a user writes with plain PynamoDB, on the served moto engine with "
                                     "a fixed per-request latency.",
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--parents", type=int, default=2000, help="posts to seed and audit")
    parser.add_argument("--max-children", type=int, default=50, help="each post gets 0 to this many likes")
    parser.add_argument("--latency", type=float, default=0.005,
                        help="seconds of fixed delay per request while timing (none while seeding)")
    parser.add_argument("--segments", type=int, default=8, help="Scan segments of the parallel Scan audit")
    parser.add_argument("--workers", type=int, default=None,
                        help="threads of the parallel audit of explicit keys (default: %(default)s, as many "
                        "as --segments)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per mode; the table shows the median")
    parser.add_argument("--drift", type=float, default=0.05, help="fraction of counters seeded wrong")
    parser.add_argument("--seed", type=int, default=7, help="random seed of the data")
    parser.add_argument("--keys", action="store_true",
                        help="also time audits of explicit parents= keys, sequential and with --workers threads "
                        "(nearly doubles the run: each parent's children are read)")
    parser.add_argument("--stock-moto", action="store_true",
                        help="keep moto's own Query, which sorts the whole table on every call (O(table) engine "
                        "CPU per parent: over an hour at the default size; use --parents 200 --max-children 5)")
    parser.add_argument("--in-process", action="store_true",
                        help="run the engine in this process, as the test suite does (it then shares the GIL "
                        "with the audit's threads)")
    parser.add_argument("--check-sizes", action="store_true",
                        help="read every item back (a Scan) and check its size against the item as written")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON to PATH")
    options = parser.parse_args(argv)
    if options.parents < 1 or options.max_children < 0 or options.latency < 0 or options.segments < 1:
        parser.error("--parents and --segments are at least 1, --max-children and --latency at least 0")
    if options.repeat < 1 or not 0 <= options.drift <= 1 or (options.workers is not None and options.workers < 1):
        parser.error("--repeat and --workers are at least 1, --drift between 0 and 1")
    if options.workers is None:
        options.workers = options.segments
    return options


def main(argv: Optional[Sequence[str]] = None) -> int:
    options = parse(argv)
    use_dummy_credentials()
    total_started = time.perf_counter()
    import moto
    import pynamodb

    engine_kind = ("in this process" if options.in_process else "in a child process") + (
        ", stock moto Query" if options.stock_moto else ", Query served from the partition")
    figures: Dict[str, Any] = {
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "moto": moto.__version__, "pynamodb": pynamodb.__version__},
        "options": {k: v for k, v in vars(options).items() if k != "json"},
        "engine": engine_kind,
    }
    say(f"audit benchmark: {options.parents} parents, 0 to {options.max_children} likes each, "
        f"{options.latency * 1000:g} ms per request; engine {engine_kind}")
    say(f"{os.cpu_count()} CPUs, Python {platform.python_version()}, moto {moto.__version__}, "
        f"PynamoDB {pynamodb.__version__}")
    partition_queries = not options.stock_moto
    engine: Engine = (LocalEngine(partition_queries) if options.in_process
                      else ChildEngine(partition_queries=partition_queries, item_backups=False))
    with engine:
        point_models_at(engine.endpoint_url, pool=max(10, options.segments, options.workers) + 2)
        Post.create_table(billing_mode="PAY_PER_REQUEST", wait=True)

        seeded = seed(engine, options.parents, options.max_children, options.drift, random.Random(options.seed))
        likes = sum(seeded.children.values())
        say(f"seeded {options.parents} posts and {likes} likes ({len(seeded.planted)} counters drifted) in "
            f"{seeded.seconds:.1f} s, {seeded.requests} requests, no latency")
        sizes = seeded.sizes
        summary = sizes.summary()
        if options.check_sizes:
            started = time.perf_counter()
            stored = measure_sizes()
            if (stored.post_bytes, stored.children_bytes) != (sizes.post_bytes, {k: v for k, v in
                                                                               sizes.children_bytes.items() if v}):
                raise BenchmarkError("the items as stored differ in size from the items as written")
            say(f"checked the size of every stored item in {time.perf_counter() - started:.1f} s")
        say(f"{summary['posts'] + summary['likes']} items, {summary['table_bytes']} bytes: a post "
            f"{summary['post_bytes_mean']} B, a like {summary['like_bytes_mean']} B on average")

        keys = sorted(seeded.children)
        started = time.perf_counter()
        audit(Post.like_tally, parents=keys[:100], workers=2)  # warm both paths up, outside the timing
        audit(Post.like_tally, limit=100, segments=2)
        # the plain path too; not scan(limit=100), which sends Limit=100: ~25 Scan pages to find 100 posts
        for post in itertools.islice(PlainPost.scan(PlainPost.sk == "META", consistent_read=True), 100):
            PlainLike.count(post.pk, PlainLike.sk.startswith("LIKE#"), consistent_read=True)
        units = ServerUnits()  # the plain recount's capacity, from the responses to its two clients
        for model in (PlainPost, PlainLike):
            units.attach(model._get_connection().connection.client)
        bare = round_trip()
        engine.set_latency(options.latency)
        delayed = round_trip()
        say(f"warm-up {time.perf_counter() - started:.1f} s; one GetItem round trip: {bare * 1000:.1f} ms "
            f"without latency, {delayed * 1000:.1f} ms with")

        modes = [Mode(PLAIN, "plain", 1),
                 Mode(SEQUENTIAL, "scan", 1),
                 Mode(f"scan, {options.segments} segments", "scan", options.segments)]
        if options.keys:
            modes += [Mode("keys, sequential", "keys", 1),
                      Mode(f"keys, {options.workers} workers", "keys", options.workers)]
        timed_started = time.perf_counter()
        for repetition in range(options.repeat):
            for mode in modes:  # round-robin: a slow patch of the machine hits every mode alike
                engine.trim()
                gc.collect()
                wall, found, requests = run_mode(engine, mode, keys, units)
                verify(found, seeded, mode.name)
                mode.runs.append(wall)
                mode.requests.append(requests)
                mode.server_units.append(found.read_units)
                mode.estimated = mode.estimated or found.estimated
                say(f"  run {repetition + 1}/{options.repeat}, {mode.name}: {wall:.2f} s, {requests} requests, "
                    f"found the {len(found.drifts)} planted drifts")
        timed_seconds = time.perf_counter() - timed_started
        engine.set_latency(0.0)

    baseline, sequential = modes[0].median, modes[1].median
    rows, records = [], []
    for mode in modes:
        mode.model_units = model_read_units(sizes, seeded, segments=mode.threads if mode.kind == "scan" else 1,
                                            by_keys=mode.kind == "keys", rereads=mode.kind != "plain")
        median_requests = statistics.median(mode.requests)
        server_units = statistics.median(mode.server_units)
        records.append({"mode": mode.name, "kind": mode.kind, "threads": mode.threads, "runs_s": mode.runs,
                        "median_s": mode.median, "parents_per_s": options.parents / mode.median,
                        "ratio_vs_plain_recount": baseline / mode.median,
                        "ratio_vs_scan_sequential": sequential / mode.median, "requests": median_requests,
                        "rcu_server": server_units, "rcu_server_estimated_in_part": mode.estimated,
                        "rcu_cost_model": mode.model_units})
        rows.append([mode.name, f"{mode.median:.2f}", f"{options.parents / mode.median:.0f}",
                     f"{baseline / mode.median:.2f}x", f"{sequential / mode.median:.2f}x", f"{median_requests:.0f}",
                     f"{server_units:.0f}{'*' if mode.estimated else ''}", f"{mode.model_units:.0f}"])
    say()
    say(f"audit of {options.parents} parents ({likes} likes), {options.latency * 1000:g} ms per request, "
        f"median of {options.repeat} runs; the baseline is {PLAIN} (plain PynamoDB):")
    say(table(["mode", "wall s", "parents/s", f"vs {PLAIN}", f"vs {SEQUENTIAL}", "requests", "RCU server",
               "RCU model"], rows))
    say("RCU server: as moto reports it (a flat 1 per Query or Scan page, 0.5 per GetItem): AuditReport.read_units,")
    say("  or for the plain recount the ConsumedCapacity of its responses"
        + ("; * partly the audit's own estimate" if any(m.estimated for m in modes) else "") + ".")
    say("RCU model: pynamodb_counters.read_units for the sizes of the items seeded.")

    comparison = count_versus_counter(sizes, options.max_children)
    say()
    say("reading one post's like count, strongly consistent (cost model):")
    say(table(["likes", "counting Query RCU", "at 200 B a like", "Query requests", "GetItem of the counter RCU"],
              [[f"{r['likes']}", f"{r['query_rcu']:.0f}", f"{r['query_rcu_at_200_bytes']:.0f}",
                f"{r['query_requests']}", f"{r['getitem_rcu']:.0f}"] for r in comparison]))
    say(f"(likes of {comparison[0]['like_bytes']} B on average as seeded; posts of up to "
        f"{comparison[0]['post_bytes']} B)")

    total_seconds = time.perf_counter() - total_started
    say()
    say(f"seeding {seeded.seconds:.1f} s, timed runs {timed_seconds:.1f} s, whole benchmark {total_seconds:.1f} s")
    figures.update({
        "seeding": {"seconds": seeded.seconds, "requests": seeded.requests, "posts": options.parents,
                    "likes": likes, "drifted": len(seeded.planted)},
        "sizes": summary,
        "round_trip_ms": {"without_latency": bare * 1000, "with_latency": delayed * 1000},
        "baseline": PLAIN,
        "modes": records,
        "count_versus_counter": comparison,
        "timed_seconds": timed_seconds,
        "total_seconds": total_seconds,
    })
    if options.json:
        with open(options.json, "w", encoding="utf-8") as out:
            json.dump(figures, out, indent=2)
            out.write("\n")
        say(f"figures written to {options.json}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchmarkError as error:
        print(f"benchmark failed: {error}", file=sys.stderr)
        sys.exit(1)
