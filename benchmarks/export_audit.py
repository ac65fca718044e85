"""
Benchmark: ``audit(Post.like_tally, export=...)``, an audit from a table export, against the bare floor of its
work (decompressing and parsing the same files), on Spark ``local[2]`` beside it, and against the live Scan audit
on the served engine.

::

    python -m benchmarks.export_audit                  # 1,000,000 items in 16 files, then 2,000 posts served
    python -m benchmarks.export_audit --quick          # 100,000 items, 200 posts served, 1 run each
    python -m benchmarks.export_audit --no-spark       # without the Spark figure
    python -m benchmarks.export_audit --json e.json    # also write the figures as JSON

**Part 1, the export.** ``--posts`` posts (100,000) and about ``--likes`` likes each (9: 900,000 likes) are
written as raw DynamoDB items with :func:`pynamodb_counters.testing.write_export`, in the layout an
``ExportTableToPointInTime`` writes, dealt over ``--files`` gzipped data files (16): the items of one post land in
several files, as in an export of a partition DynamoDB split (``--layout partitions``: each post's items whole in
one file, as DynamoDB writes a partition it did not split). 1% of the posts (``--drift``) store a ``like_tally``
that differs from their likes. The live table, on the served moto engine in a child process, holds those drifted
posts and their likes only: the export audit reads the live table for its candidates alone (a GetItem and a Query
of each candidate's partition), so the rest of the table would never be read. Then, round-robin, ``--repeat``
times, each run in a fresh Python process:

* ``floor, 1 process`` and ``floor, N processes``: **the baselines**, the bare floor of the work. Each data file
  is read whole, ``gzip.decompress``-ed, and every line parsed with ``json.loads`` (``orjson.loads`` where orjson
  is installed, as the library's reader does), nothing else: no grouping, no checks. Once in one process, once
  dealt over ``--workers`` forked processes (a ``multiprocessing`` pool, as many as the local engine's);
* ``local engine``: ``audit(Post.like_tally, export=path, engine="local", workers=N)``. The ``progress=``
  callback splits its time: *reading* (until the export's candidates are known: every file read, checked
  against its MD5 and count, tallied and merged, every parent judged) and *verifying* (the candidates recounted
  on the live table);
* ``spark local[2]``: the same audit with ``engine="spark"`` on a ``SparkSession`` built by the run, master
  ``local[2]``, ``PYSPARK_PYTHON`` this interpreter; timed with and without building the session,
  ``--spark-repeat`` times (1: a run takes over a minute), in the first rounds. Left out, and said so, when
  pyspark is not importable or with ``--no-spark``.

Each process reports its peak RSS (``getrusage``: its own, and its largest child's, the forked workers, once
reaped); this process samples the whole process tree's RSS and PSS every 0.1 s (``/proc``), which sees workers,
the JVM and Spark's Python workers at once. Every audit run must report exactly the planted drift, as candidates
and as drifts, and every parent checked; every floor run must parse every item. Otherwise: exit status 1.

**Part 2, served.** A table of ``--served-posts`` posts (2,000) with their likes, of the same shape and drift, on
the served engine with ``--latency`` (5 ms) in front of every request, round-robin ``--repeat`` times in this
process: the live Scan audit ``audit(Post.like_tally)`` (sequential, and with ``--segments`` segments),
``testing.export_table(Post, dir)`` then ``audit(Post.like_tally, export=...)``, and the export audit alone on
an export taken beforehand (in AWS the export is taken by the service, and bills no read capacity).

Nothing reaches AWS: the models point at the local engine, and the benchmark sets dummy credentials.
"""
from __future__ import annotations

import argparse
import gc
import gzip
import importlib
import importlib.util
import json
import multiprocessing
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from benchmarks._models import FEEDERS, LIKE_FEED, SEQUENCE, WRITE_ID, Like, Post
from benchmarks._shared import (
    BenchmarkError,
    ChildEngine,
    add_common_options,
    describe_machine,
    item_bytes,
    point_models_at,
    run_main,
    say,
    table,
)
from pynamodb_counters import AuditReport, ExportProgress, audit, read_units
from pynamodb_counters.testing import export_table, write_export

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLE_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/Social"
MEMORY_GOAL_MB = 500.0
TIME_GOAL = 2.0  # the local engine within 2x the floor
SAMPLE_SECONDS = 0.1
FLOOR_1, LOCAL, SPARK = "floor, 1 process", "local engine", "spark local[2]"
SCAN, EXPORT_AND_AUDIT, EXPORT_ONLY = "live Scan audit", "export_table + export audit", "export audit alone"
PAGE_BYTES = 1024 * 1024
Key = Tuple[str, str]
Planted = Dict[Key, Tuple[int, int]]  # {key: (stored, actual)}


def floor_n(workers: int) -> str:
    return f"floor, {workers} processes"


# -- the items ------------------------------------------------------------------------------------------------
@dataclass
class Table:
    """Posts and their likes as raw DynamoDB items: each post's like count, and the drift planted."""

    likes: List[int]
    planted: Planted
    pk_width: int

    def pk(self, number: int) -> str:
        return f"POST#{number:0{self.pk_width}d}"

    @property
    def items(self) -> int:
        return len(self.likes) + sum(self.likes)

    def post_items(self, number: int, seed: int) -> Iterator[Dict[str, Any]]:
        """One post's item then its likes', as counted writes leave them (sequence, feed, write ids)."""
        rng = random.Random(seed * 1_000_003 + number)
        pk, likes = self.pk(number), self.likes[number]
        stored = self.planted.get((pk, "META"), (likes, likes))[0]
        post: Dict[str, Any] = {"pk": {"S": pk}, "sk": {"S": "META"}, "like_tally": {"N": str(stored)}}
        if likes:
            post[SEQUENCE] = {"N": str(likes)}
            post[FEEDERS] = {"SS": [LIKE_FEED]}
        yield post
        for user in range(likes):
            yield {"pk": {"S": pk}, "sk": {"S": f"LIKE#USER#{user:06d}"},
                   "liked_at": {"N": str(1764460800 + rng.randrange(86400))},
                   WRITE_ID: {"S": str(uuid.UUID(int=rng.getrandbits(128), version=4))}}

    def all_items(self, seed: int) -> Iterator[Dict[str, Any]]:
        for number in range(len(self.likes)):
            yield from self.post_items(number, seed)

    def by_partition(self, seed: int, files: int) -> Iterator[Dict[str, Any]]:
        """The items in the order that makes :func:`write_export` (item ``n`` to file ``n % files``) put each pair
        of posts, whole, in one file: pairs ``f``, ``f + files``, ... in file ``f``. Each pair has the same number
        of items (:func:`make_table`), so the files stay aligned while every file has pairs left; past that, the
        rest is dealt in turn."""
        def pairs(first: int) -> Iterator[Dict[str, Any]]:
            for number in range(first * 2, len(self.likes), files * 2):
                yield from self.post_items(number, seed)
                if number + 1 < len(self.likes):
                    yield from self.post_items(number + 1, seed)

        streams = [pairs(file) for file in range(files)]
        while streams:
            for stream in list(streams):
                item = next(stream, None)
                if item is None:
                    streams.remove(stream)
                else:
                    yield item

    def drifted_items(self, seed: int) -> Iterator[Dict[str, Any]]:
        """The drifted posts' items only, the same as in :meth:`all_items`."""
        for pk, _ in sorted(self.planted):
            yield from self.post_items(int(pk.split("#")[1]), seed)


def make_table(posts: int, mean_likes: int, drift: float, rng: random.Random) -> Table:
    """``posts`` posts of 0 to ``2 * mean_likes`` likes, exactly ``posts * mean_likes`` likes in all (in pairs of
    posts, one ``d`` above the mean, the other ``d`` below), and ``drift`` of them with a counter off."""
    likes = [mean_likes] * posts
    for first in range(0, posts - 1, 2):
        delta = rng.randint(-mean_likes, mean_likes)
        likes[first], likes[first + 1] = mean_likes + delta, mean_likes - delta
    width = max(5, len(str(posts - 1)))
    planted: Planted = {}
    for number in sorted(rng.sample(range(posts), round(posts * drift))):
        actual = likes[number]
        stored = actual + rng.choice([-2, -1, 1, 3]) if actual >= 2 else actual + rng.choice([1, 4])
        planted[(f"POST#{number:0{width}d}", "META")] = (stored, actual)
    return Table(likes, planted, width)


def put_raw(items: Iterator[Dict[str, Any]]) -> int:
    """Write raw items to the live ``Social`` table, 25 a BatchWriteItem; how many."""
    client = Post._get_connection().connection.client
    written, batch = 0, []

    def flush() -> None:
        requests: Dict[str, Any] = {"Social": [{"PutRequest": {"Item": item}} for item in batch]}
        while requests:
            requests = client.batch_write_item(RequestItems=requests).get("UnprocessedItems") or {}
        batch.clear()

    for item in items:
        batch.append(item)
        written += 1
        if len(batch) == 25:
            flush()
    if batch:
        flush()
    return written


# -- what a run found, checked ----------------------------------------------------------------------------------
def drift_rows(drifts: Sequence[Any]) -> List[List[Any]]:
    return sorted([d.key[0], d.key[1], None if d.stored is None else int(d.stored), d.actual] for d in drifts)


def check_report(found: Dict[str, Any], planted: Planted, posts: int, mode: str) -> None:
    """Fail unless the run checked every parent and found exactly the planted drift, as candidates and drifts."""
    expected = sorted([pk, sk, stored, actual] for (pk, sk), (stored, actual) in planted.items())
    problems = []
    if found["parents_checked"] != posts:
        problems.append(f"checked {found['parents_checked']} parents, wrote {posts}")
    for what in ("candidates", "drifts"):
        got = [list(row) for row in found[what]]
        if got != expected:
            missed = [row for row in expected if row not in got]
            extra = [row for row in got if row not in expected]
            problems.append(f"{what}: {len(got)} reported, {len(expected)} planted; missed {missed[:3]}, "
                            f"not planted {extra[:3]}")
    if problems:
        raise BenchmarkError(f"{mode} did not find exactly the planted drift: " + "; ".join(problems))


# -- the measured runs, each in a fresh process -----------------------------------------------------------------
def _loads() -> Tuple[Callable[[Any], Any], str]:
    """The parser the library's reader uses: orjson where installed, else the standard library's."""
    try:
        return importlib.import_module("orjson").loads, "orjson"
    except ImportError:
        return json.loads, "json"


def parse_file(path: str) -> int:
    """The floor of reading one data file: decompress it, parse every line. Its number of items."""
    loads = _loads()[0]
    with open(path, "rb") as stream:
        text = gzip.decompress(stream.read()).decode("utf-8")
    count = 0
    for line in text.split("\n"):
        if line:
            loads(line)
            count += 1
    return count


def data_files(export: str) -> List[str]:
    folder = os.path.join(export, "data")
    return sorted(os.path.join(folder, name) for name in os.listdir(folder))


def measure(options: argparse.Namespace) -> Dict[str, Any]:
    """One timed run of ``options.measure``, in this (fresh) process; prints its figures as one JSON line."""
    mode, result = options.measure, {}
    if mode == "floor":
        paths = data_files(options.export)
        started = time.perf_counter()
        if options.workers == 1:
            items = sum(map(parse_file, paths))
        else:
            with multiprocessing.get_context("fork").Pool(options.workers) as pool:
                items = sum(pool.imap_unordered(parse_file, paths))
        result = {"seconds": time.perf_counter() - started, "items": items}
    else:
        point_models_at([Post, Like], options.endpoint, pool=12)
        session, start_seconds = None, 0.0
        if mode == "spark":
            started = time.perf_counter()
            from pyspark.sql import SparkSession

            session = (SparkSession.builder.master("local[2]").appName("export-audit-benchmark")
                       .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                       .getOrCreate())
            session.sparkContext.setLogLevel("ERROR")
            start_seconds = time.perf_counter() - started
        marks: Dict[str, float] = {}

        def progress(state: ExportProgress) -> None:
            if state.candidates is not None and "read" not in marks:
                marks["read"] = time.perf_counter()

        started = time.perf_counter()
        if session is not None:
            report: AuditReport = audit(Post.like_tally, export=options.export, engine="spark", spark=session,
                                        progress=progress)
        else:
            report = audit(Post.like_tally, export=options.export, engine="local", workers=options.workers,
                           progress=progress)
        ended = time.perf_counter()
        if session is not None:
            session.stop()
        read = marks.get("read", ended) - started
        result = {"seconds": ended - started, "read_seconds": read, "verify_seconds": ended - started - read,
                  "start_seconds": start_seconds, "parents_checked": report.parents_checked,
                  "read_units": report.read_units, "candidates": drift_rows(report.candidates),
                  "drifts": drift_rows(report.drifts)}
    result["maxrss_self_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result["maxrss_children_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print("RESULT " + json.dumps(result), flush=True)
    return {}


def _tree(pid: int) -> List[int]:
    """``pid`` and its descendants, from ``/proc/<pid>/task/<tid>/children``."""
    found, stack = [pid], [pid]
    while stack:
        parent = stack.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{parent}/task/{task}/children") as stream:
                    children = [int(each) for each in stream.read().split()]
            except OSError:
                continue
            found += children
            stack += children
    return found


def _memory(pids: Sequence[int]) -> Tuple[float, float]:
    """The summed RSS and PSS of ``pids``, in MB (a process gone meanwhile counts nothing)."""
    rss = pss = 0.0
    page = os.sysconf("SC_PAGE_SIZE")
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm") as stream:
                rss += int(stream.read().split()[1]) * page / 2**20
            with open(f"/proc/{pid}/smaps_rollup") as stream:
                for line in stream:
                    if line.startswith("Pss:"):
                        pss += int(line.split()[1]) / 1024
                        break
        except (OSError, ValueError, IndexError):
            continue
    return rss, pss


def run_child(arguments: List[str], environment: Dict[str, str]) -> Dict[str, Any]:
    """Run one measured mode in a fresh process, sampling its process tree's memory; its figures."""
    command = [sys.executable, "-m", "benchmarks.export_audit", *arguments]
    with tempfile.TemporaryFile("w+") as errors:
        child = subprocess.Popen(command, cwd=ROOT, env=environment, stdout=subprocess.PIPE, stderr=errors,
                                 text=True)
        peak_rss = peak_pss = 0.0
        while child.poll() is None:
            rss, pss = _memory(_tree(child.pid))
            peak_rss, peak_pss = max(peak_rss, rss), max(peak_pss, pss)
            time.sleep(SAMPLE_SECONDS)
        output = child.stdout.read() if child.stdout else ""
        errors.seek(0)
        stderr = errors.read()
    lines = [line for line in output.splitlines() if line.startswith("RESULT ")]
    if child.returncode != 0 or not lines:
        raise BenchmarkError(f"{' '.join(arguments)} failed (exit status {child.returncode}):\n{stderr[-3000:]}")
    result: Dict[str, Any] = json.loads(lines[-1][len("RESULT "):])
    result.update(tree_rss_mb=peak_rss, tree_pss_mb=peak_pss)
    return result


@dataclass
class Mode:
    name: str
    arguments: List[str]
    runs: List[Dict[str, Any]] = field(default_factory=list)

    def median(self, name: str) -> float:
        return float(statistics.median(run[name] for run in self.runs))

    def spread(self, name: str) -> str:
        values = [run[name] for run in self.runs]
        return f"{min(values):.2f}-{max(values):.2f}"


def child_environment() -> Dict[str, str]:
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join([ROOT, *filter(None, [environment.get("PYTHONPATH")])])
    environment["PYSPARK_PYTHON"] = environment["PYSPARK_DRIVER_PYTHON"] = sys.executable
    if "JAVA_HOME" not in environment:
        java = shutil.which("java")
        if java:
            environment["JAVA_HOME"] = os.path.dirname(os.path.dirname(os.path.realpath(java)))
    return environment


def spark_missing(options: argparse.Namespace) -> Optional[str]:
    if options.no_spark:
        return "left out (--no-spark)"
    if importlib.util.find_spec("pyspark") is None:
        return f"left out: pyspark is not importable by {sys.executable}"
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        return "left out: no Java (JAVA_HOME unset, no java on PATH)"
    return None


def part_export(options: argparse.Namespace, engine: ChildEngine, directory: str) -> Dict[str, Any]:
    workers = options.workers
    data = make_table(options.posts, options.likes, options.drift, random.Random(options.seed))
    say(f"part 1: {options.posts:,} posts, {data.items - options.posts:,} likes ({data.items:,} items), "
        f"{len(data.planted):,} counters drifted, {options.files} data files, layout {options.layout}")
    started = time.perf_counter()
    items = (data.by_partition(options.seed, options.files) if options.layout == "partitions"
             else data.all_items(options.seed))
    export = write_export(directory, items, table_arn=TABLE_ARN, files=options.files,
                          export_id="01764633600000-benchmk")
    written = time.perf_counter() - started
    paths = data_files(export)
    compressed = sum(os.path.getsize(path) for path in paths)
    raw = sum(len(gzip.decompress(open(path, "rb").read())) for path in paths)
    say(f"wrote the export with write_export() in {written:.1f} s: {compressed / 2**20:.1f} MB gzipped, "
        f"{raw / 2**20:.1f} MB of DynamoDB JSON")

    Post.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
    started = time.perf_counter()
    live = put_raw(data.drifted_items(options.seed))
    say(f"live table: the {len(data.planted):,} drifted posts and their likes, {live:,} items, in "
        f"{time.perf_counter() - started:.1f} s")

    parser_name = _loads()[1]
    modes = [Mode(FLOOR_1, ["--measure", "floor", "--workers", "1"]),
             Mode(floor_n(workers), ["--measure", "floor", "--workers", str(workers)]),
             Mode(LOCAL, ["--measure", "local", "--workers", str(workers)])]
    skipped = spark_missing(options)
    if skipped is None:
        modes.append(Mode(SPARK, ["--measure", "spark"]))
    else:
        say(f"{SPARK}: {skipped}")
    common = ["--export", export, "--endpoint", engine.endpoint_url]
    environment = child_environment()
    timed_started = time.perf_counter()
    for repetition in range(options.repeat):
        for mode in modes:  # round-robin: a slow patch of the machine hits every mode alike
            if mode.name == SPARK and repetition >= options.spark_repeat:
                continue
            engine.trim()
            gc.collect()
            run = run_child(mode.arguments + common, environment)
            if mode.arguments[1] == "floor":
                if run["items"] != data.items:
                    raise BenchmarkError(f"{mode.name} parsed {run['items']} items, wrote {data.items}")
                run["read_seconds"] = run["seconds"]
                found = f"parsed {run['items']:,} items"
            else:
                check_report(run, data.planted, options.posts, mode.name)
                found = (f"read {run['read_seconds']:.2f} s + verified {run['verify_seconds']:.2f} s, found the "
                         f"{len(run['drifts'])} planted drifts")
                if mode.name == SPARK:
                    found = f"session {run['start_seconds']:.1f} s, " + found
            mode.runs.append(run)
            runs = options.spark_repeat if mode.name == SPARK else options.repeat
            say(f"  run {len(mode.runs)}/{runs}, {mode.name}: {run['seconds']:.2f} s, {found}; peak "
                f"RSS {run['maxrss_self_mb']:.0f} MB (+ largest child {run['maxrss_children_mb']:.0f} MB), "
                f"tree PSS {run['tree_pss_mb']:.0f} MB")
    timed = time.perf_counter() - timed_started
    Post.delete_table()

    floor1, floorn = modes[0].median("seconds"), modes[1].median("seconds")
    records, rows = [], []
    for mode in modes:
        read, total = mode.median("read_seconds"), mode.median("seconds")
        record: Dict[str, Any] = {
            "mode": mode.name, "runs": mode.runs, "seconds": total, "read_seconds": read,
            "items_per_s": data.items / read, "read_vs_floor_n": read / floorn, "read_vs_floor_1": read / floor1,
            "total_vs_floor_n": total / floorn, "maxrss_self_mb": max(r["maxrss_self_mb"] for r in mode.runs),
            "maxrss_children_mb": max(r["maxrss_children_mb"] for r in mode.runs),
            "tree_rss_mb": max(r["tree_rss_mb"] for r in mode.runs),
            "tree_pss_mb": max(r["tree_pss_mb"] for r in mode.runs)}
        processes = 1 if mode.name == FLOOR_1 else workers
        record["rss_bound_mb"] = record["maxrss_self_mb"] + (
            processes * record["maxrss_children_mb"] if mode.name != SPARK and processes > 1 else 0.0)
        verify, start = "", ""
        if mode.arguments[1] != "floor":
            record.update(verify_seconds=mode.median("verify_seconds"), start_seconds=mode.median("start_seconds"),
                          read_units=mode.median("read_units"),
                          with_start_seconds=statistics.median(r["seconds"] + r["start_seconds"] for r in mode.runs))
            verify = f"{record['verify_seconds']:.2f}"
            if mode.name == SPARK:
                start = f"{record['start_seconds']:.2f}"
        records.append(record)
        memory = (f"{record['tree_pss_mb']:.0f} / {record['rss_bound_mb']:.0f}" if mode.name != SPARK
                  else f"{record['tree_pss_mb']:.0f} / -")
        rows.append([mode.name, f"{read:.2f} ({mode.spread('read_seconds')})", verify, start,
                     f"{total:.2f}", f"{data.items / read / 1000:.0f}k", f"{read / floorn:.2f}x",
                     f"{read / floor1:.2f}x", memory])
    say()
    say(f"{data.items:,} items in {options.files} files, median of {options.repeat} runs; the floors decompress "
        f"and parse ({parser_name}) every line, nothing else:")
    say(table(["mode", "read s (runs)", "verify s", "session s", "total s", "items/s", f"read vs {floor_n(workers)}",
               f"read vs {FLOOR_1}", "peak MB: tree PSS / RSS bound"], rows))
    say("read: until the export's candidates are known; verify: the candidates recounted on the live table")
    say("peak MB: the process tree's summed PSS, sampled every 0.1 s / getrusage: the process's peak RSS plus, for")
    say("  N forked processes, N times the largest child's (an upper bound: forked pages shared are counted again)")
    local = next(record for record in records if record["mode"] == LOCAL)
    memory_mb = max(local["tree_pss_mb"], local["tree_rss_mb"] if local["tree_pss_mb"] == 0 else 0.0)
    goals = {"time_ratio": local["read_vs_floor_n"], "time_goal": TIME_GOAL,
             "time_met": local["read_vs_floor_n"] <= TIME_GOAL, "total_ratio": local["total_vs_floor_n"],
             "memory_mb": memory_mb, "memory_bound_mb": local["rss_bound_mb"], "memory_goal_mb": MEMORY_GOAL_MB,
             "memory_met": memory_mb < MEMORY_GOAL_MB}
    say(f"goal, local engine within {TIME_GOAL:g}x the floor of {workers} processes: reading "
        f"{local['read_vs_floor_n']:.2f}x, {'met' if goals['time_met'] else 'NOT met'} (with verifying, "
        f"{local['total_vs_floor_n']:.2f}x)")
    say(f"goal, peak memory under {MEMORY_GOAL_MB:g} MB: tree PSS {memory_mb:.0f} MB, "
        f"{'met' if goals['memory_met'] else 'NOT met'} (RSS bound {local['rss_bound_mb']:.0f} MB)")
    spark = next((record for record in records if record["mode"] == SPARK), None)
    if spark is not None:
        say(f"{SPARK}: {spark['seconds']:.1f} s without building the session, {spark['with_start_seconds']:.1f} s "
            f"with it ({spark['start_seconds']:.1f} s): {spark['seconds'] / local['seconds']:.2f}x and "
            f"{spark['with_start_seconds'] / local['seconds']:.2f}x the local engine")
    return {"items": data.items, "posts": options.posts, "layout": options.layout, "likes": data.items - options.posts,
            "drifted": len(data.planted), "files": options.files, "workers": workers, "parser": parser_name,
            "export_mb": compressed / 2**20, "json_mb": raw / 2**20, "write_export_seconds": written,
            "live_items": live, "modes": records, "goals": goals, "spark": skipped or "measured",
            "timed_seconds": timed}


# -- part 2: the served engine --------------------------------------------------------------------------------
def paged_read_units(total_bytes: float) -> float:
    """RCU of a strongly consistent Scan reading ``total_bytes``: 4 KB units, in 1 MB pages."""
    units, left = 0.0, total_bytes
    while left > 0:
        page = min(left, PAGE_BYTES)
        units += read_units(int(page) + 1)
        left -= page
    return units


def part_served(options: argparse.Namespace, engine: ChildEngine, directory: str) -> Dict[str, Any]:
    data = make_table(options.served_posts, options.likes, options.drift, random.Random(options.seed + 1))
    Post.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
    started = time.perf_counter()
    put_raw(data.all_items(options.seed + 1))
    table_bytes = sum(item_bytes(item) for item in data.all_items(options.seed + 1))
    say()
    say(f"part 2: {options.served_posts:,} posts and {data.items - options.served_posts:,} likes served "
        f"({data.items:,} items, {table_bytes:,} bytes, {len(data.planted)} drifted), seeded in "
        f"{time.perf_counter() - started:.1f} s; {options.latency * 1000:g} ms per request")
    taken = export_table(Post, os.path.join(directory, "served-taken"), files=options.files)
    counter = [0]

    def scan(segments: int) -> Callable[[], AuditReport]:
        return lambda: audit(Post.like_tally, segments=segments)

    def export_and_audit() -> AuditReport:
        counter[0] += 1
        root = export_table(Post, os.path.join(directory, f"served-{counter[0]}"), files=options.files)
        return audit(Post.like_tally, export=root, engine="local", workers=options.workers)

    def export_alone() -> AuditReport:
        return audit(Post.like_tally, export=taken, engine="local", workers=options.workers)

    modes: List[Tuple[str, Callable[[], AuditReport]]] = [(SCAN + ", sequential", scan(1))]
    if options.segments > 1:
        modes.append((f"{SCAN}, {options.segments} segments", scan(options.segments)))
    modes += [(EXPORT_AND_AUDIT, export_and_audit), (EXPORT_ONLY, export_alone)]
    for _, run in modes:  # warm up every path once, without latency, outside the timing
        check_report(summary(run()), data.planted, options.served_posts, "warm-up")
    engine.set_latency(options.latency)
    runs: Dict[str, List[Tuple[float, int, float]]] = {name: [] for name, _ in modes}
    for repetition in range(options.repeat):
        for name, run in modes:
            engine.trim()
            gc.collect()
            before = engine.requests_served
            started = time.perf_counter()
            report = run()
            wall = time.perf_counter() - started
            requests = engine.requests_served - before
            check_report(summary(report), data.planted, options.served_posts, name)
            runs[name].append((wall, requests, report.read_units))
            say(f"  run {repetition + 1}/{options.repeat}, {name}: {wall:.2f} s, {requests} requests, "
                f"{report.read_units:g} RCU reported, found the {len(report.drifts)} planted drifts")
    engine.set_latency(0.0)
    Post.delete_table()

    scan_seconds = statistics.median(wall for wall, _, _ in runs[modes[0][0]])
    export_rcu = paged_read_units(table_bytes)
    records, rows = [], []
    for name, _ in modes:
        wall = statistics.median(w for w, _, _ in runs[name])
        requests = statistics.median(r for _, r, _ in runs[name])
        units = statistics.median(u for _, _, u in runs[name])
        extra = export_rcu if name == EXPORT_AND_AUDIT else 0.0
        records.append({"mode": name, "runs_s": [w for w, _, _ in runs[name]], "seconds": wall,
                        "ratio_vs_scan_sequential": scan_seconds / wall, "requests": requests,
                        "read_units_reported": units, "export_scan_rcu_model": extra})
        rows.append([name, f"{wall:.2f} ({min(w for w, _, _ in runs[name]):.2f}-"
                     f"{max(w for w, _, _ in runs[name]):.2f})", f"{scan_seconds / wall:.2f}x", f"{requests:.0f}",
                     f"{units:g}" + (f" + {extra:g} (export's Scan, model)" if extra else "")])
    say()
    say(f"{options.served_posts:,} posts served, {options.latency * 1000:g} ms per request, median of "
        f"{options.repeat} runs; ratio: the sequential Scan audit's time divided by the mode's (above 1: faster):")
    say(table(["mode", "wall s (runs)", f"vs {SCAN}, sequential", "requests", "RCU"], rows, align="lrrrl"))
    say("RCU: AuditReport.read_units (moto: a flat 1 per Query or Scan page, 0.5 per GetItem); export_table()'s")
    say("  consistent Scan stands in for ExportTableToPointInTime, which reads no capacity in AWS")
    return {"posts": options.served_posts, "items": data.items, "table_bytes": table_bytes,
            "drifted": len(data.planted), "latency_s": options.latency, "modes": records}


def summary(report: AuditReport) -> Dict[str, Any]:
    return {"parents_checked": report.parents_checked, "candidates": drift_rows(report.candidates or report.drifts),
            "drifts": drift_rows(report.drifts)}


def run(options: argparse.Namespace) -> Dict[str, Any]:
    if options.measure:
        return measure(options)
    if options.quick:
        options.posts = min(options.posts, 10_000)
        options.served_posts = min(options.served_posts, 200)
        options.repeat = options.spark_repeat = 1
    started = time.perf_counter()
    say(f"export audit benchmark: {describe_machine()}, {options.workers} workers")
    figures: Dict[str, Any] = {"options": {k: v for k, v in vars(options).items() if k not in ("json", "measure",
                                                                                            "export", "endpoint")}}
    directory = tempfile.mkdtemp(prefix="export-audit-")
    try:
        with ChildEngine(partition_queries=True, item_backups=False) as engine:
            point_models_at([Post, Like], engine.endpoint_url, pool=max(12, options.segments + 2))
            figures["export"] = part_export(options, engine, directory)
            if options.served_posts:
                figures["served"] = part_served(options, engine, directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    figures["total_seconds"] = time.perf_counter() - started
    say(f"\nwhole benchmark {figures['total_seconds']:.1f} s")
    return {"export_audit": figures}


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.export_audit",
                                     description="audit(export=...) of a 1,000,000-item export against the bare "
                                     "floor of reading it, on Spark local[2], and against the live Scan audit.",
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--posts", type=int, default=100_000, help="posts in the export")
    parser.add_argument("--likes", type=int, default=9, help="likes per post on average (0 to twice this)")
    parser.add_argument("--files", type=int, default=16, help="data files of the export")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                        help="processes of the local engine and of the parallel floor")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per mode; the tables show the median")
    parser.add_argument("--layout", choices=["dealt", "partitions"], default="dealt",
                        help="dealt: the items dealt over the files in turn (each post spread over several files, as "
                        "write_export deals them); partitions: each post's items whole in one file (as DynamoDB "
                        "writes an unsplit partition)")
    parser.add_argument("--drift", type=float, default=0.01, help="fraction of counters written wrong")
    parser.add_argument("--seed", type=int, default=7, help="random seed of the data")
    parser.add_argument("--no-spark", action="store_true", help="leave out the Spark local[2] runs")
    parser.add_argument("--spark-repeat", type=int, default=1,
                        help="timed Spark runs, in the first rounds (each builds its own session: about a minute)")
    parser.add_argument("--served-posts", type=int, default=2000,
                        help="posts of the served comparison (0: leave it out)")
    parser.add_argument("--latency", type=float, default=0.005, help="seconds per request in the served comparison")
    parser.add_argument("--segments", type=int, default=8,
                        help="Scan segments of the parallel live audit in the served comparison (1: leave it out)")
    parser.add_argument("--measure", choices=["floor", "local", "spark"], help=argparse.SUPPRESS)
    parser.add_argument("--export", help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    add_common_options(parser)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run_main(run, parser(), argv)


if __name__ == "__main__":
    raise SystemExit(main())
