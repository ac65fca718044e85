"""
Benchmark: reading a post's like count: the stored counter against counting the likes.

::

    python -m benchmarks.reads                 # 10, 1,000 and 10,000 likes, 5 ms per request: about 1 minute
    python -m benchmarks.reads --quick         # fewer repetitions
    python -m benchmarks.reads --json r.json

On the served moto engine (in a child process). Three posts get 10, 1,000 and 10,000 likes, written with
``bulk_save()`` (so each like carries the write id a counted save stores). Each post also gets **16 counter
shards**: sharded counters are being built, and are not in the library yet, so they are modelled as 16 plain
items with distinct partition keys (``POST#...#SHARD#00`` to ``#15``) whose values sum to the count, read with
one BatchGetItem. Then, with a fixed latency in front of every request (5 ms by default), it reads each count
``--repeat`` times, round-robin, three ways, all strongly consistent:

* **counter**: one GetItem of the post (``Post.get(..., consistent_read=True).like_tally``);
* **16 shards**: one BatchGetItem of the 16 shard items, summed;
* **counting Query**: ``Like.count(pk, Like.sk.startswith("LIKE#"), consistent_read=True)``: a Query with
  ``Select=COUNT``, one request per 1 MB of likes.

Every read must return the right count, or the benchmark fails. It reports the requests each read made (served by
the engine), the median and 90th-percentile time, and the read capacity by the cost model
(:func:`pynamodb_counters.costs.read_units`) on the real item sizes: a GetItem rounds the item up to 4 KB, a
BatchGetItem rounds up *each* item, and a Query rounds up the total size of the items it reads, per 1 MB page,
whatever ``Select=COUNT`` returns. The eventually consistent figure is half.
"""
from __future__ import annotations

import argparse
import gc
import math
import statistics
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from benchmarks._models import CounterShard, Like, Post
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
from benchmarks.audit import PAGE_BYTES, paged_read_units
from pynamodb_counters import skip_counting
from pynamodb_counters.bulk import bulk_save
from pynamodb_counters.costs import read_units

SHARDS = 16


def shard_keys(pk: str) -> List[Tuple[str, str]]:
    return [(f"{pk}#SHARD#{n:02d}", "COUNTER") for n in range(SHARDS)]


def seed(counts: Sequence[int]) -> Dict[int, Dict[str, Any]]:
    """One post per count, its likes (bulk_save) and its 16 shards; returns the sizes as stored."""
    posts: Dict[int, Dict[str, Any]] = {}
    with skip_counting():
        with Post.batch_write() as batch:
            for count in counts:
                batch.save(Post(pk=f"POST#R{count:05d}", sk="META", like_tally=0, bookmark_count=0))
        with CounterShard.batch_write() as batch:
            for count in counts:
                for n, (pk, sk) in enumerate(shard_keys(f"POST#R{count:05d}")):
                    batch.save(CounterShard(pk=pk, sk=sk, like_tally=count // SHARDS + (n < count % SHARDS)))
    for count in counts:
        pk = f"POST#R{count:05d}"
        likes = [Like(pk=pk, sk=f"LIKE#USER#{n:05d}", liked_at=1764460800 + n * 7 % 86400) for n in range(count)]
        result = bulk_save(likes)
        if len(result.added) != count:
            raise BenchmarkError(f"seeding {pk}: {len(result.added)} of {count} likes added")
        posts[count] = {"pk": pk}
    connection = Post._get_connection()
    for count, post in posts.items():  # the sizes as stored (a raw consistent Query and GetItems)
        post["post_bytes"] = item_bytes(connection.get_item(post["pk"], range_key="META",
                                                            consistent_read=True)["Item"])
        post["shard_bytes"] = [item_bytes(connection.get_item(pk, range_key=sk, consistent_read=True)["Item"])
                               for pk, sk in shard_keys(post["pk"])]
        like_bytes = []
        start = None
        while True:
            page = connection.query(post["pk"], Like.sk.startswith("LIKE#"), consistent_read=True,
                                    exclusive_start_key=start)
            like_bytes += [item_bytes(item) for item in page.get("Items", [])]
            start = page.get("LastEvaluatedKey")
            if not start:
                break
        if len(like_bytes) != count:
            raise BenchmarkError(f"{post['pk']} has {len(like_bytes)} likes stored, not {count}")
        post["likes_bytes"] = sum(like_bytes)
        post["like_bytes_mean"] = sum(like_bytes) / count if count else 0.0
    return posts


def readers(pk: str) -> Dict[str, Callable[[], int]]:
    keys = shard_keys(pk)
    return {
        "counter: GetItem": lambda: Post.get(pk, "META", consistent_read=True).like_tally,
        f"{SHARDS} shards: BatchGetItem": lambda: int(sum(s.like_tally for s in CounterShard.batch_get(
            keys, consistent_read=True))),
        "counting Query (Select=COUNT)": lambda: Like.count(pk, Like.sk.startswith("LIKE#"), consistent_read=True),
    }


def model_units(method: str, post: Dict[str, Any]) -> float:
    """RCU of one strongly consistent read by the cost model."""
    if method.startswith("counter"):
        return read_units(post["post_bytes"])
    if "shards" in method:
        return sum(read_units(size) for size in post["shard_bytes"])
    return paged_read_units(post["likes_bytes"])


def run(options: argparse.Namespace) -> Dict[str, Any]:
    counts = options.children
    repeat = options.repeat or (5 if options.quick else 20)
    say(f"reads benchmark: a like count at {', '.join(f'{c:,}' for c in counts)} likes, read {repeat} times each "
        f"way at {options.latency * 1000:g} ms per request; {describe_machine()}")
    started_all = time.perf_counter()
    with ChildEngine() as engine:
        point_models_at([Post, Like, CounterShard], engine.endpoint_url)
        Post.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
        started = time.perf_counter()
        before = engine.requests_served
        posts = seed(counts)
        say(f"seeded {sum(counts):,} likes in {time.perf_counter() - started:.1f} s "
            f"({engine.requests_served - before} requests, no latency)")
        for count in counts:  # warm up every path, outside the timing
            for read in readers(posts[count]["pk"]).values():
                read()
        engine.set_latency(options.latency)
        samples: Dict[Tuple[int, str], List[float]] = {}
        requests: Dict[Tuple[int, str], List[int]] = {}
        reads = [(count, method, read) for count in counts for method, read in readers(posts[count]["pk"]).items()]
        for repetition in range(repeat):
            engine.trim()  # outside the timing: moto's tracked copies of the items read, then a collection
            gc.collect()
            shift = repetition % len(reads)  # round-robin, starting one read further each time
            for count, method, read in reads[shift:] + reads[:shift]:
                served = engine.requests_served
                started = time.perf_counter()
                value = read()
                seconds = time.perf_counter() - started
                made = engine.requests_served - served
                if value != count:
                    raise BenchmarkError(f"{method} of a post with {count} likes read {value}")
                samples.setdefault((count, method), []).append(seconds)
                requests.setdefault((count, method), []).append(made)
        engine.set_latency(0.0)
    records = []
    for (count, method), times in samples.items():
        post = posts[count]
        units = model_units(method, post)
        ordered = sorted(times)
        records.append({
            "likes": count, "method": method, "requests": statistics.median(requests[(count, method)]),
            "rcu_consistent": units, "rcu_eventual": units / 2, "median_ms": statistics.median(times) * 1000,
            "p90_ms": ordered[min(len(ordered) - 1, math.ceil(0.9 * len(ordered)) - 1)] * 1000,
            "like_bytes_mean": post["like_bytes_mean"], "likes_bytes": post["likes_bytes"],
            "post_bytes": post["post_bytes"], "shard_bytes_max": max(post["shard_bytes"]),
            "query_pages": max(1, math.ceil(post["likes_bytes"] / PAGE_BYTES)),
        })
    say()
    say(f"one like count, strongly consistent, {options.latency * 1000:g} ms per request, {repeat} reads each:")
    say(table(["likes", "read", "requests", "RCU (model)", "RCU, eventual", "median ms", "p90 ms"],
              [[f"{r['likes']:,}", r["method"], f"{r['requests']:g}", f"{r['rcu_consistent']:g}",
                f"{r['rcu_eventual']:g}", f"{r['median_ms']:.1f}", f"{r['p90_ms']:.1f}"] for r in records],
              align="llrrrrr"))
    sizes = {count: posts[count] for count in counts}
    say("item sizes as stored: " + "; ".join(
        f"{count:,} likes: {p['likes_bytes']:,} B ({p['like_bytes_mean']:.0f} B a like)" for count, p in sizes.items())
        + f"; a post {max(p['post_bytes'] for p in sizes.values())} B, a shard "
        f"{max(max(p['shard_bytes']) for p in sizes.values())} B")
    total_seconds = time.perf_counter() - started_all
    say(f"whole benchmark {total_seconds:.1f} s")
    return {"reads": {"children": counts, "repeat": repeat, "latency_s": options.latency, "shards": SHARDS,
                      "rows": records, "total_seconds": total_seconds}}


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.reads",
                                     description="Reading a like count: one GetItem of the counter, a "
                                     "BatchGetItem of 16 shards, or a counting Query; RCU by the cost model and "
                                     "time on the served moto engine.",
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--children", type=int, nargs="+", default=[10, 1000, 10000], help="likes per post")
    parser.add_argument("--latency", type=float, default=0.005, help="seconds of fixed delay per request")
    parser.add_argument("--repeat", type=int, default=None, help="reads per post and method (default 20, quick 5)")
    add_common_options(parser)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run_main(run, parser(), argv)


if __name__ == "__main__":
    raise SystemExit(main())
