"""
Benchmark: 1,000 counted likes from 100 tasks on one event loop (``await like.asave()``), against the same likes
from 16 threads calling ``save()``, and one by one (``save()`` in a loop: the baseline a user writes without
threads or async), behind an engine that adds 20 ms to every request (a network round trip)::

    python -m benchmarks.async_likes                  # about 1 minute
    python -m benchmarks.async_likes --quick          # 300 likes
    python -m benchmarks.async_likes --keep-alive     # connections kept open, as DynamoDB keeps them (waitress)

The served engine runs in a process of its own (``ChildEngine``), its latency outside its one-request-at-a-time
lock; each path runs in a fresh process of its own, on posts of its own, and reports its wall time, its CPU time
per like (the whole process: every thread) and its peak resident memory. Every model sets
``Meta.max_pool_connections = 100`` (botocore's default, 10, would make 16 threads and 100 tasks queue for
connections), as a user running this many writes at once would. The async path's first like on its loop is paid
before the clock starts, as the threads' first requests are (both make their clients then). Each process checks
that every post's counter equals its likes.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Optional, Sequence, Tuple

from benchmarks._shared import BenchmarkError, ChildEngine, add_common_options, describe_machine, run_main, say, table

PATHS = ("async, 100 tasks", "16 threads", "one by one")
BASELINE = "one by one"
POSTS = 10
LATENCY = 0.020
POOL = 100


def _models(endpoint: str) -> Any:
    from benchmarks._models import Like, Post
    from benchmarks._shared import point_models_at

    point_models_at([Post, Like], endpoint, pool=POOL)
    return Post, Like


def _likes(path: str, likes: int) -> List[Any]:
    from benchmarks._models import Like

    tag = PATHS.index(path)
    return [Like(pk=f"POST#{tag}-{n % POSTS}", sk=f"LIKE#USER#{n:05d}", liked_at=n) for n in range(likes)]


def run_path(path: str, endpoint: str, likes: int, tasks: int, threads: int) -> Dict[str, Any]:
    """One path, in this process: its figures."""
    Post, Like = _models(endpoint)
    tag = PATHS.index(path)
    for n in range(POSTS):
        Post(pk=f"POST#{tag}-{n}", sk="META").save()
    warm = Like(pk=f"POST#{tag}-0", sk="LIKE#WARM", liked_at=0)
    todo = _likes(path, likes)
    if path == PATHS[0]:
        async def run() -> Tuple[float, float]:
            await warm.asave()  # the loop's clients made before the clocks start, as the threads' below
            queue: asyncio.Queue[Any] = asyncio.Queue()
            for like in todo:
                queue.put_nowait(like)

            async def worker() -> None:
                while not queue.empty():
                    await queue.get_nowait().asave()

            cpu = time.process_time()
            start = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(tasks)))
            return time.perf_counter() - start, cpu

        wall, cpu = asyncio.run(run())
    else:
        warm.save()
        cpu = time.process_time()
        start = time.perf_counter()
        if path == PATHS[1]:
            with ThreadPoolExecutor(threads) as pool:
                for _ in pool.map(lambda like: like.save(), todo):
                    pass
        else:
            for like in todo:
                like.save()
        wall = time.perf_counter() - start
    cpu = time.process_time() - cpu
    counted = {n: Post.like_tally.total((f"POST#{tag}-{n}", "META"), consistent_read=True) for n in range(POSTS)}
    expected = {n: sum(1 for i in range(likes) if i % POSTS == n) + (n == 0) for n in range(POSTS)}
    if counted != expected:
        raise BenchmarkError(f"{path}: counters {counted} != likes {expected}")
    return {"wall_s": wall, "cpu_ms_per_like": 1000 * cpu / likes,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def run(options: argparse.Namespace) -> Dict[str, Any]:
    if options.path:  # a child: one path, its figures as JSON on stdout
        print(json.dumps(run_path(options.path, options.endpoint, options.likes, options.tasks, options.threads)))
        return {}
    likes = 300 if options.quick else options.likes
    say(f"async likes benchmark: {likes} likes on {POSTS} posts, {LATENCY * 1000:.0f} ms added to every request, "
        f"{options.tasks} tasks / {options.threads} threads, max_pool_connections={POOL}, connections "
        f"{'kept open' if options.keep_alive else 'closed after each request'}; {describe_machine()}")
    figures: Dict[str, Dict[str, Any]] = {}
    with ChildEngine(keep_alive=options.keep_alive) as engine:
        from benchmarks._models import Post
        from benchmarks._shared import point_models_at

        point_models_at([Post], engine.endpoint_url)
        Post.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
        engine.set_latency(LATENCY)
        for path in PATHS:
            done = subprocess.run([sys.executable, "-m", "benchmarks.async_likes", "--path", path, "--endpoint",
                                   engine.endpoint_url, "--likes", str(likes), "--tasks", str(options.tasks),
                                   "--threads", str(options.threads)], capture_output=True, text=True,
                                  env={**os.environ, "PYTHONHASHSEED": "0"})
            if done.returncode != 0:
                raise BenchmarkError(f"{path} failed: {done.stderr[-2000:]}")
            figures[path] = json.loads(done.stdout.strip().splitlines()[-1])
    base = figures[BASELINE]
    rows = [[path, f"{f['wall_s']:.2f} s", f"{f['wall_s'] / base['wall_s']:.3f}x", f"{f['cpu_ms_per_like']:.2f} ms",
             f"{f['cpu_ms_per_like'] / base['cpu_ms_per_like']:.2f}x", f"{f['peak_rss_mb']:.0f} MB"]
            for path, f in figures.items()]
    say(table(["path", "wall", "vs one by one", "CPU per like", "vs one by one", "peak memory"], rows))
    return {"likes": likes, "latency_s": LATENCY, "paths": figures}


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    add_common_options(parser)
    parser.add_argument("--likes", type=int, default=1000)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--keep-alive", action="store_true",
                        help="serve the engine through waitress, which keeps connections open as DynamoDB does "
                             "(werkzeug, the default, closes each one): pip install waitress")
    parser.add_argument("--path", choices=PATHS, help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    return run_main(run, parser, argv)


if __name__ == "__main__":
    raise SystemExit(main())
