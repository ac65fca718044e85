"""
Benchmark: ``audit()`` of a counter fed from the stream, while likes wait for the handler, against the recount a
user writes without this library and against the audit of the same counter counted in transactions.

::

    python -m benchmarks.stream_audit               # 100 posts, 10 likes counted and 5 waiting each, 3 rounds
    python -m benchmarks.stream_audit --posts 400 --repeat 5
    python -m benchmarks.stream_audit --json a.json

On moto in-process, with the table's stream on. Each post has ``--likes`` likes counted and ``--waiting`` likes
written after the handler last ran (records waiting in the stream); about 5% of the posts drifted by hand (a raw
``ADD 3`` on the counter). Three ways to look for drift, round-robin, ``--repeat`` times:

* ``plain recount``, **the baseline**: what a user writes without this library, on plain PynamoDB models of the
  same table: for each post, a strongly consistent GetItem and ``Like.count(pk, sk.startswith("LIKE#"))``,
  compared. It cannot tell likes waiting for the handler from drift: it reports every post with likes waiting;
* ``audit, transaction``: ``audit(Post.like_tally, parents=...)`` of the same posts and likes counted in
  transactions (another table, no likes waiting), the library's audit without the stream;
* ``audit, stream``: ``audit(Post.like_tally, parents=...)`` of the counter fed from the stream: a probe written
  and deleted around each post's count, the stream read once per 100 posts, the waiting likes taken off.

Both audits must find exactly the planted drift every round, or the benchmark fails. The table gives the median
wall time, its ratio against the baseline, and per post: the requests by kind (reads of the table, writes, reads
of the stream) and the write units by the cost model (the probe's two writes). Wall time on moto in-process is
moto's CPU more than I/O: the requests are the figures that carry over to DynamoDB.
"""
from __future__ import annotations

import argparse
import os
import random
import time
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.constants import STREAM_NEW_AND_OLD_IMAGE
from pynamodb.models import Model

from benchmarks._shared import (
    BenchmarkError,
    RequestCounter,
    add_common_options,
    median,
    run_main,
    say,
    stream_records,
    table,
)
from pynamodb_counters import CounterField, CounterMixin, audit, counted_by
from pynamodb_counters.reconcile._stream_proof import streams_client
from pynamodb_counters.streams import count_stream
from pynamodb_counters.testing import Backend
from pynamodb_counters.write._send import pynamodb_connection, transact_client

REGION = "us-east-1"
WRITES = {"PutItem", "DeleteItem", "UpdateItem", "TransactWriteItems", "BatchWriteItem"}
STREAM_READS = {"DescribeStream", "GetShardIterator", "GetRecords"}


def _models(table_name: str, counting: Optional[str]) -> Tuple[Any, Any]:
    """A post and its likes in ``table_name``: counted in transactions, from the stream, or (``None``) plain."""
    meta = type("Meta", (), {"table_name": table_name, "region": REGION, "stream_view_type": STREAM_NEW_AND_OLD_IMAGE})
    bases = (CounterMixin, Model) if counting else (Model,)
    post = type(f"AuditPost_{table_name}_{counting}", bases, {
        "Meta": meta, "pk": UnicodeAttribute(hash_key=True), "sk": UnicodeAttribute(range_key=True),
        "like_tally": CounterField() if counting else NumberAttribute(null=True)})
    attrs: Dict[str, Any] = {"Meta": meta, "pk": UnicodeAttribute(hash_key=True),
                             "sk": UnicodeAttribute(range_key=True)}
    if counting:
        attrs["post"] = counted_by(post.like_tally, key=lambda like: (like.pk, "META"), prefix="LIKE#",
                                   counting=counting)
    return post, type(f"AuditLike_{table_name}_{counting}", bases, attrs)


TRANSACTION = _models("AuditTx", "transaction")
STREAM = _models("AuditStream", "stream")
PLAIN = _models("AuditStream", None)  # the stream table, read as plain PynamoDB reads it


def _seed(posts: Sequence[str], likes: int, waiting: int, drifted: Set[str]) -> None:
    """Both tables: every post with ``likes`` likes counted and, in the stream table, ``waiting`` more written
    after the handler ran; the posts ``drifted`` get a raw ``ADD 3``."""
    for post_model, like_model in (TRANSACTION, STREAM):
        for pk in posts:
            post_model(pk=pk, sk="META").save()
            for n in range(likes):
                like_model(pk=pk, sk=f"LIKE#u{n}").save()
    records = stream_records(STREAM[0].Meta.table_name)
    result = count_stream({"Records": records}, models=[STREAM[1]])
    if result.error is not None:
        raise BenchmarkError(f"count_stream failed: {result.error}")
    for pk in posts:
        for n in range(likes, likes + waiting):
            STREAM[1](pk=pk, sk=f"LIKE#u{n}").save()
    for post_model, _ in (TRANSACTION, STREAM):
        for pk in drifted:
            post_model._get_connection().update_item(pk, range_key="META",
                                                     actions=[post_model.like_tally.add(3)])


def _plain_recount(posts: Sequence[str]) -> Set[str]:
    """The baseline: the posts whose stored counter differs from a recount of their likes."""
    post_model, like_model = PLAIN
    found = set()
    for pk in posts:
        stored = post_model.get(pk, "META", consistent_read=True).like_tally or 0
        if like_model.count(pk, like_model.sk.startswith("LIKE#"), consistent_read=True) != stored:
            found.add(pk)
    return found


def _audited(models: Tuple[Any, Any], posts: Sequence[str]) -> Set[str]:
    report = audit(models[0].like_tally, parents=[(pk, "META") for pk in posts])
    if report.unverifiable:
        raise BenchmarkError(f"unverifiable: {report.unverifiable[0].reason}")
    return {drift.key[0] for drift in report.drifts}


def run(options: argparse.Namespace) -> Dict[str, Any]:
    os.environ.setdefault("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")  # botocore then reaches moto's streams
    posts = [f"POST#p{n}" for n in range(options.posts)]
    drifted = set(random.Random(4).sample(posts, max(1, len(posts) // 20)))
    modes = {"plain recount": lambda: _plain_recount(posts), "audit, transaction": lambda: _audited(TRANSACTION, posts),
             "audit, stream": lambda: _audited(STREAM, posts)}
    seconds: Dict[str, List[float]] = {mode: [] for mode in modes}
    counted: Dict[str, RequestCounter] = {mode: RequestCounter() for mode in modes}
    with Backend("moto", [*TRANSACTION, *STREAM]):
        _seed(posts, options.likes, options.waiting, drifted)
        clients = {id(client): client for model in (*TRANSACTION, *STREAM, *PLAIN)
                   for client in (pynamodb_connection(model).client, transact_client(model), streams_client(model))}
        for _ in range(options.repeat):
            for mode, check in modes.items():
                for client in clients.values():
                    client.meta.events.register("before-send", counted[mode])
                started = time.perf_counter()
                found = check()
                seconds[mode].append(time.perf_counter() - started)
                for client in clients.values():
                    client.meta.events.unregister("before-send", counted[mode])
                expected = set(posts) if mode == "plain recount" and options.waiting else drifted
                if found != expected:
                    raise BenchmarkError(f"{mode} found {len(found)} drifted posts, not {len(expected)}")
    base = median(seconds["plain recount"])
    figures: Dict[str, Any] = {"posts": options.posts, "likes": options.likes, "waiting": options.waiting,
                               "drifted": len(drifted), "repeat": options.repeat, "modes": {}}
    rows = []
    for mode in modes:
        operations = counted[mode].by_operation
        per_post = options.posts * options.repeat
        reads = sum(n for name, n in operations.items() if name not in WRITES | STREAM_READS) / per_post
        writes = sum(n for name, n in operations.items() if name in WRITES) / per_post
        stream_reads = sum(n for name, n in operations.items() if name in STREAM_READS) / per_post
        figure = {"seconds": median(seconds[mode]), "vs_baseline": median(seconds[mode]) / base,
                  "reads_per_post": reads, "writes_per_post": writes, "stream_requests_per_post": stream_reads,
                  "wcu_per_post": writes, "operations": dict(operations)}  # the probe is 1 KB or less: 1 WCU each
        figures["modes"][mode] = figure
        rows.append([mode, f"{figure['seconds']:.2f}", f"{figure['vs_baseline']:.2f}x", f"{reads:.2f}",
                     f"{writes:.2f}", f"{stream_reads:.2f}"])
    say(table(["mode", "seconds", "vs plain recount", "reads/post", "writes (WCU)/post", "stream reads/post"],
              rows))
    return figures


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.stream_audit", description=__doc__.split("::")[0])
    parser.add_argument("--posts", type=int, default=100, help="posts audited (default 100)")
    parser.add_argument("--likes", type=int, default=10, help="likes counted per post (default 10)")
    parser.add_argument("--waiting", type=int, default=5, help="likes waiting per post (default 5)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of each mode (default 3)")
    add_common_options(parser)
    return run_main(run, parser, argv)


if __name__ == "__main__":
    raise SystemExit(main())
