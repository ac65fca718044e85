"""Children that expire under concurrency, on the served engine: 8 threads save, edit and delete invites through
the library while a handler takes off the expiries of others from the table's real stream, each batch delivered
twice and records repeated within a batch. Afterwards every counter equals a recount of the children, and a replay
of the whole stream changes nothing."""
from __future__ import annotations

import random
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional, Set, Tuple

import pytest

from pynamodb_counters import RetryPolicy, audit, not_a_shard
from pynamodb_counters.exceptions import DuplicateChildError, MissingChildError, RetriesExhaustedError
from pynamodb_counters.streams import count_expiries
from pynamodb_counters.testing import lambda_event, stream_records
from pynamodb_counters.testing.server import ServedMoto
from tests.support import faults
from tests.support.faults import FaultProxy
from tests.support.models import DailyInvites, Invite, Team
from tests.support.stream_records import RawKey, expire, ttl_marked

pytestmark = pytest.mark.served

FAST = RetryPolicy(max_attempts=10, base_delay=0.001, max_delay=0.01)
TEAMS = 4
EXPIRING = 42  # invites the handler sees expire
STEPS = 240  # the workers' saves, edits and deletes
PAST = datetime(2026, 1, 1, tzinfo=timezone.utc)


def counted(host: str) -> Dict[str, Any]:
    """Every team's counters and every rollup, as stored."""
    teams = {team.pk: (team.invites, team.pending, team.seats, Team.load.total((team.pk, "META"), consistent_read=True))
             for team in Team.scan((Team.sk == "META") & not_a_shard(), consistent_read=True)}
    days = {(day.pk, day.sk): day.invites
            for day in DailyInvites.scan(DailyInvites.sk.startswith("DAY#"), consistent_read=True)}
    return {"teams": teams, "days": days}


def recount() -> Dict[str, Any]:
    """The same, recounted from the stored invites."""
    teams: Dict[str, List[int]] = {f"TEAM#{n}": [0, 0, 0, 0] for n in range(TEAMS)}
    days: Dict[Tuple[str, str], int] = {}
    for invite in Invite.scan(Invite.sk.startswith("INVITE#"), consistent_read=True):
        totals = teams[invite.pk]
        totals[0] += 1
        totals[1] += invite.status == "pending"
        totals[2] += int(invite.seats)
        totals[3] += 1
        days[(invite.pk, f"DAY#{invite.day}")] = days.get((invite.pk, f"DAY#{invite.day}"), 0) + 1
    return {"teams": {pk: tuple(totals) for pk, totals in teams.items()}, "days": days}


@pytest.mark.slow
def test_expiries_taken_off_while_eight_threads_write_stay_exact_and_a_replay_changes_nothing(
        served: ServedMoto) -> None:
    host = served.endpoint_url
    for n in range(TEAMS):
        Team(pk=f"TEAM#{n}", sk="META").save()
    rng = random.Random(22)
    expiring = [(f"TEAM#{n % TEAMS}", f"INVITE#x{n}") for n in range(EXPIRING)]
    for pk, sk in expiring:
        Invite(pk=pk, sk=sk, status=rng.choice(["pending", "accepted"]), seats=rng.randrange(1, 4),
               day=rng.choice(["2026-12-01", "2026-12-02"]), expires=PAST).save()
    plan = [(rng.choice(["save", "save", "edit", "delete"]), f"TEAM#{rng.randrange(TEAMS)}",
             f"INVITE#w{rng.randrange(80)}", rng.randrange(1, 4)) for _ in range(STEPS)]
    unexpected: List[str] = []
    lock = threading.Lock()

    def act(step: Tuple[str, str, str, int]) -> None:
        op, pk, sk, seats = step
        try:
            if op == "save":
                Invite(pk=pk, sk=sk, seats=seats).save(retry=FAST)
            elif op == "edit":
                invite = Invite.get(pk, sk, consistent_read=True)
                invite.status = "accepted" if invite.status == "pending" else "pending"
                invite.seats = seats
                invite.save(retry=FAST)
            else:
                Invite(pk=pk, sk=sk).delete(retry=FAST)
        except (DuplicateChildError, MissingChildError, Invite.DoesNotExist):
            pass  # an invite saved twice, or an edit or delete of one deleted meanwhile: refused, nothing written
        except Exception as error:  # noqa: BLE001 - collected, asserted empty
            with lock:
                unexpected.append(repr(error))

    expired: Set[RawKey] = set()
    handled: List[Any] = []

    def handler() -> None:
        """Expire the invites a few at a time and deliver each batch of new records twice, some records repeated."""
        after: Optional[str] = None
        for start in range(0, EXPIRING, 7):
            keys = [{"pk": {"S": pk}, "sk": {"S": sk}} for pk, sk in expiring[start:start + 7]]
            expired.update(expire("Teams", keys, host))
            records = stream_records(Team, after=after)
            if not records:
                continue
            after = records[-1]["dynamodb"]["SequenceNumber"]
            batch = lambda_event(ttl_marked(records, expired), Team)
            batch["Records"] += batch["Records"][: len(batch["Records"]) // 3]  # repeated within the batch
            for _ in range(2):  # and the whole batch delivered again
                result = count_expiries(batch, models=[Invite], retry=FAST)
                handled.append(result)

    with ThreadPoolExecutor(9) as pool:
        done = pool.submit(handler)
        list(pool.map(act, plan))
        done.result()
    records = stream_records(Team)  # the records written after the handler's last read
    last = count_expiries(lambda_event(ttl_marked(records, expired), Team), models=[Invite], retry=FAST)
    handled.append(last)

    assert unexpected == []
    assert all(result == {"batchItemFailures": []} for result in handled), [r.error for r in handled if r.error]
    assert sum(len(result.counted) for result in handled) == EXPIRING  # each expiry taken off once
    assert not any(sk.startswith("INVITE#x") for sk in (i.sk for i in Invite.scan(consistent_read=True)))
    exact = counted(host)
    assert exact["teams"] == recount()["teams"]
    assert {key: count for key, count in exact["days"].items() if count} == recount()["days"]
    for counter in (Team.invites, Team.pending, Team.seats, Team.load):
        assert not audit(counter).drifts

    replay = count_expiries(lambda_event(ttl_marked(stream_records(Team), expired), Team),
                            models=[Invite], retry=FAST)  # the whole stream, from TRIM_HORIZON
    assert replay == {"batchItemFailures": []} and replay.counted == ()
    assert counted(host) == exact


def _one_expiry(host: str) -> Dict[str, Any]:
    """A team with two invites, one expired: the Lambda event of the stream so far."""
    Team(pk="TEAM#0", sk="META").save()
    for sk in ("INVITE#ann", "INVITE#bob"):
        Invite(pk="TEAM#0", sk=sk, expires=PAST).save()
    expired = expire("Teams", [{"pk": {"S": "TEAM#0"}, "sk": {"S": "INVITE#ann"}}], host)
    return lambda_event(ttl_marked(stream_records(Team), expired), Team)


def _invites() -> int:
    return Team.get("TEAM#0", "META", consistent_read=True).invites


def test_a_handler_whose_responses_are_lost_fails_the_batch_and_its_redelivery_counts_once(
        served: ServedMoto, proxy: FaultProxy) -> None:
    """At the transport: the transaction commits, every response is lost, the handler gives up (Lambda has no
    checkpoint for the batch) and Lambda delivers it again."""
    batch = _one_expiry(served.endpoint_url)
    proxy.inject(faults.LOSE_RESPONSE, times=3)
    failed = count_expiries(batch, models=[Invite], retry=RetryPolicy(max_attempts=3, base_delay=0))
    assert isinstance(failed.error, RetriesExhaustedError) and failed["batchItemFailures"]
    assert proxy.injected["LOSE_RESPONSE"] == 3 and _invites() == 1  # it had committed
    again = count_expiries(batch, models=[Invite], retry=FAST)
    assert again == {"batchItemFailures": []} and again.counted == () and _invites() == 1


def test_lost_responses_and_conflicts_retried_by_the_handler_count_once(served: ServedMoto,
                                                                        proxy: FaultProxy) -> None:
    batch = _one_expiry(served.endpoint_url)
    proxy.inject(faults.CONFLICT, times=2)
    proxy.inject(faults.LOSE_RESPONSE, times=2)
    result = count_expiries(batch, models=[Invite], retry=FAST)
    assert result == {"batchItemFailures": []} and len(result.counted) == 1 and _invites() == 1
    assert proxy.injected["CONFLICT"] == 2 and proxy.injected["LOSE_RESPONSE"] == 2
