"""
Benchmark: the CPU overhead of a counted ``save()`` against the same transaction written without this library.

::

    python -m benchmarks.overhead                  # 30 rounds of 500 saves per path, about 40 seconds
    python -m benchmarks.overhead --quick          # 6 rounds of 200
    python -m benchmarks.overhead --json o.json

No network and no engine: while it runs, ``botocore.client.BaseClient._make_request`` answers every request of
every botocore client with HTTP 200 and what botocore parses from a ``{}`` body (a committed
TransactWriteItems). The library's client and PynamoDB's are answered at the same point, so both sides do the
same botocore work (building and serialising the request) and none of the network's (signing, sending,
parsing); what differs is the code above botocore: this library against PynamoDB.

The baseline is what a user writes without this library: the same Put and Update on plain PynamoDB models
(``PlainLike`` and ``PlainPost`` in ``benchmarks/_models.py``, without ``CounterMixin``), sent through the
model's own PynamoDB connection. The paths, interleaved in blocks, round after round (forward on odd rounds,
backward on even ones: ABBA, so no path always runs first):

* **counted save()**: ``Like(...).save()``: the library plans the transaction (:class:`CountedTransaction`),
  sends it and reads the answer into a ``WriteResult``;
* **PynamoDB** (the baseline of the headline ratio): the create-only Put built by
  ``PlainLike.get_save_kwargs_from_instance`` (with the write id the library stores), the post's Update (ADD 1
  to the counter and to the write sequence, and the like's relation to the post's ``_cfeed``, as the library
  does; guarded by the post's existence) built by its table connection's
  ``get_operation_kwargs``, both with ``ReturnValuesOnConditionCheckFailure``, sent by
  ``PlainLike._get_connection().connection.transact_write_items``: PynamoDB's dispatch, its
  ``pre_dynamodb_send`` / ``post_dynamodb_send`` signals and its botocore client (parameter validation off);
* **PynamoDB TransactWrite**: the same transaction with PynamoDB's ``TransactWrite`` (``save()`` of the like,
  ``update()`` of a ``PlainPost(pk, "META")``), as its documentation writes it; shown beside the baseline.

Before timing, it checks that a counted save sends exactly one TransactWriteItems, and that both PynamoDB paths
send the same request body, but for the token (the request's ``ClientRequestToken`` and the write id): byte for
byte, or else equal as JSON, keys in another order (PynamoDB's ``transact_write_items`` puts the token and
``ReturnConsumedCapacity`` before ``TransactItems``); it says which.
Two more pairs of paths, interleaved the same way, split the save in two: building alone (``plan()`` against
PynamoDB's two calls, nothing sent), and sending alone (the commit's ``send()`` and ``finish()`` of a plan built
beforehand, which send it and read the answer into a ``WriteResult``, against the PynamoDB connection's
``transact_write_items`` of items built beforehand). A cProfile of the counted path and of the baseline, by own
time, says where the difference goes: the library's functions against PynamoDB's and botocore's.
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
from collections import Counter
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import botocore.client
from botocore.awsrequest import AWSResponse
from pynamodb.constants import ALL_OLD, KEY
from pynamodb.transactions import TransactWrite

from benchmarks._models import LIKE_FEED, NOWHERE, Like, PlainLike, PlainPost, Post
from benchmarks._shared import (
    BenchmarkError,
    add_common_options,
    describe_machine,
    median,
    point_models_at,
    run_main,
    say,
    table,
)
from pynamodb_counters import CountedTransaction
from pynamodb_counters.write._commit import finish
from pynamodb_counters.write._send import send

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__))).replace(os.sep, "/") + "/"
GOAL = 1.05  # the goal: a counted save at most 5% slower than the same transaction through PynamoDB
COUNTED, BASELINE, TRANSACT_WRITE = "counted save()", "PynamoDB", "PynamoDB TransactWrite"
Built = Tuple[Dict[str, Any], Dict[str, Any], str]  # PynamoDB's Put and Update arguments, and the token


class _Body:
    """The ``raw`` of the canned :class:`AWSResponse` (never read: the answer comes parsed)."""

    def stream(self, **_: Any) -> Any:
        yield b"{}"


class CannedResponses:
    """While entered, ``botocore.client.BaseClient._make_request`` answers every request of every client with
    HTTP 200 and the parsed ``{}`` body of a committed TransactWriteItems, counting requests by operation.

    Every botocore client goes through this one method, between serialising a request and sending it, so the
    library's client and PynamoDB's are answered identically. With ``keep_bodies``, the serialised request bodies
    are kept (bytes, exactly as they would be sent).
    """

    def __init__(self) -> None:
        self.by_operation: Counter[str] = Counter()
        self.bodies: List[bytes] = []
        self.keep_bodies = False
        self._headers = {"content-type": "application/x-amz-json-1.0", "x-amzn-requestid": "canned",
                         "content-length": "2"}
        self._http = AWSResponse("http://canned", 200, self._headers, _Body())
        self._original: Any = None

    @property
    def requests(self) -> int:
        return sum(self.by_operation.values())

    def answer(self, operation_model: Any, request_dict: Dict[str, Any]) -> Tuple[AWSResponse, Dict[str, Any]]:
        self.by_operation[operation_model.name] += 1
        if self.keep_bodies:
            self.bodies.append(request_dict["body"])
        return self._http, {"ResponseMetadata": {"RequestId": "canned", "HTTPStatusCode": 200,
                                                 "HTTPHeaders": dict(self._headers), "RetryAttempts": 0}}

    def __enter__(self) -> CannedResponses:
        self._original = botocore.client.BaseClient.__dict__["_make_request"]
        answer = self.answer

        def _make_request(client: Any, operation_model: Any, request_dict: Dict[str, Any],
                          request_context: Any) -> Tuple[AWSResponse, Dict[str, Any]]:
            return answer(operation_model, request_dict)

        botocore.client.BaseClient._make_request = _make_request
        return self

    def __exit__(self, *exc_info: Any) -> None:
        botocore.client.BaseClient._make_request = self._original


# -- the paths --------------------------------------------------------------------------------------------------
def plain_actions() -> List[Any]:
    """The post's Update, as a counted save writes it: ADD 1 to the counter and to the write sequence, and the
    like's relation to the relations that fed the counter."""
    return [PlainPost.like_tally.add(1), PlainPost.sequence.add(1), PlainPost.feeders.add({LIKE_FEED})]


def build_plain(like: PlainLike) -> Built:
    """The counted save's transaction, built with PynamoDB on the plain models: the like's create-only Put (with
    the write id the library stores: the token) and the post's Update (:func:`plain_actions`), guarded by the
    post's existence; both return the old item when their condition fails."""
    token = str(uuid.uuid4())
    like.write_id = token
    put = like.get_save_kwargs_from_instance(condition=PlainLike.pk.does_not_exist(),
                                             return_values_on_condition_failure=ALL_OLD)
    update = PlainPost._get_connection().get_operation_kwargs(
        like.pk, range_key="META", key=KEY, actions=plain_actions(),
        condition=PlainPost.pk.exists(), return_values_on_condition_failure=ALL_OLD)
    return put, update, token


def send_plain(built: Built) -> Dict[str, Any]:
    """Send PynamoDB's Put and Update as one TransactWriteItems, through the like model's own connection."""
    put, update, token = built
    response: Dict[str, Any] = PlainLike._get_connection().connection.transact_write_items(
        condition_check_items=[], delete_items=[], put_items=[put], update_items=[update],
        client_request_token=token, return_consumed_capacity="TOTAL")
    return response


def save_plain(like: PlainLike) -> Dict[str, Any]:
    """The baseline: what a user writes without this library (build, then send through PynamoDB)."""
    return send_plain(build_plain(like))


def save_transact_write(like: PlainLike) -> None:
    """The same transaction with PynamoDB's ``TransactWrite``."""
    token = str(uuid.uuid4())
    like.write_id = token
    with TransactWrite(connection=PlainLike._get_connection().connection, client_request_token=token,
                       return_consumed_capacity="TOTAL") as transaction:
        transaction.save(like, condition=PlainLike.pk.does_not_exist(), return_values=ALL_OLD)
        transaction.update(PlainPost(like.pk, "META"), plain_actions(),
                           condition=PlainPost.pk.exists(), return_values=ALL_OLD)


def plan_counted(like: Like) -> Any:
    transaction = CountedTransaction()
    transaction.save(like)
    return transaction.plan()


def send_planned(plan: Any) -> Any:
    """The commit pipeline's steps after planning: send the plan, read the answer into a ``WriteResult``."""
    return finish(plan, send(plan.actions[0].model, plan.items, plan.token))


def likes(block: int, round_number: int, path: str, model: Any = Like) -> List[Any]:
    return [model(pk=f"POST#{n % 100:05d}", sk=f"LIKE#USER#{path}{round_number}-{n:05d}", liked_at=1764460800 + n)
            for n in range(block)]


def plain_likes(block: int, round_number: int, path: str) -> List[PlainLike]:
    return likes(block, round_number, path, PlainLike)


def planned(block: int, round_number: int, path: str) -> List[Any]:
    return [plan_counted(like) for like in likes(block, round_number, path)]


def built(block: int, round_number: int, path: str) -> List[Built]:
    return [build_plain(like) for like in plain_likes(block, round_number, path)]


def time_block(call: Callable[[Any], Any], block: List[Any]) -> float:
    """Seconds per call over ``block`` (the garbage collector runs first, outside the timing)."""
    gc.collect()
    started = time.perf_counter()
    for each in block:
        call(each)
    return (time.perf_counter() - started) / len(block)


# -- the checks -------------------------------------------------------------------------------------------------
def without_token(body: bytes, who: str) -> bytes:
    """``body`` with its token, sent twice (as the request's ``ClientRequestToken`` and as the write id), replaced
    by ``TOKEN``; fails unless both are there and equal."""
    parsed = json.loads(body)
    token = parsed.get("ClientRequestToken", "")
    write_id = parsed["TransactItems"][0].get("Put", {}).get("Item", {}).get(PlainLike.write_id.attr_name, {})
    if not token or write_id != {"S": token} or body.count(token.encode()) != 2:
        raise BenchmarkError(f"{who}: the write id {write_id} is not the request's token {token!r}")
    return body.replace(token.encode(), b"TOKEN")


def check_requests(canned: CannedResponses) -> Dict[str, Any]:
    """Fail loudly unless a counted save sends exactly one TransactWriteItems, and both PynamoDB paths send the
    counted save's request body, but for the token: byte for byte, or else the same JSON with keys in another
    order (the record says which)."""
    saves = 50
    canned.by_operation.clear()
    canned.keep_bodies = True
    for like in likes(saves, 0, "check"):
        like.save()
    if dict(canned.by_operation) != {"TransactWriteItems": saves}:
        raise BenchmarkError(f"{saves} counted saves sent {dict(canned.by_operation)}: expected exactly "
                             f"{saves} TransactWriteItems, one each")
    last = saves - 1
    counted_body = without_token(canned.bodies[-1], COUNTED)
    identical: Dict[str, str] = {}
    for name, path in ((BASELINE, save_plain), (TRANSACT_WRITE, save_transact_write)):
        before = canned.requests
        path(PlainLike(pk=f"POST#{last % 100:05d}", sk=f"LIKE#USER#check0-{last:05d}", liked_at=1764460800 + last))
        if canned.requests != before + 1:
            raise BenchmarkError(f"{name} sent {canned.requests - before} requests, not 1")
        body = without_token(canned.bodies[-1], name)
        if body == counted_body:
            identical[name] = "byte for byte"
        elif json.loads(body) == json.loads(counted_body):
            identical[name] = "as JSON, keys in another order"
        else:
            raise BenchmarkError(f"the {name} request differs from the counted save's:\n{counted_body.decode()}\n"
                                 f"{body.decode()}")
    canned.keep_bodies = False
    canned.bodies.clear()
    return {"saves": saves, "requests": saves, "actions_per_request": len(json.loads(counted_body)["TransactItems"]),
            "identical": identical, "body_bytes": len(counted_body)}


# -- the profile ------------------------------------------------------------------------------------------------
def profile(sides: Sequence[Tuple[Callable[[Any], Any], List[Any]]],
            chunk: int = 100) -> List[Tuple[List[Dict[str, Any]], Dict[str, float]]]:
    """cProfile each ``(call, calls)`` side over its calls, the sides taking turns ``chunk`` calls at a time (as
    the timed rounds do, so that a change in the machine's load touches every side alike). Per side: every
    function's calls, own and cumulative time per call (µs), by own time, and the own time per call by package."""
    profilers = [cProfile.Profile() for _ in sides]
    for start in range(0, max(len(calls) for _, calls in sides), chunk):
        for profiler, (call, calls) in zip(profilers, sides):
            gc.collect()
            profiler.enable()
            for each in calls[start:start + chunk]:
                call(each)
            profiler.disable()
    return [digest(profiler, len(calls)) for profiler, (_, calls) in zip(profilers, sides)]


def digest(profiler: cProfile.Profile, calls: int) -> Tuple[List[Dict[str, Any]], Dict[str, float]]:
    raw: Dict[Any, Any] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    entries = []
    by_package: Dict[str, float] = {}
    for (filename, line, function), (_, ncalls, tottime, cumtime, _) in raw.items():
        package = package_of(filename)
        by_package[package] = by_package.get(package, 0.0) + tottime / calls * 1e6
        entries.append({"function": f"{short(filename)}:{line}({function})", "package": package, "calls": ncalls,
                        "own_us_per_save": tottime / calls * 1e6, "cumulative_us_per_save": cumtime / calls * 1e6})
    entries.sort(key=lambda e: -e["own_us_per_save"])
    return entries, dict(sorted(by_package.items(), key=lambda kv: -kv[1]))


def package_of(filename: str) -> str:
    path = filename.replace(os.sep, "/")
    for package in ("pynamodb_counters", "pynamodb", "botocore", "blinker", "jmespath", "urllib3", "dateutil"):
        if f"/{package}/" in path:
            return package
    if "/benchmarks/" in path:
        return "benchmark"
    if path.startswith("~") or "/lib/python" in path:
        return "stdlib, builtins"
    return "other"


def short(filename: str) -> str:
    path = filename.replace(os.sep, "/")
    for marker in ("site-packages/", ROOT):
        if marker in path:
            return path.split(marker, 1)[1]
    return path.rsplit("/", 1)[-1]


def report_profile(calls: int) -> Dict[str, Any]:
    """Profile ``calls`` counted saves and as many saves of the baseline; print own time by package, side by
    side, the counted path's top functions by own time, the functions whose own time grows most against the
    baseline, and the library's functions by cumulative time."""
    (counted, counted_packages), (baseline, baseline_packages) = profile(
        [(lambda like: like.save(), likes(calls, 0, "profile")), (save_plain, plain_likes(calls, 0, "profile"))])
    say()
    say(f"cProfile of {calls} saves each way, taking turns 100 at a time (profiling slows every call; compare "
        f"shares and differences):")
    total = sum(counted_packages.values())
    packages = list(dict.fromkeys([*counted_packages, *baseline_packages]))
    say(table(["package", "counted own µs/save", "share", f"{BASELINE} own µs/save", "difference"],
              [[name, f"{counted_packages.get(name, 0.0):.1f}", f"{counted_packages.get(name, 0.0) / total:.0%}",
                f"{baseline_packages.get(name, 0.0):.1f}",
                f"{counted_packages.get(name, 0.0) - baseline_packages.get(name, 0.0):+.1f}"]
               for name in packages if max(counted_packages.get(name, 0.0), baseline_packages.get(name, 0.0))
               >= 0.005 * total]
              + [["total", f"{total:.1f}", "100%", f"{sum(baseline_packages.values()):.1f}",
                  f"{total - sum(baseline_packages.values()):+.1f}"]]))
    say(table(["the counted path's top functions, by own time", "package", "calls", "own µs/save",
               "cumulative µs/save"],
              [[e["function"][:80], e["package"], f"{e['calls']}", f"{e['own_us_per_save']:.1f}",
                f"{e['cumulative_us_per_save']:.1f}"] for e in counted[:20]], align="llrrr"))
    baseline_own = {e["function"]: e["own_us_per_save"] for e in baseline}
    differences = sorted(({**e, "baseline_own_us_per_save": baseline_own.get(e["function"], 0.0),
                           "difference_us_per_save": e["own_us_per_save"] - baseline_own.get(e["function"], 0.0)}
                          for e in counted), key=lambda e: -e["difference_us_per_save"])
    say(table(["where the difference goes: own time, counted minus PynamoDB", "package", "counted µs/save",
               "PynamoDB µs/save", "difference"],
              [[e["function"][:80], e["package"], f"{e['own_us_per_save']:.1f}",
                f"{e['baseline_own_us_per_save']:.1f}", f"{e['difference_us_per_save']:+.1f}"]
               for e in differences[:15]], align="llrrr"))
    library = sorted((e for e in counted if e["package"] == "pynamodb_counters"),
                     key=lambda e: -e["cumulative_us_per_save"])
    say(table(["the library's functions, by cumulative time", "calls", "cumulative µs/save", "own µs/save"],
              [[e["function"][:80], f"{e['calls']}", f"{e['cumulative_us_per_save']:.1f}",
                f"{e['own_us_per_save']:.1f}"] for e in library[:12]]))
    return {"saves": calls, "counted_own_us_per_save_by_package": counted_packages,
            "baseline_own_us_per_save_by_package": baseline_packages, "counted_top_own": counted[:25],
            "top_differences": differences[:25],
            "library_cumulative": library[:15]}


# -- the run ----------------------------------------------------------------------------------------------------
# name: (what each call gets, made outside the timing: (block, round, tag) -> calls; the call; requests per call)
Path = Tuple[Callable[[int, int, str], List[Any]], Callable[[Any], Any], int]
PATHS: Dict[str, Path] = {
    COUNTED: (likes, lambda like: like.save(), 1),
    BASELINE: (plain_likes, save_plain, 1),
    TRANSACT_WRITE: (plain_likes, save_transact_write, 1),
    "build: plan()": (likes, plan_counted, 0),
    "build: PynamoDB": (plain_likes, build_plain, 0),
    "send: send()+finish()": (planned, send_planned, 1),
    "send: PynamoDB": (built, send_plain, 1),
}
GROUPS = [(COUNTED, BASELINE, TRANSACT_WRITE), ("build: plan()", "build: PynamoDB"),
          ("send: send()+finish()", "send: PynamoDB")]
COMPARISONS = [(COUNTED, BASELINE), (COUNTED, TRANSACT_WRITE), ("build: plan()", "build: PynamoDB"),
               ("send: send()+finish()", "send: PynamoDB")]


def time_rounds(canned: CannedResponses, rounds: int, block: int) -> Dict[str, List[float]]:
    """Every path, ``rounds`` times ``block`` calls, each group interleaved: forward on odd rounds, backward on
    even ones. Fails unless each call made exactly the requests it should."""
    for name, (prepare, call, _) in PATHS.items():  # warm up: imports, caches, the clients' first requests
        time_block(call, prepare(100, 0, f"warm{len(name)}{name[:3]}"))
    timings: Dict[str, List[float]] = {name: [] for name in PATHS}
    for round_number in range(1, rounds + 1):
        for group in GROUPS:
            for name in group if round_number % 2 else reversed(group):
                prepare, call, sends = PATHS[name]
                calls = prepare(block, round_number, f"{list(PATHS).index(name)}-")
                before = canned.requests
                timings[name].append(time_block(call, calls))
                if canned.requests - before != sends * block:  # exactly one request per save, or none
                    raise BenchmarkError(f"{block} calls of {name} made {canned.requests - before} requests")
    return timings


def compare(timings: Dict[str, List[float]]) -> List[Dict[str, Any]]:
    records = []
    for counted_name, baseline_name in COMPARISONS:
        counted, baseline = timings[counted_name], timings[baseline_name]
        per_round = sorted(c / b for c, b in zip(counted, baseline))
        records.append({
            "counted": counted_name, "baseline": baseline_name,
            "counted_us": median(counted) * 1e6, "baseline_us": median(baseline) * 1e6,
            "ratio": median(counted) / median(baseline),
            "ratio_per_round_median": median(per_round),
            "ratio_per_round_min": per_round[0], "ratio_per_round_max": per_round[-1],
            "difference_us": (median(counted) - median(baseline)) * 1e6,
        })
    return records


def run(options: argparse.Namespace) -> Dict[str, Any]:
    rounds = options.rounds or (6 if options.quick else 30)
    block = options.block or (200 if options.quick else 500)
    say(f"overhead benchmark: counted save() against the same transaction through PynamoDB, canned responses, "
        f"{rounds} rounds of {block} calls per path; {describe_machine()}")
    started_all = time.perf_counter()
    point_models_at([Post, Like, PlainPost, PlainLike], NOWHERE)  # never reached: every request gets a canned answer
    with CannedResponses() as canned:
        checked = check_requests(canned)
        say(f"checked: a counted save sends exactly one TransactWriteItems ({checked['actions_per_request']} "
            f"actions; {checked['saves']} saves, {checked['requests']} requests), the request PynamoDB sends for the "
            f"same transaction, but for the token: "
            + "; ".join(f"{name}: identical {how}" for name, how in checked["identical"].items()))
        timings = time_rounds(canned, rounds, block)
        records = compare(timings)
        say()
        say(f"per call, median of {rounds} rounds of {block} (canned responses: CPU above botocore's send only):")
        say(table(["counted path", "µs/call", "baseline", "µs/call", "ratio", "per-round ratios", "difference µs"],
                  [[r["counted"], f"{r['counted_us']:.1f}", r["baseline"], f"{r['baseline_us']:.1f}",
                    f"{r['ratio']:.3f}x", f"{r['ratio_per_round_min']:.2f}-{r['ratio_per_round_max']:.2f}",
                    f"{r['difference_us']:+.1f}"] for r in records], align="lrlrrrr"))
        ratio = records[0]["ratio"]
        verdict = "within" if ratio <= GOAL else "above"
        say(f"counted save() / {BASELINE} = {ratio:.3f}x: {verdict} the goal of {GOAL:.2f}x")
        profiled = report_profile(500 if options.quick else 3000)
    timed_seconds = sum(sum(t) * block for t in timings.values())
    total_seconds = time.perf_counter() - started_all
    say(f"timed {timed_seconds:.1f} s, whole benchmark {total_seconds:.1f} s")
    return {"overhead": {
        "rounds": rounds, "block": block, "goal_ratio": GOAL, "check": checked, "comparisons": records,
        "timings_s_per_call": timings, "profile": profiled, "timed_seconds": timed_seconds,
        "total_seconds": total_seconds}}


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.overhead",
                                     description="CPU overhead of a counted save() against the same transaction "
                                     "sent through PynamoDB without this library, with canned responses instead of "
                                     "the network.",
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 30, quick 6)")
    parser.add_argument("--block", type=int, default=None, help="calls per path per round (default 500, quick 200)")
    add_common_options(parser)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run_main(run, parser(), argv)


if __name__ == "__main__":
    raise SystemExit(main())
