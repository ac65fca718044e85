"""Exactly once, whatever Lambda does with the records: hypothesis draws how a stream of expiries is delivered
(batches starting anywhere, records repeated, a handler that dies after its write, partial failures answered
and redelivered from the record named) while invites are written through the library between deliveries; once
the whole stream has been delivered, every counter equals a recount and a replay changes nothing."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Dict, List, Set, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pynamodb_counters.streams import count_expiries
from pynamodb_counters.testing import Backend, lambda_event, stream_records
from tests.support.client_hooks import hooked
from tests.support.models import TABLE_MODELS, DailyInvites, Invite, Team
from tests.support.stream_records import RawKey, expire, ttl_marked

pytestmark = pytest.mark.slow

PAST = datetime(2026, 1, 1, tzinfo=timezone.utc)
TEAMS = ("TEAM#a", "TEAM#b")
NAMES = tuple(f"INVITE#{name}" for name in "abcdefgh")

invites = st.tuples(st.sampled_from(TEAMS), st.sampled_from(NAMES), st.sampled_from(["pending", "accepted"]),
                    st.integers(1, 3), st.sampled_from(["2026-12-01", "2026-12-02"]))
#: one delivery: where the batch starts (a fraction of the stream), how long it is, how many of its records come
#: twice, whether the handler dies after its first write
deliveries = st.tuples(st.floats(0, 1), st.integers(1, 40), st.integers(0, 5), st.booleans())


class Died(BaseException):
    """The handler's process, gone after DynamoDB committed its write."""


def state() -> Tuple[Dict[str, Any], Dict[Tuple[str, str], int]]:
    teams = {pk: (team.invites, team.pending, team.seats, Team.load.total((pk, "META"), consistent_read=True))
             for pk in TEAMS for team in [Team.get(pk, "META", consistent_read=True)]}
    days = {(day.pk, day.sk): day.invites for pk in TEAMS
            for day in DailyInvites.query(pk, DailyInvites.sk.startswith("DAY#"), consistent_read=True)
            if day.invites}
    return teams, days


def recount() -> Tuple[Dict[str, Any], Dict[Tuple[str, str], int]]:
    teams = {pk: [0, 0, 0, 0] for pk in TEAMS}
    days: Dict[Tuple[str, str], int] = {}
    for pk in TEAMS:
        for invite in Invite.query(pk, Invite.sk.startswith("INVITE#"), consistent_read=True):
            totals = teams[pk]
            totals[0] += 1
            totals[1] += invite.status == "pending"
            totals[2] += int(invite.seats)
            totals[3] += 1
            days[(pk, f"DAY#{invite.day}")] = days.get((pk, f"DAY#{invite.day}"), 0) + 1
    return {pk: tuple(totals) for pk, totals in teams.items()}, days


def deliver(records: List[Dict[str, Any]], plan: Tuple[float, int, int, bool]) -> None:
    """One delivery as Lambda makes it: a batch from some record on, some repeated; on a failure, the batch again
    from the first record not applied, until it is all applied."""
    start, length, repeats, dies = plan
    first = min(int(start * len(records)), max(len(records) - 1, 0))
    batch = records[first:first + length]
    batch = batch + batch[:repeats]
    if dies:
        def die(**_: Any) -> None:
            raise Died()

        with hooked("after-call.dynamodb.TransactWriteItems", die, Invite):
            try:
                count_expiries({"Records": batch}, models=[Invite])
            except Died:
                pass  # Lambda saw no answer: it delivers the same batch again
    while batch:
        result = count_expiries({"Records": batch}, models=[Invite])
        failures = result["batchItemFailures"]
        assert result.error is None, result.error
        if not failures:
            return
        index = next(i for i, record in enumerate(batch)
                     if record["dynamodb"]["SequenceNumber"] == failures[0]["itemIdentifier"])
        batch = batch[index:]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(written=st.lists(invites, min_size=1, max_size=12), expiring=st.lists(st.integers(0, 11), max_size=8),
       plans=st.lists(deliveries, max_size=5), later=st.lists(invites, max_size=4))
def test_any_delivery_of_the_stream_takes_each_expiry_off_once(
        written: List[Tuple[str, str, str, int, str]], expiring: List[int],
        plans: List[Tuple[float, int, int, bool]], later: List[Tuple[str, str, str, int, str]]) -> None:
    with Backend("moto", TABLE_MODELS):
        for pk in TEAMS:
            Team(pk=pk, sk="META").save()

        def write(children: List[Tuple[str, str, str, int, str]]) -> None:
            for pk, sk, status, seats, day in children:
                Invite(pk=pk, sk=sk, status=status, seats=seats, day=day, expires=PAST).save(ignore_duplicate=True)

        write(written)
        keys = sorted({(pk, sk) for pk, sk, *_ in written})
        expired: Set[RawKey] = set()
        chosen = sorted({keys[index % len(keys)] for index in expiring})
        expired |= expire("Teams", [{"pk": {"S": pk}, "sk": {"S": sk}} for pk, sk in chosen])
        records = lambda_event(ttl_marked(stream_records(Team), expired), Team)["Records"]
        for number, plan in enumerate(plans):
            deliver(records, plan)
            if number == 0:
                write(later)  # the same keys may be saved again: new children, counted anew
        records = lambda_event(ttl_marked(stream_records(Team), expired), Team)["Records"]
        deliver(records, (0.0, len(records), 0, False))  # the whole stream, at last
        assert state() == recount()
        deliver(records, (0.0, len(records), 3, False))  # and a replay
        assert state() == recount()
