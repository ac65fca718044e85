"""The commit's recoveries, one test each: what a refused attempt teaches, applied in the same call. Each test
makes the refusal happen for real (another writer, a rollup expired, shard items missing) and checks that the
recovery named, and only it, applied; then that the write landed as counted from what it learned."""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest
from botocore.exceptions import ClientError

from pynamodb_counters import RetryPolicy, bulk_save
from pynamodb_counters.exceptions import ConditionFailedError, LimitExceededError, RetriesExhaustedError
from pynamodb_counters.streams import count_expiries
from pynamodb_counters.transport import Call, Interceptor, intercepting
from pynamodb_counters.write._actions import ParentUpdate
from pynamodb_counters.write._recoveries import (
    BULK_RECOVERIES,
    MARKER_RECOVERIES,
    RECOVERIES,
    DeletedMeanwhile,
    MissingShards,
    RefusedLeftOut,
    RollupsGone,
    RollupsReturned,
    RoomMadeMeanwhile,
    StaleBasis,
    TakenOffAlready,
    next_token,
)
from tests.support.client_hooks import BeforeTransactions
from tests.support.factories import like, post, raw_client
from tests.support.models import Clap, DailyClaps, Game, Invite, Message, Player, Show, Thread, Video, View

pytestmark = pytest.mark.usefixtures("dynamodb")


@pytest.fixture
def applied(monkeypatch: pytest.MonkeyPatch) -> Iterator[List[str]]:
    """The names of the recoveries that applied, in the order the commit applied them."""
    names: List[str] = []
    for kind in {type(recovery) for recovery in BULK_RECOVERIES + MARKER_RECOVERIES}:
        if kind.asks:  # a decision loop: its answer is what it returns

            def steps(self: Any, countings: Any, cancelled: Any, _real: Callable[..., Any] = kind.steps) -> Any:
                done = yield from _real(self, countings, cancelled)
                if done:
                    names.append(type(self).__name__)
                return done

            monkeypatch.setattr(kind, "steps", steps)
            continue

        def spy(self: Any, countings: Any, cancelled: Any, _real: Callable[..., bool] = kind.recover) -> bool:
            done = _real(self, countings, cancelled)
            if done:
                names.append(type(self).__name__)
            return done

        monkeypatch.setattr(kind, "recover", spy)
    yield names


def counts() -> tuple:
    thread = Thread.get("THREAD#t1", "META", consistent_read=True)
    return thread.message_count, thread.published_count, thread.word_total


def loaded() -> Message:
    return Message.get("MSG#1", "MSG", consistent_read=True)


def stale_copy() -> Message:
    """A draft of 10 words, loaded, then published by another writer, and edited to 3 words in the stale copy:
    its save is refused once (counted from a draft), then counted from the published message."""
    Thread(pk="THREAD#t1", sk="META").save()
    Message(pk="MSG#1", sk="MSG", thread_id="THREAD#t1", words=10).save()
    mine, other = loaded(), loaded()
    other.status = "published"
    other.save()
    mine.words = 3
    return mine


def test_the_recoveries_are_asked_in_their_documented_order() -> None:
    assert [type(recovery).__name__ for recovery in RECOVERIES] == \
        ["StaleBasis", "DeletedMeanwhile", "RollupsReturned", "RollupsGone", "StreamParentsGone", "MissingShards"]
    assert [recovery.budgeted for recovery in RECOVERIES] == [True, True, True, True, True, False]
    assert [recovery.new_request for recovery in RECOVERIES] == [True, True, True, True, True, False]
    assert [recovery.once for recovery in RECOVERIES] == [False, False, False, False, False, True]


def test_a_commit_in_part_asks_its_own_recoveries_after_every_commit_s() -> None:
    assert BULK_RECOVERIES[:6] == MARKER_RECOVERIES[:6] == RECOVERIES
    assert [type(recovery).__name__ for recovery in BULK_RECOVERIES[6:]] == ["RefusedLeftOut", "RoomMadeMeanwhile"]
    assert [type(recovery).__name__ for recovery in MARKER_RECOVERIES[6:]] == ["FlooredAtZero", "TakenOffAlready"]
    floored = MARKER_RECOVERIES[6]  # asked with every commit's, before a refusal stands
    assert floored.budgeted and floored.new_request and not (floored.once or floored.new_transaction)
    for recovery in BULK_RECOVERIES[6:] + MARKER_RECOVERIES[7:]:  # each answers a refusal that would stand
        assert recovery.new_transaction and not recovery.budgeted and recovery.new_request and not recovery.once
    assert [recovery.capped for recovery in BULK_RECOVERIES[6:]] == [False, True]
    assert not any(recovery.new_transaction or recovery.capped for recovery in RECOVERIES)


def test_a_stale_basis_is_learned_from_the_stored_child(applied: List[str], transactions: BeforeTransactions) -> None:
    Thread(pk="THREAD#t1", sk="META").save()
    Message(pk="MSG#1", sk="MSG", thread_id="THREAD#t1", words=10).save()
    mine = loaded()

    def theirs() -> None:
        other = loaded()
        other.status = "published"
        other.save()

    tokens = transactions.watch({1: theirs})
    mine.words = 3
    result = mine.save()  # counted from draft, 10 words: refused, learned published, sent again
    assert applied == [StaleBasis.__name__] and len(tokens) == 2 and tokens[0] != tokens[1]
    assert result.attempts == 2 and counts() == (1, 0, 3)  # the last save wins: a draft of 3 words


def test_a_stale_basis_needs_an_attempt_left() -> None:
    mine = stale_copy()
    with pytest.raises(ConditionFailedError):
        mine.save(retry=RetryPolicy(max_attempts=1))
    assert counts() == (1, 1, 10)


class Throttled(Interceptor):
    """Refuses TransactWriteItems with DynamoDB's throttling error, unsent: the first ``times`` of them, or every
    one after the first ``after``; it counts every request on :attr:`sent`."""

    def __init__(self, times: int = 0, after: Optional[int] = None) -> None:
        self.times = times
        self.after = after
        self.sent = 0

    def request(self, call: Call) -> Optional[Dict[str, Any]]:
        if call.operation != "TransactWriteItems":
            return None
        self.sent += 1
        if self.sent <= self.times or (self.after is not None and self.sent > self.after):
            raise ClientError({"Error": {"Code": "ThrottlingException",
                                         "Message": "Rate of requests exceeds the allowed throughput."},
                               "ResponseMetadata": {"HTTPStatusCode": 400}}, "TransactWriteItems")
        return None


@pytest.mark.parametrize("max_attempts, landed", [(3, False), (4, True)])
def test_a_stale_basis_counts_the_attempts_of_earlier_rounds(applied: List[str], max_attempts: int,
                                                             landed: bool) -> None:
    # round 1: throttled twice, then refused (counted from a stale copy): 3 requests. With max_attempts=3 the
    # write has none left for a round 2 and the refusal stands; with 4, round 2 is its fourth and last request
    mine = stale_copy()
    answer = Throttled(times=2)
    with intercepting(answer):
        if landed:
            result = mine.save(retry=RetryPolicy(max_attempts=max_attempts, base_delay=0))
            assert result.attempts == 4 and applied == [StaleBasis.__name__]
        else:
            with pytest.raises(ConditionFailedError):
                mine.save(retry=RetryPolicy(max_attempts=max_attempts, base_delay=0))
            assert applied == []
    assert answer.sent == (4 if landed else 3)
    assert counts() == ((1, 0, 3) if landed else (1, 1, 10))


def test_retries_after_a_recovery_stop_at_the_write_s_max_attempts(applied: List[str]) -> None:
    # round 1 is refused at once (a stale copy); round 2 is throttled on every request: it may make only the
    # attempts round 1 left, and the error counts the write's requests, not the round's
    mine = stale_copy()

    answer = Throttled(after=1)  # round 2 on: throttled
    with intercepting(answer), pytest.raises(RetriesExhaustedError) as caught:
        mine.save(retry=RetryPolicy(max_attempts=4, base_delay=0))
    assert applied == [StaleBasis.__name__]
    assert answer.sent == 4 and caught.value.attempts == 4
    assert "after 4 attempts" in str(caught.value)
    assert counts() == (1, 1, 10)  # nothing written


def test_an_edit_of_a_child_deleted_meanwhile_is_saved_as_new(applied: List[str],
                                                               transactions: BeforeTransactions) -> None:
    Thread(pk="THREAD#t1", sk="META").save()
    Message(pk="MSG#1", sk="MSG", thread_id="THREAD#t1", words=2).save()
    mine = loaded()
    tokens = transactions.watch({1: lambda: loaded().delete()})
    mine.words = 5
    mine.save()
    assert applied == [DeletedMeanwhile.__name__] and len(tokens) == 2
    assert counts() == (1, 0, 5)


def test_a_rollup_found_gone_is_left_out_of_a_delete(applied: List[str]) -> None:
    Show(pk="SHOW#s1", sk="META").save()
    Clap(pk="SHOW#s1", sk="CLAP#USER#a", day="2026-11-30", clapped_at=1795996800).save()
    DailyClaps._get_connection().delete_item("SHOW#s1", range_key="DAY#2026-11-30")  # expired
    result = Clap.get("SHOW#s1", "CLAP#USER#a").delete()
    assert applied == [RollupsGone.__name__] and len(result.rollups_gone) == 1


def test_a_rollup_found_gone_and_stored_again_is_counted_into(applied: List[str],
                                                                transactions: BeforeTransactions) -> None:
    Show(pk="SHOW#s1", sk="META").save()
    Clap(pk="SHOW#s1", sk="CLAP#USER#a", day="2026-11-30", clapped_at=1795996800).save()
    DailyClaps._get_connection().delete_item("SHOW#s1", range_key="DAY#2026-11-30")

    def again() -> None:  # the clap deleted (its rollup gone) and saved again: its first count creates the rollup
        Clap.get("SHOW#s1", "CLAP#USER#a").delete()
        Clap(pk="SHOW#s1", sk="CLAP#USER#a", day="2026-11-30", clapped_at=1795996800).save()

    transactions.watch({2: again})
    result = Clap(pk="SHOW#s1", sk="CLAP#USER#a", day="2026-11-30", clapped_at=1795996800).delete()
    # mine found it gone; the other writer's delete found it gone too; mine then found it stored again
    assert applied == [RollupsGone.__name__, RollupsGone.__name__, RollupsReturned.__name__]
    assert result.rollups_gone == () and DailyClaps.get("SHOW#s1", "DAY#2026-11-30").claps == 0


def test_missing_shard_items_are_created_and_the_same_request_sent_again(applied: List[str],
                                                                         transactions: BeforeTransactions) -> None:
    raw_client(None).put_item(TableName="Videos", Item={"pk": {"S": "VIDEO#old"}, "sk": {"S": "META"}})  # no shards
    tokens = transactions.watch({})
    View(pk="VIDEO#old", sk="VIEW#USER#u7").save()
    assert MissingShards.__name__ in applied and tokens[0] == tokens[-1]  # the same request, the same token
    assert Video.view_count.total(("VIDEO#old", "META")) == 1


# -- the recoveries of a commit in part: a bulk write's chunk, a batch of expiries --------------------------------
@pytest.mark.usefixtures("dynamodb")
def test_a_bulk_write_s_refused_children_are_left_out_by_its_commit(applied: List[str],
                                                                    transactions: BeforeTransactions) -> None:
    post("POST#a")
    like(1, "POST#a").save()
    tokens = transactions.watch({})
    result = bulk_save([like(n, "POST#a") for n in range(3)])
    assert applied == [RefusedLeftOut.__name__]
    assert [o.status for o in result.outcomes] == ["added", "rejected", "added"] and result.requests == 2
    assert tokens == [tokens[0], next_token(tokens[0])]  # one commit: the rest is a new request of it
    assert result.results[0].attempts == 1  # a new transaction: its attempts count afresh


@pytest.mark.usefixtures("dynamodb")
def test_a_bulk_write_refused_on_a_limit_every_child_fits_is_sent_again(applied: List[str],
                                                                       monkeypatch: pytest.MonkeyPatch,
                                                                       transactions: BeforeTransactions) -> None:
    """The refusal reads a parent with room for every child (as if it changed between the condition and the
    read): none is blamed, and the same children are sent again, as a new transaction."""
    Game(pk="GAME#g1", sk="META").save()
    real = ParentUpdate.condition_error
    calls: List[int] = []

    def failed(self: ParentUpdate, said: Any) -> Any:
        error = real(self, said)
        calls.append(1)
        if len(calls) == 1 and isinstance(error, LimitExceededError):
            error.stored = 0  # the room the stored count leaves: every child fits
        return error

    def full() -> None:
        raw_client(None).update_item(TableName="Games", Key={"pk": {"S": "GAME#g1"}, "sk": {"S": "META"}},
                                     UpdateExpression="SET players = :n", ExpressionAttributeValues={":n": {"N": "3"}})

    def room() -> None:
        raw_client(None).update_item(TableName="Games", Key={"pk": {"S": "GAME#g1"}, "sk": {"S": "META"}},
                                     UpdateExpression="SET players = :n", ExpressionAttributeValues={":n": {"N": "0"}})

    monkeypatch.setattr(ParentUpdate, "condition_error", failed)
    tokens = transactions.watch({1: full, 2: room})
    result = bulk_save([Player(pk="GAME#g1", sk=f"PLAYER#u{n}") for n in range(2)])
    assert applied == [RoomMadeMeanwhile.__name__] and len(tokens) == 2 and tokens[1] == next_token(tokens[0])
    assert [o.status for o in result.outcomes] == ["added", "added"]
    assert Game.get("GAME#g1", "META", consistent_read=True).players == 2


@pytest.mark.usefixtures("dynamodb")
def test_expiries_taken_off_already_are_left_out_by_their_commit(applied: List[str],
                                                                 transactions: BeforeTransactions) -> None:
    from tests.test_expiring import counters, event, expired_invites, invite, team

    team()
    invite("ann")
    invite("bob")
    removals = [record for record in event(expired_invites("ann", "bob"))["Records"]
                if record["eventName"] == "REMOVE"]
    count_expiries({"Records": removals[:1]}, models=[Invite])
    applied.clear()
    tokens = transactions.watch({})
    result = count_expiries({"Records": removals}, models=[Invite])
    assert applied == [TakenOffAlready.__name__] and tokens == [tokens[0], next_token(tokens[0])]
    assert len(result.counted) == 1 and len(result.skipped) == 1 and counters()["invites"] == 0
