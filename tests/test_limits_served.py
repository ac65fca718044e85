"""Limits under real concurrency: threads racing joins into a game on the served engine (one request at a time,
as DynamoDB applies each transaction atomically), with and without injected faults."""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Optional

import pytest

from pynamodb_counters import RetryPolicy, audit
from pynamodb_counters.exceptions import LimitExceededError
from pynamodb_counters.testing.server import ServedMoto
from tests.support import faults
from tests.support.faults import FaultProxy
from tests.support.models import Game, Seat

pytestmark = pytest.mark.served

FAST = RetryPolicy(max_attempts=10, base_delay=0.001, max_delay=0.01)
KEY = ("GAME#race", "META")


def race(joins: int, threads: int) -> Dict[str, List[str]]:
    """``joins`` distinct users join the game from ``threads`` threads; who got in and who was refused."""
    outcomes: Dict[str, List[str]] = {"admitted": [], "refused": [], "other": []}
    lock = threading.Lock()

    def join(n: int) -> None:
        user = f"u{n:03d}"
        outcome: Optional[str] = None
        try:
            Seat(pk=f"SEAT#{user}", sk="SEAT", game_id=KEY[0]).save(retry=FAST)
            outcome = "admitted"
        except LimitExceededError:
            outcome = "refused"
        except Exception as error:  # anything else fails the test below, with its name
            outcome = f"other: {error!r}"
        with lock:
            outcomes["other" if outcome.startswith("other") else outcome].append(user if outcome in (
                "admitted", "refused") else outcome)

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(join, range(joins)))
    return outcomes


def assert_exactly(limit: int, joins: int, outcomes: Dict[str, List[str]]) -> None:
    assert outcomes["other"] == []
    assert len(outcomes["admitted"]) == limit and len(outcomes["refused"]) == joins - limit
    seated = {seat.pk for seat in Seat.scan(Seat.game_id == KEY[0], consistent_read=True)}
    assert seated == {f"SEAT#{user}" for user in outcomes["admitted"]}  # the admitted, and no one else
    assert Game.get(*KEY, consistent_read=True).seated == limit
    assert audit(Game.seated, parents=[KEY]).drifts == ()


@pytest.mark.slow
def test_sixteen_threads_race_two_hundred_joins_into_a_game_of_fifty(served: ServedMoto) -> None:
    Game(pk=KEY[0], sk="META", max_players=50).save()
    assert_exactly(50, 200, race(200, 16))


def test_eight_threads_race_sixty_joins_into_a_game_of_twenty(served: ServedMoto) -> None:
    Game(pk=KEY[0], sk="META", max_players=20).save()
    assert_exactly(20, 60, race(60, 8))


def test_lost_responses_never_turn_a_refusal_into_an_admission_or_the_reverse(proxy: FaultProxy) -> None:
    """A lost response after the engine committed (or refused): the retry must recognise its own committed join
    as admitted, and a refused join stays refused."""
    Game(pk=KEY[0], sk="META", max_players=20).save()
    proxy.set_random_faults(0.3, [faults.LOSE_RESPONSE, faults.CONFLICT], seed=2026)
    outcomes = race(60, 8)
    proxy.clear()
    assert_exactly(20, 60, outcomes)
