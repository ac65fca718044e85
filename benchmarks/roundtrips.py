"""
Benchmark: round trips per counted write, whatever the number of counters, and per 1,000 children in bulk.

::

    python -m benchmarks.roundtrips             # about 30 seconds
    python -m benchmarks.roundtrips --quick     # fewer single writes, bulk of 1,000 still
    python -m benchmarks.roundtrips --json r.json

On the served moto engine (in a child process, no latency: only requests are counted, not time), with the
README's ``Social`` table and a ``Users`` table:

* ``Like.save()``: a child with one relation (its post's ``like_tally``);
* ``Bookmark.save()``: a child with two relations, in two tables (its post's ``bookmark_count`` in ``Social``
  and its user's ``bookmarks`` in ``Users``);
* ``delete()`` of each;
* ``bulk_save()`` of 1,000 children: likes of one post, of 10 posts, of 1,000 posts, and bookmarks of 10 posts
  by 10 users.

Requests are counted twice: by the engine (every request it served) and on the client (a ``before-send``
handler on every botocore client involved, which also counts the actions in each TransactWriteItems). The two
must agree. Afterwards every counter is read back and must equal the children written, or the benchmark fails.
"""
from __future__ import annotations

import argparse
import time
from functools import partial
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from benchmarks._models import ALL_MODELS, Bookmark, Like, Post, User
from benchmarks._shared import (
    BenchmarkError,
    ChildEngine,
    RequestCounter,
    add_common_options,
    describe_machine,
    point_models_at,
    run_main,
    say,
    table,
)
from pynamodb_counters import BulkResult, bulk_save, skip_counting
from pynamodb_counters.write._send import transact_client

POSTS = 1000
USERS = 10


class Counted:
    """Requests seen by the engine and by every client, across one measured step."""

    def __init__(self, engine: ChildEngine) -> None:
        self.engine = engine
        self.counter = RequestCounter()
        clients = [transact_client(Like), transact_client(Bookmark)]
        clients += [model._get_connection().connection.client for model in ALL_MODELS]
        for client in {id(c): c for c in clients}.values():
            self.counter.attach(client)

    def measure(self, step: Callable[[], Any]) -> Dict[str, Any]:
        self.counter.reset()
        before = self.engine.requests_served
        started = time.perf_counter()
        outcome = step()
        seconds = time.perf_counter() - started
        served = self.engine.requests_served - before
        if served != self.counter.total:
            raise BenchmarkError(f"the engine served {served} requests, the clients sent {self.counter.total}")
        actions = list(self.counter.transact_actions)
        return {"requests": served, "by_operation": dict(self.counter.by_operation),
                "actions_per_request_min": min(actions, default=0), "actions_per_request_max": max(actions, default=0),
                "actions": sum(actions), "seconds": seconds, "outcome": outcome}


def seed_parents() -> None:
    with skip_counting():
        with Post.batch_write() as batch:
            for n in range(POSTS):
                batch.save(Post(pk=f"POST#{n:05d}", sk="META", like_tally=0, bookmark_count=0))
        with User.batch_write() as batch:
            for n in range(USERS):
                batch.save(User(user_id=f"USER#{n:04d}", bookmarks=0))


def check_bulk(result: BulkResult, children: int) -> None:
    if len(result.added) != children or result.rejected or result.failed:
        raise BenchmarkError(f"bulk_save of {children} children: {len(result.added)} added, "
                             f"{len(result.rejected)} rejected, {len(result.failed)} failed")


def run(options: argparse.Namespace) -> Dict[str, Any]:
    singles = 20 if options.quick else 100
    bulk_children = options.children
    say(f"round-trips benchmark: {singles} single writes per kind, bulk_save of {bulk_children} children; "
        f"{describe_machine()}")
    started_all = time.perf_counter()
    expected_likes: Dict[str, int] = {}
    expected_bookmarks: Dict[str, int] = {}
    expected_users: Dict[str, int] = {}
    rows: List[Dict[str, Any]] = []

    with ChildEngine() as engine:
        point_models_at(ALL_MODELS, engine.endpoint_url)
        Post.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
        User.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
        seed_parents()
        counted = Counted(engine)

        def row(name: str, relations: int, children: int, measured: Dict[str, Any], one_each: int) -> None:
            measured.pop("outcome")
            per_thousand = measured["requests"] / children * 1000
            rows.append({"write": name, "relations": relations, "children": children,
                         "requests_per_1000_children": per_thousand, "one_per_child": one_each, **measured})
            say(f"  {name}: {children} children, {measured['requests']} requests "
                f"({measured['actions_per_request_min']}-{measured['actions_per_request_max']} actions each), "
                f"{measured['seconds']:.1f} s")

        # single writes: one TransactWriteItems each, whatever the number of counters
        likes = [Like(pk=f"POST#{n % 10:05d}", sk=f"LIKE#USER#S{n:05d}", liked_at=1764460800 + n)
                 for n in range(singles)]
        row("Like.save()", 1, singles, counted.measure(lambda: [like.save() for like in likes]), singles)
        bookmarks = [Bookmark(pk=f"POST#{n % 10:05d}", sk=f"BOOKMARK#USER#S{n:05d}", user_id=f"USER#{n % USERS:04d}")
                     for n in range(singles)]
        row("Bookmark.save()", 2, singles, counted.measure(lambda: [b.save() for b in bookmarks]), singles)
        removed = singles // 2
        row("Like.delete()", 1, removed, counted.measure(lambda: [like.delete() for like in likes[:removed]]),
            removed)
        row("Bookmark.delete()", 2, removed,
            counted.measure(lambda: [b.delete() for b in bookmarks[:removed]]), removed)
        for n, like in enumerate(likes):
            key = like.pk
            expected_likes[key] = expected_likes.get(key, 0) + (0 if n < removed else 1)
        for n, bookmark in enumerate(bookmarks):
            if n >= removed:
                expected_bookmarks[bookmark.pk] = expected_bookmarks.get(bookmark.pk, 0) + 1
                expected_users[bookmark.user_id] = expected_users.get(bookmark.user_id, 0) + 1

        # bulk: requests per 1,000 children
        layouts: List[Tuple[str, int, Callable[[int], str]]] = [
            ("bulk_save(likes), 1 post", 1, lambda n: "POST#00100"),
            ("bulk_save(likes), 10 posts", 1, lambda n: f"POST#{200 + n % 10:05d}"),
            (f"bulk_save(likes), {min(bulk_children, POSTS)} posts", 1, lambda n: f"POST#{n % POSTS:05d}"),
        ]
        for name, relations, post_of in layouts:
            batch = [Like(pk=post_of(n), sk=f"LIKE#USER#B{len(rows)}-{n:05d}", liked_at=1764460800 + n)
                     for n in range(bulk_children)]
            measured = counted.measure(partial(bulk_save, batch))
            check_bulk(measured["outcome"], bulk_children)
            if measured["outcome"].requests != measured["requests"]:
                raise BenchmarkError(f"BulkResult.requests is {measured['outcome'].requests}, the engine served "
                                     f"{measured['requests']}")
            for like in batch:
                expected_likes[like.pk] = expected_likes.get(like.pk, 0) + 1
            row(name, relations, bulk_children, measured, bulk_children)
        batch_b = [Bookmark(pk=f"POST#{300 + n % 10:05d}", sk=f"BOOKMARK#USER#B{n:05d}",
                            user_id=f"USER#{(n // 10) % USERS:04d}") for n in range(bulk_children)]
        measured = counted.measure(lambda: bulk_save(batch_b))
        check_bulk(measured["outcome"], bulk_children)
        for bookmark in batch_b:
            expected_bookmarks[bookmark.pk] = expected_bookmarks.get(bookmark.pk, 0) + 1
            expected_users[bookmark.user_id] = expected_users.get(bookmark.user_id, 0) + 1
        row(f"bulk_save(bookmarks), 10 posts x {USERS} users", 2, bulk_children, measured, bulk_children)

        # every counter exact
        wrong: List[Tuple[Any, ...]] = []
        for post in Post.scan(Post.sk == "META", consistent_read=True):
            if (post.like_tally, post.bookmark_count) != (expected_likes.get(post.pk, 0),
                                                          expected_bookmarks.get(post.pk, 0)):
                wrong.append((post.pk, post.like_tally, post.bookmark_count))
        for user in User.scan(consistent_read=True):
            if user.bookmarks != expected_users.get(user.user_id, 0):
                wrong.append((user.user_id, user.bookmarks))
        if wrong:
            raise BenchmarkError(f"{len(wrong)} counters are not exact, e.g. {wrong[:3]}")
        checked = POSTS + USERS
    say(f"checked: all {checked} counters exact ({sum(expected_likes.values())} likes, "
        f"{sum(expected_bookmarks.values())} bookmarks)")
    say()
    say(table(["write", "relations", "children", "requests", "actions/request", "requests per 1,000 children"],
              [[r["write"], f"{r['relations']}", f"{r['children']:,}", f"{r['requests']:,}",
                f"{r['actions_per_request_min']}" + (f"-{r['actions_per_request_max']}"
                                                     if r["actions_per_request_max"] != r["actions_per_request_min"]
                                                     else ""),
                f"{r['requests_per_1000_children']:,.0f}"] for r in rows]))
    say("one transaction per child: 1,000 requests per 1,000 children")
    total_seconds = time.perf_counter() - started_all
    say(f"whole benchmark {total_seconds:.1f} s")
    return {"roundtrips": {"single_writes": singles, "bulk_children": bulk_children, "rows": rows,
                           "counters_checked": checked, "total_seconds": total_seconds}}


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.roundtrips",
                                     description="Requests per counted write (1 and 2 relations) and per 1,000 "
                                     "children with bulk_save(), on the served moto engine.",
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--children", type=int, default=1000, help="children per bulk_save()")
    add_common_options(parser)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run_main(run, parser(), argv)


if __name__ == "__main__":
    raise SystemExit(main())
