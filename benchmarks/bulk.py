"""
Benchmark: a bulk import of 10,000 likes across 100 posts with ``bulk_save()``, against one PynamoDB transaction
per like.

::

    python -m benchmarks.bulk                  # 10,000 likes in bulk, 1,000 one by one, at 0 and 5 ms: 1 minute
    python -m benchmarks.bulk --quick          # 2,000 in bulk (20 posts), 500 one by one
    python -m benchmarks.bulk --latencies 0    # without the delay only
    python -m benchmarks.bulk --json b.json

On the served moto engine (in a child process), once per ``--latencies`` value (a fixed delay on every request:
none, and 5 ms, by default), each time on new posts. The likes arrive shuffled, ``--per-post`` of each post.
``bulk_save()`` imports all of them; then, side by side, ``--one-by-one`` likes of other posts (the same number
per post) are written as a user writes them without this library, the baseline: on plain PynamoDB models
(``PlainLike``, ``PlainPost``: no ``CounterMixin``, no write id), one PynamoDB ``TransactWrite`` per like, the
like's create-only Put and ADD 1 to its post's counter, guarded by the post's existence. Per like, it reports:

* **WCU by the cost model** (:func:`pynamodb_counters.write_units`) for the requests actually sent: a
  client ``before-send`` handler keeps every TransactWriteItems body; each Put is billed on the size of its item
  as sent (write id included, in bulk) and each parent Update on the larger of the post's size before the import and
  after it (DynamoDB bills an Update on the larger of the item before and after), all transactional;
* the requests (served by the engine, and sent by the client: they must agree) and the wall time.

The baseline runs on a subset: its wall time for all the likes is extrapolated from it, and reported as
such. Afterwards every post's counter must equal its likes, read back both as the counter (GetItem) and by
counting the likes (a Query), or the benchmark fails.
"""
from __future__ import annotations

import argparse
import gc
import random
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple, Type

from pynamodb.models import Model
from pynamodb.transactions import TransactWrite

from benchmarks._models import Like, PlainLike, PlainPost, Post
from benchmarks._shared import (
    BenchmarkError,
    ChildEngine,
    RequestCounter,
    add_common_options,
    describe_machine,
    item_bytes,
    point_models_at,
    run_main,
    say,
    table,
)
from pynamodb_counters import bulk_save, skip_counting, write_units
from pynamodb_counters.write._send import transact_client

GOAL_WCU_PER_LIKE = 2.5  # the goal, against about 4 for one transaction per like
BULK, BASELINE = "bulk_save()", "PynamoDB, one TransactWrite per like"
Key = Tuple[str, str]


def seed_posts(keys: Sequence[Key], plain_keys: Sequence[Key]) -> Dict[Key, int]:
    """Posts without likes (counter 0), counted ones and plain ones; returns each post's size as written."""
    sizes = {}
    with skip_counting():
        with Post.batch_write() as batch:
            for pk, sk in keys:
                post = Post(pk=pk, sk=sk, like_tally=0, bookmark_count=0)
                batch.save(post)
                sizes[(pk, sk)] = item_bytes(post.serialize())
    with PlainPost.batch_write() as plain_batch:
        for pk, sk in plain_keys:
            plain = PlainPost(pk=pk, sk=sk, like_tally=0)
            plain_batch.save(plain)
            sizes[(pk, sk)] = item_bytes(plain.serialize())
    return sizes


def save_plain(likes: Sequence[PlainLike]) -> None:
    """The baseline: each like as a user writes it without this library, one PynamoDB transaction each."""
    connection = PlainLike._get_connection().connection
    for like in likes:
        with TransactWrite(connection=connection) as transaction:
            transaction.save(like, condition=PlainLike.pk.does_not_exist())
            transaction.update(PlainPost(like.pk, "META"), [PlainPost.like_tally.add(1)],
                               condition=PlainPost.pk.exists())


def make_likes(posts: Sequence[Key], per_post: int, rng: random.Random, tag: str,
               model: Type[Model] = Like) -> List[Any]:
    likes = [model(pk=pk, sk=f"LIKE#USER#{tag}{user:05d}", liked_at=1764460800 + rng.randrange(86400))
             for pk, _ in posts for user in range(per_post)]
    rng.shuffle(likes)  # an import arrives in no particular order; bulk_save groups by parent
    return likes


def model_units(bodies: Sequence[Dict[str, Any]], parent_bytes: Dict[Key, int]) -> Dict[str, float]:
    """WCU of the TransactWriteItems bodies sent, by the cost model, on the real item sizes."""
    put_units = update_units = 0.0
    puts = updates = put_bytes = 0
    for body in bodies:
        for action in body["TransactItems"]:
            ((kind, request),) = action.items()
            if kind == "Put":
                size = item_bytes(request["Item"])
                puts, put_bytes = puts + 1, put_bytes + size
                put_units += write_units(size, transactional=True)
            elif kind == "Update":
                key = (request["Key"]["pk"]["S"], request["Key"]["sk"]["S"])
                updates += 1
                update_units += write_units(parent_bytes[key], transactional=True)
            else:
                raise BenchmarkError(f"unexpected {kind} in an import")
    return {"puts": puts, "updates": updates, "put_wcu": put_units, "update_wcu": update_units,
            "wcu": put_units + update_units, "put_bytes_mean": put_bytes / puts if puts else 0.0}


def stored_sizes(keys: Sequence[Key]) -> Dict[Key, int]:
    connection = Post._get_connection()
    return {key: item_bytes(connection.get_item(key[0], range_key=key[1], consistent_read=True)["Item"])
            for key in keys}


def check_exact(expected: Dict[Key, int]) -> None:
    """Fail loudly unless every post's counter, and its likes counted by a Query, equal what was imported."""
    wrong = []
    for (pk, sk), likes in expected.items():
        counter = Post.get(pk, sk, consistent_read=True).like_tally
        counted = Like.count(pk, Like.sk.startswith("LIKE#"), consistent_read=True)
        if counter != likes or counted != likes:
            wrong.append((pk, likes, counter, counted))
    if wrong:
        raise BenchmarkError(f"{len(wrong)} posts are not exact (post, imported, counter, likes found), e.g. "
                             f"{wrong[:3]}")


def run(options: argparse.Namespace) -> Dict[str, Any]:
    posts_n = options.posts or (20 if options.quick else 100)
    per_post = options.per_post
    one_by_one = options.one_by_one or (500 if options.quick else 1000)
    if one_by_one % per_post:
        raise BenchmarkError(f"--one-by-one ({one_by_one}) must be a multiple of --per-post ({per_post})")
    rng = random.Random(options.seed)
    total = posts_n * per_post
    latencies = options.latencies
    say(f"bulk benchmark: {total:,} likes across {posts_n} posts with bulk_save(), {one_by_one:,} one PynamoDB "
        f"TransactWrite each; at {', '.join(f'{latency * 1000:g}' for latency in latencies)} ms per request; "
        f"{describe_machine()}")
    started_all = time.perf_counter()
    records: List[Dict[str, Any]] = []
    with ChildEngine() as engine:
        point_models_at([Post, Like, PlainPost, PlainLike], engine.endpoint_url)
        Post.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
        counter = RequestCounter().attach(transact_client(Like))
        counter.keep_bodies = True
        for client in {id(c): c for c in (model._get_connection().connection.client
                                          for model in (Like, Post, PlainLike, PlainPost))}.values():
            counter.attach(client)
        keys: List[Key] = []
        for index, latency in enumerate(latencies):
            bulk_posts = [(f"POST#{index}B{n:04d}", "META") for n in range(posts_n)]
            single_posts = [(f"POST#{index}S{n:04d}", "META") for n in range(one_by_one // per_post)]
            keys += bulk_posts + single_posts
            before_sizes = seed_posts(bulk_posts, single_posts)
            bulk_likes = make_likes(bulk_posts, per_post, rng, "B")
            single_likes = make_likes(single_posts, per_post, rng, "S", PlainLike)
            engine.set_latency(latency)
            runs: Dict[str, Tuple[Any, Sequence[Any]]] = {
                BULK: (lambda bulk_likes=bulk_likes: bulk_save(bulk_likes), bulk_likes),
                BASELINE: (lambda single_likes=single_likes: save_plain(single_likes), single_likes),
            }
            modes: Dict[str, Dict[str, Any]] = {}
            for name, (step, likes) in runs.items():
                engine.trim()  # outside the timing: moto's tracked copies of items, then a garbage collection
                gc.collect()
                counter.reset()
                served_before = engine.requests_served
                started = time.perf_counter()
                outcome = step()
                seconds = time.perf_counter() - started
                served = engine.requests_served - served_before
                if served != counter.total or counter.total != counter.by_operation["TransactWriteItems"]:
                    raise BenchmarkError(f"{name}: the engine served {served} requests, the client sent "
                                         f"{dict(counter.by_operation)}")
                if name == BULK and (len(outcome.added) != len(likes) or outcome.requests != served):
                    raise BenchmarkError(f"bulk_save(): {len(outcome.added)} of {len(likes)} added "
                                         f"({len(outcome.rejected)} rejected, {len(outcome.failed)} failed), "
                                         f"{outcome.requests} requests reported, {served} served")
                modes[name] = {"likes": len(likes), "seconds": seconds, "requests": served,
                               "bodies": list(counter.transact_bodies),
                               "actions_per_request_min": min(counter.transact_actions),
                               "actions_per_request_max": max(counter.transact_actions)}
                say(f"  {latency * 1000:g} ms, {name}: {len(likes):,} likes, {served:,} requests, {seconds:.1f} s")
            engine.set_latency(0.0)
            after_sizes = stored_sizes(bulk_posts + single_posts)
            parent_bytes = {key: max(before_sizes[key], after_sizes[key]) for key in after_sizes}
            for name, mode in modes.items():
                units = model_units(mode.pop("bodies"), parent_bytes)
                likes_n = mode["likes"]
                per_like_s = mode["seconds"] / likes_n
                records.append({"mode": name, "latency_s": latency, **mode, **units,
                                "wcu_per_like": units["wcu"] / likes_n,
                                "requests_per_1000_likes": mode["requests"] / likes_n * 1000,
                                "ms_per_like": per_like_s * 1000, "seconds_for_all": per_like_s * total,
                                "extrapolated": likes_n != total,
                                "post_bytes_min": min(parent_bytes.values()),
                                "post_bytes_max": max(parent_bytes.values())})
        check_exact({key: per_post for key in keys})
    say(f"checked: all {len(keys)} counters exact, by GetItem and by a counting Query")

    say()
    say(f"{total:,} likes across {posts_n} posts ({per_post} a post); the baseline ran {one_by_one:,} likes:")
    say(table(["mode", "latency", "requests", "actions/request", "WCU (model)", "WCU per like",
               "requests per 1,000 likes", "wall s", "ms per like", f"s for {total:,}"],
              [[r["mode"], f"{r['latency_s'] * 1000:g} ms", f"{r['requests']:,}",
                f"{r['actions_per_request_min']}-{r['actions_per_request_max']}", f"{r['wcu']:,.0f}",
                f"{r['wcu_per_like']:.2f}", f"{r['requests_per_1000_likes']:,.1f}", f"{r['seconds']:.1f}",
                f"{r['ms_per_like']:.2f}", f"{r['seconds_for_all']:.1f}" + (" (est.)" if r["extrapolated"] else "")]
               for r in records]))
    for bulk, single in zip(records[::2], records[1::2]):
        say(f"{bulk['latency_s'] * 1000:g} ms: a like's Put {bulk['put_bytes_mean']:.0f} B on average in bulk "
            f"(write id included), {single['put_bytes_mean']:.0f} B without this library, a post "
            f"{bulk['post_bytes_min']}-{bulk['post_bytes_max']} B; bulk: {bulk['puts']:,} Puts "
            f"({bulk['put_wcu']:,.0f} WCU) and {bulk['updates']} parent Updates ({bulk['update_wcu']:,.0f} WCU). "
            f"WCU per like {bulk['wcu_per_like']:.2f} against {single['wcu_per_like']:.2f} "
            f"({'within' if bulk['wcu_per_like'] < GOAL_WCU_PER_LIKE else 'NOT within'} the goal of fewer than "
            f"{GOAL_WCU_PER_LIKE}); {single['requests_per_1000_likes'] / bulk['requests_per_1000_likes']:.0f}x "
            f"fewer requests; {single['ms_per_like'] / bulk['ms_per_like']:.1f}x less wall time per like")
    total_seconds = time.perf_counter() - started_all
    say(f"whole benchmark {total_seconds:.1f} s")
    return {"bulk": {"posts": posts_n, "per_post": per_post, "likes": total, "one_by_one": one_by_one,
                     "latencies_s": latencies, "seed": options.seed, "goal_wcu_per_like": GOAL_WCU_PER_LIKE,
                     "modes": records, "counters_checked": len(keys), "total_seconds": total_seconds}}


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bulk",
                                     description="A bulk import of likes with bulk_save() against one PynamoDB "
                                     "transaction per like: WCU by the cost model, requests and wall time, on the "
                                     "served moto engine.", formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--posts", type=int, default=None, help="posts imported in bulk (default 100, quick 20)")
    parser.add_argument("--per-post", type=int, default=100, help="likes per post")
    parser.add_argument("--one-by-one", type=int, default=None,
                        help="likes written one PynamoDB TransactWrite each, the baseline, on other posts "
                        "(default 1,000, quick 500)")
    parser.add_argument("--latencies", type=float, nargs="+", default=[0.0, 0.005],
                        help="seconds of fixed delay per request: the whole comparison runs once at each")
    parser.add_argument("--seed", type=int, default=11, help="random seed of the likes' order and timestamps")
    add_common_options(parser)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run_main(run, parser(), argv)


if __name__ == "__main__":
    raise SystemExit(main())
