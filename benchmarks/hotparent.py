"""
Benchmark: a hot parent, simulated. How many likes per second can one post take, unsharded and with 4, 16 or 64
counter shards, when 8, 64 or 512 writers each want ``--rate`` likes per second?

::

    python -m benchmarks.hotparent             # 30 simulated seconds per scenario: a few seconds
    python -m benchmarks.hotparent --quick     # 5 simulated seconds
    python -m benchmarks.hotparent --window 0.005 --json h.json

Pure Python, no engine, no network: a seeded discrete-event simulation of DynamoDB's write limits, so the
figures are the same on every machine and every run. **The model** (each figure is an option):

* **Writers.** ``--writers`` clients (8, 64, 512), each wanting ``--rate`` likes per second (10) of the same
  post: like *n* of a writer is due at its phase + *n* / rate. A writer sends one like at a time (a like that
  takes longer delays the next, as in a client thread), as one TransactWriteItems.
* **Round trip.** Each attempt takes ``--rtt`` (10 ms) on the client; the server handles it half-way.
* **Capacity.** Each partition accepts ``--partition-wcu`` (1,000) WCU per second: a token bucket per partition,
  refilled continuously, ``--burst`` seconds deep (0.1 s, so 100 WCU), full at the start. A like costs 4 WCU:
  the like's Put, 2 WCU, on the like's partition and the counter's Update, 2 WCU, on the counter item's
  partition (transactional writes of items under 1 KB). If any partition it touches lacks the tokens, the
  attempt is **throttled**: nothing is written and nothing is consumed.
* **Conflicts.** A transaction that commits holds the items it wrote for ``--window`` seconds (2 ms): another
  transaction touching one of them within that window is cancelled with **TransactionConflict**. The cancelled
  attempt has consumed its capacity (DynamoDB bills cancelled transactions); only the counter item is shared,
  each like being its own item. Throttling is decided first, at the partition, before the items are looked at.
* **Retries.** A throttled or conflicting attempt is retried as the library does (``RetryPolicy()``: up to 8
  attempts, full jitter, 25 ms doubling to 1 s at most). A retry resends the same transaction (same token, same
  shard). After 8 attempts the like fails (``RetriesExhaustedError``) and the writer moves on.
* **Layouts.** *Social* (the README's table): likes share their post's partition key, so every like's Put lands
  on the post's partition, and so does the unsharded counter (the post item): 4 WCU a like on one partition.
  *Spread*: the likes' Puts land on many partitions (their own partition keys), never the limit; only the
  counter's partition is hot. DynamoDB may, after a while, split a hot item collection by sort key
  ("split for heat"); the model does not, so the Social figures are those of a post that just became hot.
* **Shards.** With *S* shards, the counter is *S* items on *S* partitions, as in the library's layout
  (``CounterField(shards=S)``): shard 0 is the post item, shards 1 to *S* - 1 are items of their own. Each like
  adds 1 to one shard chosen at random (the library picks ``crc32`` of the like's key, as even over distinct
  likes); reading the count sums the shards. The like's Put stays where the layout puts it, so in the Social
  layout the post's partition takes 2 + 2/*S* WCU a like.

It reports, per scenario, the likes per second sustained (committed likes between the end of the first
simulated second and the end of the run), the throttled and conflicting requests, the likes that failed, the
attempts per like and the latency of a like (first attempt to commit), and the limit that binds: the smallest of
the demand, each partition's capacity, and the counter items' conflict ceiling (shards / window).
"""
from __future__ import annotations

import argparse
import heapq
import math
import random
import time
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from benchmarks._shared import BenchmarkError, add_common_options, run_main, say, table
from pynamodb_counters import RetryPolicy

POST = "post"  # the post's partition (and its item, the unsharded counter)


@dataclass(frozen=True)
class Model:
    """The simulated limits; every field is a command-line option."""

    partition_wcu: float = 1000.0
    burst: float = 0.1
    child_wcu: float = 2.0
    counter_wcu: float = 2.0
    window: float = 0.002
    rtt: float = 0.010
    max_attempts: int = 8
    base_delay: float = 0.025
    max_delay: float = 1.0
    duration: float = 10.0
    warmup: float = 1.0
    conflicts_consume: bool = True


@dataclass(frozen=True)
class Scenario:
    layout: str  # "social" or "spread"
    shards: int  # 1: unsharded
    writers: int
    rate: float  # likes per second each writer wants

    @property
    def name(self) -> str:
        return f"{self.layout}, {'unsharded' if self.shards == 1 else f'{self.shards} shards'}, {self.writers} writers"


def costs(scenario: Scenario, shard: int, model: Model) -> Tuple[Dict[str, float], str]:
    """The WCU one like consumes on each partition, and the counter item it updates."""
    counter = POST if shard == 0 else f"shard{shard}"  # shard 0 is the post item, as in the library
    by_partition: Dict[str, float] = {}
    if scenario.layout == "social":
        by_partition[POST] = model.child_wcu
    by_partition[counter] = by_partition.get(counter, 0.0) + model.counter_wcu
    return by_partition, counter


def ceilings(scenario: Scenario, model: Model) -> Dict[str, float]:
    """Likes per second each limit allows on its own."""
    found = {"demand": scenario.writers * scenario.rate}
    if scenario.layout == "social":
        per_like = model.child_wcu + model.counter_wcu / scenario.shards  # 1 like in S updates the post item
        found["post partition capacity"] = model.partition_wcu / per_like
    if scenario.shards == 1:
        if scenario.layout == "spread":
            found["post partition capacity"] = model.partition_wcu / model.counter_wcu
        found["counter conflicts"] = math.inf if model.window <= 0 else 1 / model.window
    else:
        found["shard partitions capacity"] = scenario.shards * model.partition_wcu / model.counter_wcu
        found["counter conflicts"] = math.inf if model.window <= 0 else scenario.shards / model.window
    return found


def simulate(scenario: Scenario, model: Model, seed: int) -> Dict[str, Any]:
    """Run one scenario; deterministic for a given seed."""
    rng = random.Random(f"{seed}:{scenario.layout}:{scenario.shards}:{scenario.writers}:{scenario.rate}")
    policy = RetryPolicy(max_attempts=model.max_attempts, base_delay=model.base_delay, max_delay=model.max_delay)
    interval = 1.0 / scenario.rate
    depth = model.partition_wcu * model.burst
    tokens: Dict[str, float] = {}
    refilled: Dict[str, float] = {}
    busy_until: Dict[str, float] = {}
    due = [rng.uniform(0.0, interval) for _ in range(scenario.writers)]
    # (send time, sequence, writer, attempt, like's first send, shard)
    events: List[Tuple[float, int, int, int, float, int]] = []
    sequence = 0
    for writer, start in enumerate(due):
        events.append((start, writer, writer, 1, start, rng.randrange(scenario.shards)))
    sequence = scenario.writers
    heapq.heapify(events)
    committed = throttled = conflicted = failed = attempts = 0
    committed_attempts = 0
    latencies: List[float] = []
    half = model.rtt / 2

    while events:
        sent, _, writer, attempt, first, shard = heapq.heappop(events)
        if sent >= model.duration:
            continue
        server = sent + half
        measured = server >= model.warmup
        by_partition, counter = costs(scenario, shard, model)
        admitted = True
        for partition, cost in by_partition.items():
            level = min(depth, tokens.get(partition, depth) + (server - refilled.get(partition, 0.0))
                        * model.partition_wcu)
            tokens[partition], refilled[partition] = level, server
            if level < cost:
                admitted = False
        if measured:
            attempts += 1
        outcome = "throttled"
        if admitted:
            if busy_until.get(counter, -1.0) > server:
                outcome = "conflict"
                if model.conflicts_consume:
                    for partition, cost in by_partition.items():
                        tokens[partition] -= cost
            else:
                outcome = "committed"
                for partition, cost in by_partition.items():
                    tokens[partition] -= cost
                busy_until[counter] = server + model.window
        answered = sent + model.rtt
        if outcome == "committed":
            if measured:
                committed += 1
                committed_attempts += attempt
            if first >= model.warmup:
                latencies.append(answered - first)
        else:
            if measured:
                if outcome == "throttled":
                    throttled += 1
                else:
                    conflicted += 1
            if attempt < model.max_attempts:
                sequence += 1
                heapq.heappush(events, (answered + policy.delay(attempt, rng), sequence, writer, attempt + 1,
                                        first, shard))
                continue
            if measured:
                failed += 1
        due[writer] += interval  # the writer's next like: when it is due, or now if the writer is late
        start = max(answered, due[writer])
        if start < model.duration:
            sequence += 1
            heapq.heappush(events, (start, sequence, writer, 1, start, rng.randrange(scenario.shards)))

    seconds = model.duration - model.warmup
    limits = ceilings(scenario, model)
    lowest = min(limits.values())
    binding = " = ".join(name for name, value in limits.items() if value <= lowest * 1.001)
    latencies.sort()

    def percentile(q: float) -> float:
        return latencies[min(len(latencies) - 1, math.ceil(q * len(latencies)) - 1)] * 1000 if latencies else 0.0

    return {**asdict(scenario), "name": scenario.name, "demand": scenario.writers * scenario.rate,
            "sustained": committed / seconds, "committed": committed, "attempts": attempts,
            "throttled": throttled, "conflicted": conflicted, "failed": failed,
            "attempts_per_like": committed_attempts / committed if committed else 0.0,
            "latency_p50_ms": percentile(0.5), "latency_p99_ms": percentile(0.99),
            "ceilings": {k: (None if math.isinf(v) else v) for k, v in limits.items()},
            "binding": binding, "binding_likes_per_s": lowest}


def model_from(options: argparse.Namespace) -> Model:
    duration = options.duration or (5.0 if options.quick else 30.0)
    return Model(partition_wcu=options.partition_wcu, burst=options.burst, window=options.window, rtt=options.rtt,
                 duration=duration, warmup=min(1.0, duration / 3))


def run(options: argparse.Namespace) -> Dict[str, Any]:
    model = model_from(options)
    started = time.perf_counter()
    say(f"hot-parent simulation: {', '.join(map(str, options.writers))} writers x {options.rate:g} likes/s on one "
        f"post; {model.partition_wcu:g} WCU/s per partition ({model.burst:g} s burst), 4 WCU a like (2 on the "
        f"like's partition, 2 on the counter's), {model.window * 1000:g} ms conflict window, "
        f"{model.rtt * 1000:g} ms round trip, the library's retry policy; {model.duration:g} simulated s "
        f"(the first {model.warmup:g} s not counted), seed {options.seed}")
    scenarios = [Scenario(layout, shards, writers, options.rate) for layout in ("social", "spread")
                 for shards in options.shards for writers in options.writers]
    first = simulate(scenarios[0], model, options.seed)
    if simulate(scenarios[0], model, options.seed) != first:
        raise BenchmarkError("the simulation is not deterministic")
    rows = [first] + [simulate(scenario, model, options.seed) for scenario in scenarios[1:]]
    seconds = model.duration - model.warmup
    for layout in ("social", "spread"):
        say()
        say("Social layout: the likes share the post's partition key" if layout == "social" else
            "Spread layout: the likes on partitions of their own; only the counter's partitions are hot")
        say(table(["counter", "writers", "wanted/s", "sustained likes/s", "of wanted", "throttled/s",
                   "conflicts/s", "failed likes/s", "attempts/like", "p50 ms", "p99 ms", "binding limit"],
                  [["unsharded" if r["shards"] == 1 else f"{r['shards']} shards", f"{r['writers']}",
                    f"{r['demand']:,.0f}", f"{r['sustained']:,.0f}", f"{r['sustained'] / r['demand']:.0%}",
                    f"{r['throttled'] / seconds:,.0f}", f"{r['conflicted'] / seconds:,.0f}",
                    f"{r['failed'] / seconds:,.1f}",
                    f"{r['attempts_per_like']:.2f}", f"{r['latency_p50_ms']:.0f}", f"{r['latency_p99_ms']:.0f}",
                    f"{r['binding']} ({r['binding_likes_per_s']:,.0f}/s)"]
                   for r in rows if r["layout"] == layout], align="lrrrrrrrrrrl"))
    sensitivity = []
    busiest = max(options.writers)
    for window in (0.0, 0.001, 0.002, 0.005, 0.010):
        varied = Model(**{**asdict(model), "window": window})
        for shards in (1, 16):
            sensitivity.append({"window_ms": window * 1000, "shards": shards,
                                **simulate(Scenario("social", shards, busiest, options.rate), varied, options.seed)})
    say()
    say(f"the conflict window's weight: Social layout, {busiest} writers, unsharded and 16 shards")
    say(table(["window", "counter", "sustained likes/s", "throttled/s", "conflicts/s", "failed likes/s",
               "binding limit"],
              [[f"{s['window_ms']:g} ms", "unsharded" if s["shards"] == 1 else f"{s['shards']} shards",
                f"{s['sustained']:,.0f}", f"{s['throttled'] / seconds:,.0f}", f"{s['conflicted'] / seconds:,.0f}",
                f"{s['failed'] / seconds:,.1f}", f"{s['binding']} ({s['binding_likes_per_s']:,.0f}/s)"]
               for s in sensitivity], align="llrrrrl"))
    total_seconds = time.perf_counter() - started
    say(f"whole benchmark {total_seconds:.1f} s (deterministic: seed {options.seed})")
    return {"hotparent": {"model": asdict(model), "rate": options.rate, "seed": options.seed, "scenarios": rows,
                          "window_sensitivity": sensitivity, "total_seconds": total_seconds}}


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.hotparent",
                                     description="A hot parent, simulated: likes per second one post sustains, "
                                     "unsharded and sharded, under DynamoDB's partition and conflict limits.",
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--writers", type=int, nargs="+", default=[8, 64, 512], help="writer counts")
    parser.add_argument("--rate", type=float, default=10.0, help="likes per second each writer wants")
    parser.add_argument("--shards", type=int, nargs="+", default=[1, 4, 16, 64], help="shard counts (1: unsharded)")
    parser.add_argument("--partition-wcu", type=float, default=1000.0, help="WCU per second one partition accepts")
    parser.add_argument("--burst", type=float, default=0.1, help="token bucket depth, in seconds of capacity")
    parser.add_argument("--window", type=float, default=0.002,
                        help="seconds a committed transaction holds its items (conflict window)")
    parser.add_argument("--rtt", type=float, default=0.010, help="seconds per attempt, as the client sees it")
    parser.add_argument("--duration", type=float, default=None,
                        help="simulated seconds per scenario (default 30, quick 5); the first second is not counted")
    parser.add_argument("--seed", type=int, default=2026, help="random seed")
    add_common_options(parser)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run_main(run, parser(), argv)


if __name__ == "__main__":
    raise SystemExit(main())
