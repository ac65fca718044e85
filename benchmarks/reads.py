"""
Benchmark: reading a post's like count: the stored counter against counting the likes.

::

    python -m benchmarks.reads                 # 10, 1,000 and 10,000 likes, 5 ms per request: about 1 minute
    python -m benchmarks.reads --quick         # fewer repetitions
    python -m benchmarks.reads --json r.json

On the served moto engine (in a child process). Three posts get 10, 1,000 and 10,000 likes, written with
``bulk_save()`` (so each like carries the write id a counted save stores). Three more posts get as many likes
without this library, as a user stores them who counts them by Query: ``PlainLike`` items (a plain PynamoDB
model, no write id) written with PynamoDB's ``batch_write()``. Three more posts, of a model whose like
counter is **sharded over 16 items** (``CounterField(shards=16)``, ``ShardedPost`` in ``benchmarks/_models.py``),
get as many likes each, the same way: their ``save()`` creates the 15 shard items beside the post item (shard 0),
and each like is counted on the shard its key picks. Then, with a fixed latency in front of every request (5 ms by
default), it reads each count ``--repeat`` times, round-robin, three ways, all strongly consistent:

* **counter**: one GetItem of the post (``Post.get(..., consistent_read=True).like_tally``);
* **16 shards**: ``ShardedPost.like_tally.total(key, consistent_read=True)``: one BatchGetItem of the 16 shard
  items, summed;
* **counting Query** (the baseline, what a user writes without this library): ``PlainLike.count(pk,
  PlainLike.sk.startswith("LIKE#"), consistent_read=True)`` of the plain likes: a Query with ``Select=COUNT``, one
  request per 1 MB of likes.

Every read must return the right count, and ``total()`` must make one request, or the benchmark fails.
It reports the requests each read made (served by
the engine), the median and 90th-percentile time, and the read capacity by the cost model
(:func:`pynamodb_counters.read_units`) on the real item sizes: a GetItem rounds the item up to 4 KB, a
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

from benchmarks._models import SHARDS, Like, PlainLike, Post, ShardedLike, ShardedPost
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
from pynamodb_counters import bulk_save, read_units, skip_counting
from pynamodb_counters.declare._shards import shard_key

MODELS = [Post, Like, ShardedPost, ShardedLike, PlainLike]
SHARDED = f"{SHARDS} shards: total()"


def stored_likes(pk: str) -> List[int]:
    """The sizes of the likes stored in ``pk``'s partition (a raw, consistent, paged Query)."""
    connection = Post._get_connection()
    sizes: List[int] = []
    start = None
    while True:
        page = connection.query(pk, Like.sk.startswith("LIKE#"), consistent_read=True, exclusive_start_key=start)
        sizes += [item_bytes(item) for item in page.get("Items", [])]
        start = page.get("LastEvaluatedKey")
        if not start:
            return sizes


def seed(counts: Sequence[int], engine: ChildEngine) -> Dict[int, Dict[str, Any]]:
    """Per count: one post and one sharded post, each with that many likes (bulk_save), and one partition of as
    many plain likes (PynamoDB's batch_write); returns the sizes as stored, the sharded post's count on each shard,
    and the requests its ``save()`` made."""
    posts: Dict[int, Dict[str, Any]] = {}
    with skip_counting():
        with Post.batch_write() as batch:
            for count in counts:
                batch.save(Post(pk=f"POST#R{count:05d}", sk="META", like_tally=0, bookmark_count=0))
    for count in counts:
        pk, sharded_pk = f"POST#R{count:05d}", f"POST#S{count:05d}"
        served = engine.requests_served
        ShardedPost(pk=sharded_pk, sk="META").save()  # creates its 15 shard items
        save_requests = engine.requests_served - served
        for model, key in ((Like, pk), (ShardedLike, sharded_pk)):
            likes = [model(pk=key, sk=f"LIKE#USER#{n:05d}", liked_at=1764460800 + n * 7 % 86400)
                     for n in range(count)]
            result = bulk_save(likes)
            if len(result.added) != count:
                raise BenchmarkError(f"seeding {key}: {len(result.added)} of {count} likes added")
        plain_pk = f"POST#Q{count:05d}"
        with PlainLike.batch_write() as batch:  # without this library: no write id, no counter
            for n in range(count):
                batch.save(PlainLike(pk=plain_pk, sk=f"LIKE#USER#{n:05d}", liked_at=1764460800 + n * 7 % 86400))
        posts[count] = {"pk": pk, "sharded_pk": sharded_pk, "plain_pk": plain_pk,
                        "sharded_save_requests": save_requests}
    connection = Post._get_connection()
    attribute = ShardedPost.like_tally.attr_name
    for count, post in posts.items():  # the sizes as stored (raw consistent GetItems and Queries)
        post["post_bytes"] = item_bytes(connection.get_item(post["pk"], range_key="META",
                                                            consistent_read=True)["Item"])
        keys = [shard_key((post["sharded_pk"], "META"), n) for n in range(SHARDS)]
        shards = [connection.get_item(hash_key, range_key=range_key, consistent_read=True).get("Item")
                  for hash_key, range_key in keys]
        if not all(shards):
            raise BenchmarkError(f"{post['sharded_pk']}: {sum(not s for s in shards)} of its {SHARDS} shard items "
                                 f"are missing after its save()")
        post["shard_bytes"] = [item_bytes(item) for item in shards if item]
        post["shard_counts"] = [int(item.get(attribute, {}).get("N", 0)) for item in shards if item]
        if sum(post["shard_counts"]) != count:
            raise BenchmarkError(f"{post['sharded_pk']}: its shards hold {sum(post['shard_counts'])}, not {count}")
        for key, name in ((post["sharded_pk"], None), (post["pk"], "likes"), (post["plain_pk"], "plain_likes")):
            like_bytes = stored_likes(key)
            if len(like_bytes) != count:
                raise BenchmarkError(f"{key} has {len(like_bytes)} likes stored, not {count}")
            if name:
                post[f"{name}_bytes"] = sum(like_bytes)
                post[f"{name[:-1]}_bytes_mean"] = sum(like_bytes) / count if count else 0.0
    return posts


def readers(post: Dict[str, Any]) -> Dict[str, Callable[[], int]]:
    pk, sharded_key, plain_pk = post["pk"], (post["sharded_pk"], "META"), post["plain_pk"]
    return {
        "counter: GetItem": lambda: Post.get(pk, "META", consistent_read=True).like_tally,
        SHARDED: lambda: ShardedPost.like_tally.total(sharded_key, consistent_read=True),
        "counting Query (Select=COUNT)": lambda: PlainLike.count(plain_pk, PlainLike.sk.startswith("LIKE#"),
                                                                 consistent_read=True),
    }


def model_units(method: str, post: Dict[str, Any]) -> float:
    """RCU of one strongly consistent read by the cost model."""
    if method.startswith("counter"):
        return read_units(post["post_bytes"])
    if "shards" in method:
        return sum(read_units(size) for size in post["shard_bytes"])
    return paged_read_units(post["plain_likes_bytes"])


def run(options: argparse.Namespace) -> Dict[str, Any]:
    counts = options.children
    repeat = options.repeat or (5 if options.quick else 20)
    say(f"reads benchmark: a like count at {', '.join(f'{c:,}' for c in counts)} likes, read {repeat} times each "
        f"way at {options.latency * 1000:g} ms per request; {describe_machine()}")
    started_all = time.perf_counter()
    with ChildEngine() as engine:
        point_models_at(MODELS, engine.endpoint_url)
        Post.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
        started = time.perf_counter()
        before = engine.requests_served
        posts = seed(counts, engine)
        say(f"seeded 3 x {sum(counts):,} likes in {time.perf_counter() - started:.1f} s "
            f"({engine.requests_served - before} requests, no latency)")
        for count in counts:  # warm up every path, outside the timing
            for read in readers(posts[count]).values():
                read()
        engine.set_latency(options.latency)
        samples: Dict[Tuple[int, str], List[float]] = {}
        requests: Dict[Tuple[int, str], List[int]] = {}
        reads = [(count, method, read) for count in counts for method, read in readers(posts[count]).items()]
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
                if method == SHARDED and made != 1:
                    raise BenchmarkError(f"{method} of a post with {count} likes made {made} requests, not 1")
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
            "plain_like_bytes_mean": post["plain_like_bytes_mean"], "plain_likes_bytes": post["plain_likes_bytes"],
            "post_bytes": post["post_bytes"], "shard_bytes": post["shard_bytes"],
            "shard_counts": post["shard_counts"], "sharded_save_requests": post["sharded_save_requests"],
            "query_pages": max(1, math.ceil(post["plain_likes_bytes"] / PAGE_BYTES)),
        })
    say()
    say(f"one like count, strongly consistent, {options.latency * 1000:g} ms per request, {repeat} reads each:")
    say(table(["likes", "read", "requests", "RCU (model)", "RCU, eventual", "median ms", "p90 ms"],
              [[f"{r['likes']:,}", r["method"], f"{r['requests']:g}", f"{r['rcu_consistent']:g}",
                f"{r['rcu_eventual']:g}", f"{r['median_ms']:.1f}", f"{r['p90_ms']:.1f}"] for r in records],
              align="llrrrrr"))
    sizes = {count: posts[count] for count in counts}
    shard_sizes = [size for p in sizes.values() for size in p["shard_bytes"][1:]]
    say("item sizes as stored: " + "; ".join(
        f"{count:,} likes: {p['likes_bytes']:,} B ({p['like_bytes_mean']:.0f} B a like), without this library "
        f"{p['plain_likes_bytes']:,} B ({p['plain_like_bytes_mean']:.0f} B)" for count, p in sizes.items())
        + f"; a post {max(p['post_bytes'] for p in sizes.values())} B; a sharded post's own item (shard 0) "
        f"{max(p['shard_bytes'][0] for p in sizes.values())} B, its shards 1-{SHARDS - 1} "
        f"{min(shard_sizes)}-{max(shard_sizes)} B")
    say("likes per shard item: " + "; ".join(
        f"{count:,} likes: {min(p['shard_counts'])}-{max(p['shard_counts'])}, {p['shard_counts'][0]} on the post "
        f"item (all that ShardedPost.get(...).like_tally holds)" for count, p in sizes.items()))
    say(f"a sharded post's first save(): {', '.join(str(p['sharded_save_requests']) for p in sizes.values())} "
        f"requests (UpdateItem, BatchGetItem of its shards, TransactWriteItems creating {SHARDS - 1} shard items)")
    total_seconds = time.perf_counter() - started_all
    say(f"whole benchmark {total_seconds:.1f} s")
    return {"reads": {"children": counts, "repeat": repeat, "latency_s": options.latency, "shards": SHARDS,
                      "rows": records, "total_seconds": total_seconds}}


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.reads",
                                     description="Reading a like count: one GetItem of the counter, a sharded "
                                     "counter's total() (one BatchGetItem of 16 shards), or a counting Query; RCU by "
                                     "the cost model and time on the served moto engine.",
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
