"""The Spark backfill recipe (docs/backfill.rst): counted children written from Spark partitions with bulk_save,
exact, and re-runnable: a second run of the same partitions adds nothing, every child rejected as a duplicate.

The recipe's writes need the served engine (raw moto's threaded server corrupts under the load of the executors'
transactions), one of its own whose transactions back up only the items they name."""
from __future__ import annotations

from itertools import islice
from typing import Any, Callable, Iterable, Iterator, List, Tuple

import pytest

from pynamodb_counters import bulk_save
from pynamodb_counters.exceptions import DuplicateChildError
from pynamodb_counters.testing import Backend, ServedMoto, assert_counters_exact
from tests.support.factories import likes, post, snapshot, tally
from tests.support.models import Like, Post

pytestmark = pytest.mark.spark

POSTS = 20
LIKES = 2_000
PARTITIONS = 4

#: one batch's outcome: (added, duplicates, other refusals, failed, committed transactions)
Outcome = Tuple[int, int, int, int, int]

#: rows a task holds at once (the recipe's 10,000; smaller here, so that a partition takes several batches)
BATCH = 300


def save_likes(rows: Iterable[Any], batch: int = 10_000) -> Iterator[Outcome]:
    """The recipe's partition function: the partition's likes, ``batch`` rows at a time, each batch in
    transactions of up to 100 actions."""
    pending = iter(rows)
    while True:
        children = [Like(pk=row.post, sk=f"LIKE#USER#{row.user}", liked_at=row.liked_at)
                    for row in islice(pending, batch)]
        if not children:
            return
        result = bulk_save(children)
        duplicates = sum(isinstance(outcome.error, DuplicateChildError) for outcome in result.rejected)
        yield (len(result.added), duplicates, len(result.rejected) - duplicates, len(result.failed),
               len(result.results))


def on_engine(endpoint: str) -> Callable[[Iterable[Any]], Iterator[Outcome]]:
    """:func:`save_likes` with the executor's models pointed at the test's engine first: a real job's executors
    import models already configured for their table."""

    def partition(rows: Iterable[Any]) -> Iterator[Outcome]:
        for model in (Post, Like):
            if model.Meta.host != endpoint:
                model.Meta.host = endpoint
                model._connection = None
        return save_likes(rows, BATCH)

    return partition


def total(outcomes: List[Outcome]) -> Outcome:
    added, duplicates, refused, failed, transactions = (sum(column) for column in zip(*outcomes))
    return added, duplicates, refused, failed, transactions


@pytest.fixture
def engine(counters_models: List[type]) -> Iterator[str]:
    """A served engine of this test's own, its transactions backing up only the items they name (stock moto
    copies every table for each action), with the test tables created: its endpoint."""
    with ServedMoto(item_backups=True) as served, Backend("served", counters_models, served.endpoint_url):
        yield served.endpoint_url


def test_likes_written_from_spark_partitions_are_counted_exactly_and_a_rerun_adds_nothing(spark: Any,
                                                                                         engine: str) -> None:
    for n in range(POSTS):
        post(f"POST#{n:02d}")
    rows = [(f"POST#{n % POSTS:02d}", f"u{n}", 1750636800 + n) for n in range(LIKES)]
    partitions = (spark.createDataFrame(rows + rows[:10], ["post", "user", "liked_at"])
                  .dropDuplicates(["post", "user"])  # bulk_save refuses a child twice in one call
                  .repartition(PARTITIONS, "post")  # a post's likes in one task,
                  .sortWithinPartitions("post")  # and together in its batches
                  .rdd)

    batches = partitions.mapPartitions(on_engine(engine)).collect()
    added, duplicates, refused, failed, transactions = total(batches)
    assert (added, duplicates, refused, failed) == (LIKES, 0, 0, 0)
    assert transactions <= LIKES // 98 + len(batches)  # 98 or 99 likes and their posts' Updates per transaction
    assert {tally(f"POST#{n:02d}") for n in range(POSTS)} == {likes(f"POST#{n:02d}") for n in range(POSTS)} == {
        LIKES // POSTS}
    assert_counters_exact(Post.like_tally)

    before = snapshot()
    added, duplicates, refused, failed, transactions = total(partitions.mapPartitions(on_engine(engine)).collect())
    assert (added, duplicates, refused, failed, transactions) == (0, LIKES, 0, 0, 0)
    assert snapshot() == before
