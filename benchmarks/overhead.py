"""
Benchmark: the CPU overhead of a counted ``save()`` against the same transaction written by hand with PynamoDB.

::

    python -m benchmarks.overhead                  # 30 rounds of 500 saves per path, about 1 minute
    python -m benchmarks.overhead --quick          # 6 rounds of 200
    python -m benchmarks.overhead --json o.json

No network and no engine: a ``before-send`` handler on the botocore clients answers every request with a canned
HTTP 200 and a ``{}`` body (a committed TransactWriteItems), so what is timed is the client's CPU only.

Two paths, interleaved in blocks, round after round (ABBA order, so neither always runs first):

* **counted**: ``Like(...).save()``: the library plans the transaction (:class:`CountedTransaction`), sends it
  through :func:`~pynamodb_counters.compat.transact_client`, and reads the answer into a ``WriteResult``;
* **by hand**: the same Put and Update built with PynamoDB (``get_save_kwargs_from_instance`` and the
  connection's ``get_operation_kwargs``) and sent with the *same* botocore client's ``transact_write_items``.

Before timing, it checks that both paths send byte-identical requests (but for the token) and that a counted
save sends exactly one request. Two more pairs of paths, interleaved the same way, split the save in two:
building alone (``plan()`` against the two PynamoDB calls, nothing sent), and sending alone (the library's
``commit_plan()`` of a plan built beforehand, which sends it and reads the answer into a ``WriteResult``, against
``transact_write_items`` of the same plan's items). A cProfile of the counted path says where its time goes.
"""
from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import pstats
import time
import uuid
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from botocore.awsrequest import AWSResponse
from pynamodb.constants import ALL_OLD, KEY
from pynamodb.models import Model

from benchmarks._models import NOWHERE, Like, Post
from benchmarks._shared import (
    BenchmarkError,
    RequestCounter,
    add_common_options,
    describe_machine,
    median,
    point_models_at,
    run_main,
    say,
    table,
)
from pynamodb_counters import CountedTransaction
from pynamodb_counters.attributes import SEQUENCE, WRITE_ID
from pynamodb_counters.compat import transact_client
from pynamodb_counters.outcomes import commit_plan

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__))).replace(os.sep, "/") + "/"
GOAL = 1.10  # the goal: a counted save at most 10% slower than the same transaction by hand


class _Body:
    """The ``raw`` of a canned :class:`AWSResponse`: botocore reads it through ``stream()``."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Any:
        yield self._body


class CannedResponses:
    """A ``before-send`` handler answering every request with HTTP 200 and a ``{}`` JSON body, counting them."""

    def __init__(self) -> None:
        self.requests = 0

    def __call__(self, request: Any, **_: Any) -> AWSResponse:
        self.requests += 1
        return AWSResponse(request.url, 200, {"Content-Type": "application/x-amz-json-1.0",
                                              "x-amzn-RequestId": "canned"}, _Body(b"{}"))


def by_hand(like: Like, client: Any) -> Dict[str, Any]:
    """The counted save's transaction, written with PynamoDB and botocore: the child's create-only Put (with the
    write id the library stores) and the post's Update (ADD 1 to the counter and to the write sequence, guarded
    by the post's existence), with the library's token, capacity and ``ReturnValuesOnConditionCheckFailure``."""
    items, token = build_by_hand(like)
    response: Dict[str, Any] = client.transact_write_items(TransactItems=items, ClientRequestToken=token,
                                                           ReturnConsumedCapacity="TOTAL")
    return response


def build_by_hand(like: Like) -> Tuple[List[Dict[str, Any]], str]:
    token = str(uuid.uuid4())
    # PynamoDB's own helper: the mixin refuses its override to callers other than the library (case 4, issue 10)
    put = Model.get_save_kwargs_from_instance(like, condition=Like.pk.does_not_exist(),
                                              return_values_on_condition_failure=ALL_OLD)
    put["Item"][WRITE_ID] = {"S": token}
    update = Post._get_connection().get_operation_kwargs(
        like.pk, range_key="META", key=KEY, actions=[Post.like_tally.add(1), SEQUENCE.add(1)],
        condition=Post.pk.exists(), return_values_on_condition_failure=ALL_OLD)
    return [{"Put": put}, {"Update": update}], token


def plan_counted(like: Like) -> Any:
    transaction = CountedTransaction()
    transaction.save(like)
    return transaction.plan()


def likes(block: int, round_number: int, path: str) -> List[Like]:
    return [Like(pk=f"POST#{n % 100:05d}", sk=f"LIKE#USER#{path}{round_number}-{n:05d}", liked_at=1764460800 + n)
            for n in range(block)]


def time_block(call: Callable[[Any], Any], block: List[Any]) -> float:
    """Seconds per call over ``block`` (the garbage collector runs first, outside the timing)."""
    gc.collect()
    started = time.perf_counter()
    for each in block:
        call(each)
    return (time.perf_counter() - started) / len(block)


def check_requests(client: Any, canned: CannedResponses, counter: RequestCounter) -> Dict[str, Any]:
    """Fail loudly unless a counted save sends exactly one TransactWriteItems, through the transact client only,
    identical to the transaction by hand but for the token."""
    counter.keep_bodies = True
    saves = 50
    before = canned.requests
    for like in likes(saves, 0, "check"):
        like.save()
    counted_requests = canned.requests - before
    if counted_requests != saves or counter.by_operation["TransactWriteItems"] != saves:
        raise BenchmarkError(f"{saves} counted saves sent {counted_requests} requests, "
                             f"{dict(counter.by_operation)}: expected exactly one TransactWriteItems each")
    counted_body = counter.transact_bodies[-1]
    by_hand(Like(pk=f"POST#{(saves - 1) % 100:05d}", sk=f"LIKE#USER#check0-{saves - 1:05d}",
                 liked_at=1764460800 + saves - 1), client)
    hand_body = counter.transact_bodies[-1]
    for body in (counted_body, hand_body):  # each carries its own token, twice: as the request's and the write id
        if body["TransactItems"][0]["Put"]["Item"][WRITE_ID]["S"] != body.pop("ClientRequestToken"):
            raise BenchmarkError("the write id differs from the request's token")
        body["TransactItems"][0]["Put"]["Item"][WRITE_ID]["S"] = "TOKEN"
    if counted_body != hand_body:
        raise BenchmarkError("the transaction by hand differs from the counted save's:\n"
                             f"{json.dumps(counted_body, sort_keys=True)}\n{json.dumps(hand_body, sort_keys=True)}")
    counter.keep_bodies = False
    counter.reset()
    return {"saves": saves, "requests": counted_requests, "actions_per_request": 2, "identical_requests": True}


def profile(calls: int) -> Tuple[List[Dict[str, Any]], Dict[str, float], List[Dict[str, Any]],
                                 List[Dict[str, Any]]]:
    """cProfile ``calls`` counted saves: the top entries by cumulative time, own time by package, and the
    library's own functions by cumulative time and by own time."""
    block = likes(calls, 0, "profile")
    profiler = cProfile.Profile()
    gc.collect()
    profiler.enable()
    for like in block:
        like.save()
    profiler.disable()
    stats = pstats.Stats(profiler)
    raw: Dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    entries = []
    by_package: Dict[str, float] = {}
    for (filename, line, function), (_, ncalls, tottime, cumtime, _) in raw.items():
        package = package_of(filename)
        by_package[package] = by_package.get(package, 0.0) + tottime
        entries.append({"function": f"{short(filename)}:{line}({function})", "package": package, "calls": ncalls,
                        "own_us_per_save": tottime / calls * 1e6, "cumulative_us_per_save": cumtime / calls * 1e6})
    entries.sort(key=lambda e: -e["cumulative_us_per_save"])
    library = [e for e in entries if e["package"] == "pynamodb_counters"]
    own = sorted(library, key=lambda e: -e["own_us_per_save"])
    per_save = {k: v / calls * 1e6 for k, v in sorted(by_package.items(), key=lambda kv: -kv[1])}
    return entries[:25], per_save, library[:15], own[:15]


def package_of(filename: str) -> str:
    path = filename.replace(os.sep, "/")
    for package in ("pynamodb_counters", "pynamodb", "botocore", "blinker", "jmespath", "urllib3", "dateutil"):
        if f"/{package}/" in path:
            return package
    if path.startswith("~") or "/lib/python" in path:
        return "stdlib, builtins"
    return "other"


def short(filename: str) -> str:
    path = filename.replace(os.sep, "/")
    for marker in ("site-packages/", ROOT):
        if marker in path:
            return path.split(marker, 1)[1]
    return path.rsplit("/", 1)[-1]


def run(options: argparse.Namespace) -> Dict[str, Any]:
    rounds = options.rounds or (6 if options.quick else 30)
    block = options.block or (200 if options.quick else 500)
    say(f"overhead benchmark: counted save() against the same transaction by hand, canned responses, "
        f"{rounds} rounds of {block} calls per path; {describe_machine()}")
    started_all = time.perf_counter()
    point_models_at([Post, Like], NOWHERE)  # never reached: every request gets a canned answer
    client = transact_client(Like)
    canned, counter = CannedResponses(), RequestCounter()
    clients = [client, Like._get_connection().connection.client, Post._get_connection().connection.client]
    for each in {id(c): c for c in clients}.values():
        each.meta.events.register("before-send.dynamodb", canned)
    counter.attach(client)
    checked = check_requests(client, canned, counter)
    say(f"checked: a counted save sends exactly one TransactWriteItems (2 actions), identical to the one by hand "
        f"but for the token ({checked['saves']} saves, {checked['requests']} requests)")

    def planned(block_likes: List[Like]) -> List[Any]:
        return [plan_counted(like) for like in block_likes]

    def send_by_hand(plan: Any) -> Any:
        return client.transact_write_items(TransactItems=plan.items, ClientRequestToken=plan.token,
                                           ReturnConsumedCapacity="TOTAL")

    # name: (what each call gets, made outside the timing; the call; requests per call)
    paths: Dict[str, Tuple[Callable[[List[Like]], List[Any]], Callable[[Any], Any], int]] = {
        "counted save()": (list, lambda like: like.save(), 1),
        "by hand": (list, lambda like: by_hand(like, client), 1),
        "build: plan()": (list, plan_counted, 0),
        "build: by hand": (list, build_by_hand, 0),
        "send: commit_plan()": (planned, lambda plan: commit_plan(plan, None, "TOTAL"), 1),
        "send: by hand": (planned, send_by_hand, 1),
    }
    for name, (prepare, call, _) in paths.items():  # warm up: imports, caches, the client's first request
        time_block(call, prepare(likes(100, 0, f"warm{name}")))
    timings: Dict[str, List[float]] = {name: [] for name in paths}
    pairs = [("counted save()", "by hand"), ("build: plan()", "build: by hand"),
             ("send: commit_plan()", "send: by hand")]
    for round_number in range(1, rounds + 1):
        for first, second in pairs:
            order = (first, second) if round_number % 2 else (second, first)
            for name in order:
                prepare, call, sends = paths[name]
                before = canned.requests
                timings[name].append(time_block(call, prepare(likes(block, round_number, name[:6]))))
                if canned.requests - before != sends * block:  # exactly one request per save, or none
                    raise BenchmarkError(f"{block} calls of {name} made {canned.requests - before} requests")
    timed_seconds = sum(sum(t) * block for t in timings.values())

    records: List[Dict[str, Any]] = []
    for counted_name, hand_name in pairs:
        counted, hand = timings[counted_name], timings[hand_name]
        per_round = sorted(c / h for c, h in zip(counted, hand))
        records.append({
            "counted": counted_name, "by_hand": hand_name,
            "counted_us": median(counted) * 1e6, "by_hand_us": median(hand) * 1e6,
            "ratio": median(counted) / median(hand),
            "ratio_per_round_median": median(per_round),
            "ratio_per_round_min": per_round[0], "ratio_per_round_max": per_round[-1],
            "difference_us": (median(counted) - median(hand)) * 1e6,
        })
    say()
    say(f"per call, median of {rounds} rounds of {block} (canned responses: client CPU only):")
    say(table(["counted path", "µs/call", "by hand", "µs/call", "ratio", "per-round ratios", "difference µs"],
              [[r["counted"], f"{r['counted_us']:.1f}", r["by_hand"], f"{r['by_hand_us']:.1f}", f"{r['ratio']:.3f}x",
                f"{r['ratio_per_round_min']:.2f}-{r['ratio_per_round_max']:.2f}", f"{r['difference_us']:+.1f}"]
               for r in records], align="lrlrrrr"))
    ratio = records[0]["ratio"]
    verdict = "within" if ratio <= GOAL else "above"
    say(f"counted save() / by hand = {ratio:.3f}x: {verdict} the goal of {GOAL:.2f}x")

    calls = 500 if options.quick else 3000
    top, by_package, library, own = profile(calls)
    say()
    say(f"cProfile of {calls} counted saves (profiling slows every call; the shares are what count):")
    total = sum(by_package.values())
    say(table(["package", "own µs/save (profiled)", "share"],
              [[name, f"{us:.1f}", f"{us / total:.0%}"] for name, us in by_package.items() if us / total >= 0.005]))
    say(table(["top entries by cumulative time", "calls", "cumulative µs/save", "own µs/save"],
              [[e["function"][:90], f"{e['calls']}", f"{e['cumulative_us_per_save']:.1f}",
                f"{e['own_us_per_save']:.1f}"] for e in top[:12]]))
    say(table(["the library's own functions, by cumulative time", "calls", "cumulative µs/save", "own µs/save"],
              [[e["function"][:90], f"{e['calls']}", f"{e['cumulative_us_per_save']:.1f}",
                f"{e['own_us_per_save']:.1f}"] for e in library[:12]]))
    say(table(["the library's own functions, by own time", "calls", "own µs/save", "cumulative µs/save"],
              [[e["function"][:90], f"{e['calls']}", f"{e['own_us_per_save']:.1f}",
                f"{e['cumulative_us_per_save']:.1f}"] for e in own[:12]]))
    total_seconds = time.perf_counter() - started_all
    say(f"timed {timed_seconds:.1f} s, whole benchmark {total_seconds:.1f} s")
    return {"overhead": {
        "rounds": rounds, "block": block, "goal_ratio": GOAL, "check": checked, "comparisons": records,
        "timings_s_per_call": timings, "profile": {"saves": calls, "own_us_per_save_by_package": by_package,
                                                   "top_cumulative": top, "library_cumulative": library,
                                                   "library_own": own},
        "timed_seconds": timed_seconds, "total_seconds": total_seconds}}


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.overhead",
                                     description="CPU overhead of a counted save() against the same transaction "
                                     "by hand, with canned responses instead of the network.",
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 30, quick 6)")
    parser.add_argument("--block", type=int, default=None, help="calls per path per round (default 500, quick 200)")
    add_common_options(parser)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run_main(run, parser(), argv)


if __name__ == "__main__":
    raise SystemExit(main())
