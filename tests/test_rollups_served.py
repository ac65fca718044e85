"""Rollups under concurrency on the served engine: claps over 30 simulated days on 10 shows, with deletes; every
daily item equals a recount, and each show's total equals the sum of its days."""
from __future__ import annotations

import random
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, Iterator, List, Tuple

import pytest

from pynamodb_counters import RetryPolicy, audit
from pynamodb_counters.exceptions import DuplicateChildError, MissingChildError
from pynamodb_counters.testing import Backend
from pynamodb_counters.testing.server import ServedMoto
from tests.support.models import Clap, DailyClaps, Show

pytestmark = pytest.mark.served

FAST = RetryPolicy(max_attempts=10, base_delay=0.001, max_delay=0.01)
DAY_ZERO = 1795996800  # 2026-11-30T00:00:00Z: the buckets stay live for the audit (they expire 90 days later)


@pytest.fixture
def large(counters_models: List[type]) -> Iterator[ServedMoto]:
    """A served engine of its own whose transactions back up only the items they name: thousands of items, and
    stock moto would copy every table for each action of each transaction."""
    with ServedMoto(item_backups=True) as engine, Backend("served", counters_models, engine.endpoint_url):
        yield engine


def run(claps: int, shows: int, days: int, threads: int, seed: int) -> None:
    for n in range(shows):
        Show(pk=f"SHOW#{n}", sk="META").save()
    rng = random.Random(seed)
    plan: List[Tuple[str, int, int, int]] = []  # (op, show, user, day)
    for _ in range(claps):
        plan.append(("clap", rng.randrange(shows), rng.randrange(claps // 4), rng.randrange(days)))
        if rng.random() < 0.15:  # an unclap of something clapped earlier (maybe already gone)
            _, show, user, day = plan[rng.randrange(len(plan))]
            plan.append(("unclap", show, user, day))
    unexpected: List[str] = []
    lock = threading.Lock()

    def act(step: Tuple[str, int, int, int]) -> None:
        op, show, user, day = step
        clap = Clap(pk=f"SHOW#{show}", sk=f"CLAP#USER#{user}#{day}", day=f"D{day:02d}",
                    clapped_at=DAY_ZERO + day * 86400)
        try:
            if op == "clap":
                clap.save(retry=FAST)
            else:
                clap.delete(retry=FAST)
        except (DuplicateChildError, MissingChildError):
            pass  # the same user clapping twice that day, or an unclap of what is gone: refused, nothing written
        except Exception as error:
            with lock:
                unexpected.append(repr(error))

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(act, plan))
    assert unexpected == []

    stored_claps = list(Clap.scan(Clap.sk.startswith("CLAP#"), consistent_read=True))
    by_day: Counter[Tuple[str, str]] = Counter((c.pk, f"DAY#{c.day}") for c in stored_claps)
    buckets: Dict[Tuple[str, str], int] = {(b.pk, b.sk): b.claps for b in
                                           DailyClaps.scan(DailyClaps.sk.startswith("DAY#"), consistent_read=True)}
    assert {key: count for key, count in buckets.items() if count} == dict(by_day)  # every day equals a recount
    for n in range(shows):
        total = Show.get(f"SHOW#{n}", "META", consistent_read=True).clap_total
        assert total == sum(count for (pk, _), count in buckets.items() if pk == f"SHOW#{n}")
    assert audit(DailyClaps.claps).drifts == () and audit(Show.clap_total).drifts == ()


@pytest.mark.slow
def test_five_thousand_claps_over_thirty_days_on_ten_shows(large: ServedMoto) -> None:
    run(claps=5000, shows=10, days=30, threads=8, seed=2026)


@pytest.mark.slow
def test_five_hundred_claps_over_a_week_on_three_shows(large: ServedMoto) -> None:
    run(claps=500, shows=3, days=7, threads=4, seed=1130)


@pytest.mark.slow
def test_unclaps_racing_the_first_clap_of_each_day_never_leave_a_rollup_counting_a_deleted_clap(
        served: ServedMoto) -> None:
    """The race the 5,000-clap run once found, made frequent: each round, on a day no clap has reached yet, two
    unclaps and the clap they undo start together. Whatever the order, the day's rollup (if any) equals its
    recount, and the show's total equals the claps stored."""
    Show(pk="SHOW#race", sk="META").save()
    rounds, racers = 60, 3
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()

    def act(args: Tuple[int, int]) -> None:
        day, role = args
        clap = Clap(pk="SHOW#race", sk=f"CLAP#USER#u#{day}", day=f"R{day:03d}", clapped_at=DAY_ZERO + day)
        try:
            outcome = "saved" if role == 0 and clap.save(retry=FAST) else "deleted" if clap.delete(retry=FAST) else ""
        except (DuplicateChildError, MissingChildError) as error:
            outcome = type(error).__name__
        with lock:
            outcomes[outcome] += 1

    with ThreadPoolExecutor(racers * 2) as pool:
        for start in range(0, rounds, 2):  # two days at a time, each with its clap and two unclaps
            list(pool.map(act, [(day, role) for day in (start, start + 1) for role in range(racers)]))
    stored = Counter(c.day for c in Clap.query("SHOW#race", Clap.sk.startswith("CLAP#"), consistent_read=True))
    buckets = {b.sk[len("DAY#"):]: b.claps
               for b in DailyClaps.query("SHOW#race", DailyClaps.sk.startswith("DAY#"), consistent_read=True)}
    assert {day: count for day, count in buckets.items() if count} == dict(stored)
    assert Show.get("SHOW#race", "META", consistent_read=True).clap_total == sum(stored.values())
    assert outcomes["saved"] == rounds and outcomes["deleted"] + outcomes["MissingChildError"] == rounds * 2
