"""Concurrency, lost responses and injected faults, over real HTTP on the served, serialised moto engine.

The engine serves one request at a time, as DynamoDB applies each transaction atomically; the fault proxy sits
between botocore and the engine and loses responses after the engine committed, resets connections, and answers
conflicts and throttling. moto ignores ClientRequestToken, so every recovery here is the library's own.
"""
from __future__ import annotations

import random
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List

import pytest

from pynamodb_counters import RetryPolicy, signals
from pynamodb_counters.exceptions import DuplicateChildError, MissingChildError, RetriesExhaustedError
from pynamodb_counters.testing.server import ServedMoto
from tests.support import faults
from tests.support.factories import like, post
from tests.support.faults import FaultProxy
from tests.support.models import Like, Post

pytestmark = pytest.mark.served

FAST = RetryPolicy(max_attempts=8, base_delay=0.001, max_delay=0.01)


def counted_state() -> Dict[str, int]:
    return {"tally": Post.get("POST#a91f", "META", consistent_read=True).like_tally,
            "items": Like.count("POST#a91f", Like.sk.startswith("LIKE#"), consistent_read=True)}


class Events:
    """Thread-safe record of the library's signals."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: Dict[str, int] = {}

    def receiver(self, name: str) -> Any:
        def receive(sender: Any, **kwargs: Any) -> None:
            with self.lock:
                self.counts[name] = self.counts.get(name, 0) + 1
        return receive


@pytest.mark.slow
def test_eight_threads_liking_one_post_keep_the_counter_exact(served: ServedMoto) -> None:
    post()
    rng = random.Random(20261130)
    users = [f"u{n:03d}" for n in range(640)]
    # 800 likes: 640 distinct users plus 160 duplicates (20%), shuffled, with an unlike after every 4th like
    likes = users + rng.sample(users, 160)
    rng.shuffle(likes)
    plans: List[List[Any]] = [[] for _ in range(8)]
    for n, user in enumerate(likes):
        plans[n % 8].append(("like", user))
        if n % 4 == 3:
            plans[n % 8].append(("unlike", rng.choice(likes[: n + 1])))
    tallies = {"added": 0, "duplicate": 0, "removed": 0, "missing": 0}
    lock = threading.Lock()

    def run(ops: List[Any]) -> None:
        for op, user in ops:
            try:
                if op == "like":
                    like(user).save(retry=FAST)
                    outcome = "added"
                else:
                    like(user).delete(retry=FAST)
                    outcome = "removed"
            except DuplicateChildError:
                outcome = "duplicate"
            except MissingChildError:
                outcome = "missing"
            with lock:
                tallies[outcome] += 1

    events = Events()
    with signals.child_added.connected_to(events.receiver("added"), sender=Like), \
            signals.child_removed.connected_to(events.receiver("removed"), sender=Like):
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(run, plans))
    state = counted_state()
    assert state["tally"] == state["items"] == tallies["added"] - tallies["removed"]
    assert sum(tallies.values()) == 800 + 200
    assert tallies["duplicate"] > 0 and tallies["missing"] > 0 and tallies["removed"] > 0
    assert events.counts == {"added": tallies["added"], "removed": tallies["removed"]}


def test_lost_responses_never_count_twice_nor_report_a_false_duplicate(proxy: FaultProxy) -> None:
    post()
    events = Events()
    proxy.inject(faults.LOSE_RESPONSE, times=5)  # more in a row than botocore would retry (3 or 5)
    with signals.duplicate_rejected.connected_to(events.receiver("duplicate")), \
            signals.missing_rejected.connected_to(events.receiver("missing")):
        result = like("7c20").save(retry=FAST)
        assert result.recovered and result.attempts == 6
        assert not result.uncertain  # proven: the stored like carries this write's id
        assert counted_state() == {"tally": 1, "items": 1}

        proxy.inject(faults.LOSE_RESPONSE, times=5)
        result = like("7c20").delete(retry=FAST)
        assert result.recovered and result.attempts == 6
        assert result.uncertain  # a deleted child leaves no proof: the like is gone either way
        assert counted_state() == {"tally": 0, "items": 0}
    assert proxy.injected["LOSE_RESPONSE"] == 10
    assert events.counts == {}


def test_a_caller_retrying_with_the_same_token_gets_success(proxy: FaultProxy) -> None:
    post()
    proxy.inject(faults.LOSE_RESPONSE, times=3)
    with pytest.raises(RetriesExhaustedError) as caught:
        like("7c20").save(retry=RetryPolicy(max_attempts=3, base_delay=0), token="idem-key-1")
    assert caught.value.ambiguous  # it did land: the outcome was unknown to the caller
    result = like("7c20").save(retry=FAST, token="idem-key-1")  # the caller's retry, same idempotency key
    assert result.recovered
    with pytest.raises(DuplicateChildError):
        like("7c20").save(retry=FAST, token="idem-key-2")  # a different write is a real duplicate
    assert counted_state() == {"tally": 1, "items": 1}


def test_injected_conflicts_are_retried_until_the_write_lands(proxy: FaultProxy) -> None:
    post()
    proxy.inject(faults.CONFLICT, times=6)
    result = like("7c20").save(retry=FAST)
    assert result.attempts == 7 and not result.recovered
    assert proxy.injected["CONFLICT"] == 6
    assert counted_state() == {"tally": 1, "items": 1}


@pytest.mark.parametrize("fault", [faults.THROTTLE, faults.SERVER_ERROR, faults.RESET_BEFORE],
                         ids=lambda f: f.name)
def test_transient_faults_are_retried(proxy: FaultProxy, fault: faults.Fault) -> None:
    post()
    proxy.inject(fault, times=3)
    result = like("7c20").save(retry=FAST)
    assert result.attempts == 4
    assert counted_state() == {"tally": 1, "items": 1}


@pytest.mark.slow
def test_a_response_slower_than_the_read_timeout_is_retried_safely(proxy: FaultProxy,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    post()
    monkeypatch.setattr(Like.Meta, "read_timeout_seconds", 1)
    monkeypatch.setattr(Like, "_connection", None)
    proxy.inject(faults.delay(3), times=1)
    result = like("7c20").save(retry=FAST)
    monkeypatch.undo()
    Like._connection = None
    assert result.recovered and result.attempts == 2
    assert counted_state() == {"tally": 1, "items": 1}


@pytest.mark.parametrize("fault, ambiguous", [
    (faults.THROTTLE, False),  # DynamoDB answered: certainly not applied
    (faults.RESET_BEFORE, True),  # the connection died after the request was sent: the client cannot know
])
def test_exhausted_retries_say_whether_the_write_may_have_landed(proxy: FaultProxy, fault: faults.Fault,
                                                                 ambiguous: bool) -> None:
    post()
    proxy.inject(fault, times=3)
    with pytest.raises(RetriesExhaustedError) as caught:
        like("7c20").save(retry=RetryPolicy(max_attempts=3, base_delay=0))
    assert caught.value.ambiguous is ambiguous and caught.value.attempts == 3
    assert counted_state() == {"tally": 0, "items": 0}
    assert like("7c20").save(retry=FAST).attempts == 1  # the write can simply be made again
