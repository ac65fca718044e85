"""
Benchmark: likes counted from the stream (``counting="stream"``) against the transactional mode, and against what
a user writes without this library.

::

    python -m benchmarks.stream             # 100 likes of one post, and one like on each of 100 posts: seconds
    python -m benchmarks.stream --likes 1000
    python -m benchmarks.stream --json s.json

On moto in-process, with the table's stream on. Two scenarios, each written three ways on fresh tables:

* **transaction**: the library's default, one TransactWriteItems per like (the like's Put, the post's ADD);
* **stream**: the like written as plain PynamoDB writes it (one PutItem), then ``count_stream`` on the table's
  stream records, in one batch (as a Lambda with a batch size of at least the likes gets them);
* **stream, another partition**: the same, the like stored under its user (in a table of its own, with a
  ``TTLAttribute``), so that ``count_stream`` counts each record with a marker of its own, in transactions with
  the post's merged update;
* **per record, by hand**: the baseline, the stream aggregator a user writes without this library (AWS's sample):
  a PutItem per like, then one UpdateItem ``ADD like_tally 1`` per stream record. It is not exact (a batch
  delivered again counts twice): it is the floor of the work.

Per like it reports the write capacity by the library's cost model (:func:`pynamodb_counters.write_units`, of each
item as stored: transactional writes count twice) and the requests: both are what DynamoDB bills, and neither
depends on the machine. Wall time is not reported: on moto in-process it is dominated by moto's own copy of every
table before each transaction action, which DynamoDB does not do. Every post's counter must equal its likes
afterwards (in the baseline too), or the benchmark fails.
"""
from __future__ import annotations

import argparse
import os
from typing import Any, Dict, List, Optional, Sequence

from pynamodb.attributes import NumberAttribute, TTLAttribute, UnicodeAttribute
from pynamodb.constants import STREAM_NEW_AND_OLD_IMAGE
from pynamodb.models import Model
from pynamodb.signals import pre_dynamodb_send

from benchmarks._shared import BenchmarkError, add_common_options, run_main, say, stream_records, table
from pynamodb_counters import CounterField, CounterMixin, counted_by, item_bytes, write_units
from pynamodb_counters.streams import count_stream
from pynamodb_counters.testing import Backend

REGION = "us-east-1"


def _meta(table_name: str) -> type:
    class Meta:
        region = REGION
        stream_view_type = STREAM_NEW_AND_OLD_IMAGE

    Meta.table_name = table_name  # type: ignore[attr-defined]
    return Meta


def _models(table_name: str, counting: Optional[str], likes_table: Optional[str] = None) -> Any:
    """A post and its likes in ``table_name``: counted in transactions, from the stream, or (``None``) plain. With
    ``likes_table``, the likes are stored there, each under its user (``pk``, the sort key ``sk`` its post's key),
    outside their post's partition."""
    bases = (CounterMixin, Model) if counting else (Model,)
    post = type(f"Post_{table_name}", bases, {
        "Meta": _meta(table_name), "pk": UnicodeAttribute(hash_key=True), "sk": UnicodeAttribute(range_key=True),
        "like_tally": CounterField() if counting else NumberAttribute(default=0)})
    attrs: Dict[str, Any] = {"Meta": _meta(likes_table or table_name), "pk": UnicodeAttribute(hash_key=True),
                             "sk": UnicodeAttribute(range_key=True)}
    if likes_table:
        attrs["expires_at"] = TTLAttribute(null=True)  # the markers expire through it
        attrs["post"] = counted_by(post.like_tally, key=lambda like: (like.sk, "META"), counting="stream")
    elif counting:
        attrs["post"] = counted_by(post.like_tally, key=lambda like: (like.pk, "META"), prefix="LIKE#",
                                   counting=counting)
    like = type(f"Like_{likes_table or table_name}", bases, attrs)
    return post, like


TRANSACTION = _models("BenchLikesTx", "transaction")
STREAM = _models("BenchLikesStream", "stream")
ELSEWHERE = _models("BenchPostsElsewhere", "stream", likes_table="BenchLikesElsewhere")
PLAIN = _models("BenchLikesPlain", None)
MODES = {"transaction": TRANSACTION, "stream": STREAM, "stream, another partition": ELSEWHERE, "by hand": PLAIN}


def _raw(table_name: str, pk: str, sk: str) -> Dict[str, Any]:
    import boto3

    item: Dict[str, Any] = boto3.client("dynamodb", region_name=REGION).get_item(
        TableName=table_name, Key={"pk": {"S": pk}, "sk": {"S": sk}}, ConsistentRead=True)["Item"]
    return item


def _run(mode: str, posts: Sequence[str], likes: Sequence[str]) -> Dict[str, Any]:
    """One mode on fresh tables: the posts, then every like (``likes`` per post cycle), counted."""
    post_model, like_model = MODES[mode]
    name, likes_name = post_model.Meta.table_name, like_model.Meta.table_name
    elsewhere = name != likes_name
    with Backend("moto", [post_model, like_model]):
        for pk in posts:
            post_model(pk=pk, sk="META").save()
        for user in likes:
            for pk in posts:
                (like_model(pk=user, sk=pk) if elsewhere else like_model(pk=pk, sk=f"LIKE#{user}")).save()
        requests = len(likes) * len(posts)
        handler_units = 0.0
        records = [record for record in stream_records(likes_name)
                   if elsewhere or record["dynamodb"]["Keys"]["sk"]["S"].startswith("LIKE#")]
        if mode.startswith("stream"):
            sent: List[str] = []

            def request(_: Any, operation_name: str, **__: Any) -> None:
                sent.append(operation_name)

            with pre_dynamodb_send.connected_to(request):
                result = count_stream({"Records": records}, models=[like_model])
            if result.error is not None:
                raise BenchmarkError(f"count_stream failed: {result.error}")
            handler_units, requests = result.write_units, requests + len(sent)
        elif mode == "by hand":
            for record in records:
                keys = record["dynamodb"]["Keys"]
                post_model(pk=keys["pk"]["S"], sk="META").update(actions=[post_model.like_tally.add(1)])
                handler_units += write_units(item_bytes(_raw(name, keys["pk"]["S"], "META")))
            requests += len(records)
        like_bytes = item_bytes(_raw(likes_name, likes[0], posts[0]) if elsewhere else
                                _raw(name, posts[0], f"LIKE#{likes[0]}"))
        post_bytes = item_bytes(_raw(name, posts[0], "META"))
        for pk in posts:
            counted = post_model.get(pk, "META", consistent_read=True).like_tally
            if counted != len(likes):
                raise BenchmarkError(f"{mode}: {pk} holds {counted}, not {len(likes)}")
    total = len(likes) * len(posts)
    if mode == "transaction":
        units = total * (write_units(like_bytes, transactional=True) + write_units(post_bytes, transactional=True))
    else:
        units = total * write_units(like_bytes) + handler_units
    return {"wcu_per_like": units / total, "requests_per_like": requests / total}


def run(options: argparse.Namespace) -> Dict[str, Any]:
    os.environ.setdefault("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")  # botocore then reaches moto's streams
    scenarios = {"likes of one post": (["POST#hot"], [f"USER#u{n}" for n in range(options.likes)]),
                 "one like on each of many posts": ([f"POST#p{n}" for n in range(options.likes)], ["USER#u0"])}
    figures: Dict[str, Any] = {"likes": options.likes, "scenarios": {}}
    rows: List[List[str]] = []
    for scenario, (posts, likes) in scenarios.items():
        figures["scenarios"][scenario] = {}
        for mode in MODES:
            figure = _run(mode, posts, likes)
            base = figures["scenarios"][scenario].get("transaction", figure)["wcu_per_like"]
            figure["wcu_vs_transaction"] = figure["wcu_per_like"] / base
            figures["scenarios"][scenario][mode] = figure
            rows.append([scenario, mode, f"{figure['wcu_per_like']:.2f}", f"{figure['wcu_vs_transaction']:.2f}x",
                         f"{figure['requests_per_like']:.2f}"])
    say(table(["scenario", "mode", "WCU per like", "vs transaction", "requests per like"], rows, "llrrr"))
    return figures


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.stream", description=__doc__.split("::")[0])
    parser.add_argument("--likes", type=int, default=100, help="likes per scenario (default 100)")
    add_common_options(parser)
    return run_main(run, parser, argv)


if __name__ == "__main__":
    raise SystemExit(main())
