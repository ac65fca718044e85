"""The commit's recoveries, one test each: what a refused attempt teaches, applied in the same call. Each test
makes the refusal happen for real (another writer, a rollup expired, shard items missing) and checks that the
recovery named, and only it, applied; then that the write landed as counted from what it learned."""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, List

import pytest

from pynamodb_counters import RetryPolicy, _commit
from pynamodb_counters._recoveries import (
    RECOVERIES,
    DeletedMeanwhile,
    MissingShards,
    RollupsGone,
    RollupsReturned,
    StaleBasis,
)
from pynamodb_counters.exceptions import ConditionFailedError
from tests.factories import raw_client
from tests.models import Clap, DailyClaps, Message, Show, Thread, Video, View

pytestmark = pytest.mark.usefixtures("dynamodb")


@pytest.fixture
def applied(monkeypatch: pytest.MonkeyPatch) -> Iterator[List[str]]:
    """The names of the recoveries that applied, in the order the commit applied them."""
    names: List[str] = []
    for recovery in RECOVERIES:
        kind = type(recovery)

        def spy(self: Any, countings: Any, round: Any, _real: Callable[..., bool] = kind.recover) -> bool:
            done = _real(self, countings, round)
            if done:
                names.append(type(self).__name__)
            return done

        monkeypatch.setattr(kind, "recover", spy)
    yield names


def sends(monkeypatch: pytest.MonkeyPatch, before: Dict[int, Callable[[], None]]) -> List[str]:
    """The tokens of the TransactWriteItems the write under test sends; ``before[n]`` runs just before its n-th."""
    tokens: List[str] = []
    real = _commit.send

    def send(*args: Any, **kwargs: Any) -> Any:
        tokens.append(args[2])
        other = before.get(len(tokens))
        if other is not None:
            monkeypatch.setattr(_commit, "send", real)
            other()
            monkeypatch.setattr(_commit, "send", send)
        return real(*args, **kwargs)

    monkeypatch.setattr(_commit, "send", send)
    return tokens


def counts() -> tuple:
    thread = Thread.get("THREAD#t1", "META", consistent_read=True)
    return thread.message_count, thread.published_count, thread.word_total


def loaded() -> Message:
    return Message.get("MSG#1", "MSG", consistent_read=True)


def test_the_recoveries_are_asked_in_their_documented_order() -> None:
    assert [type(recovery).__name__ for recovery in RECOVERIES] == \
        ["StaleBasis", "DeletedMeanwhile", "RollupsReturned", "RollupsGone", "ExpiredParentsGone", "MissingShards"]
    assert [recovery.budgeted for recovery in RECOVERIES] == [True, True, True, True, True, False]
    assert [recovery.new_request for recovery in RECOVERIES] == [True, True, True, True, True, False]
    assert [recovery.once for recovery in RECOVERIES] == [False, False, False, False, False, True]


def test_a_stale_basis_is_learned_from_the_stored_child(applied: List[str], monkeypatch: pytest.MonkeyPatch) -> None:
    Thread(pk="THREAD#t1", sk="META").save()
    Message(pk="MSG#1", sk="MSG", thread_id="THREAD#t1", words=10).save()
    mine = loaded()

    def theirs() -> None:
        other = loaded()
        other.status = "published"
        other.save()

    tokens = sends(monkeypatch, {1: theirs})
    mine.words = 3
    result = mine.save()  # counted from draft, 10 words: refused, learned published, sent again
    assert applied == [StaleBasis.__name__] and len(tokens) == 2 and tokens[0] != tokens[1]
    assert result.attempts == 2 and counts() == (1, 0, 3)  # the last save wins: a draft of 3 words


def test_a_stale_basis_needs_an_attempt_left() -> None:
    Thread(pk="THREAD#t1", sk="META").save()
    Message(pk="MSG#1", sk="MSG", thread_id="THREAD#t1", words=10).save()
    mine, other = loaded(), loaded()
    other.status = "published"
    other.save()
    mine.words = 3
    with pytest.raises(ConditionFailedError):
        mine.save(retry=RetryPolicy(max_attempts=1))
    assert counts() == (1, 1, 10)


def test_an_edit_of_a_child_deleted_meanwhile_is_saved_as_new(applied: List[str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    Thread(pk="THREAD#t1", sk="META").save()
    Message(pk="MSG#1", sk="MSG", thread_id="THREAD#t1", words=2).save()
    mine = loaded()
    tokens = sends(monkeypatch, {1: lambda: loaded().delete()})
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
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    Show(pk="SHOW#s1", sk="META").save()
    Clap(pk="SHOW#s1", sk="CLAP#USER#a", day="2026-11-30", clapped_at=1795996800).save()
    DailyClaps._get_connection().delete_item("SHOW#s1", range_key="DAY#2026-11-30")

    def again() -> None:  # the clap deleted (its rollup gone) and saved again: its first count creates the rollup
        Clap.get("SHOW#s1", "CLAP#USER#a").delete()
        Clap(pk="SHOW#s1", sk="CLAP#USER#a", day="2026-11-30", clapped_at=1795996800).save()

    sends(monkeypatch, {2: again})
    result = Clap(pk="SHOW#s1", sk="CLAP#USER#a", day="2026-11-30", clapped_at=1795996800).delete()
    # mine found it gone; the other writer's delete found it gone too; mine then found it stored again
    assert applied == [RollupsGone.__name__, RollupsGone.__name__, RollupsReturned.__name__]
    assert result.rollups_gone == () and DailyClaps.get("SHOW#s1", "DAY#2026-11-30").claps == 0


def test_missing_shard_items_are_created_and_the_same_request_sent_again(applied: List[str],
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    raw_client(None).put_item(TableName="Videos", Item={"pk": {"S": "VIDEO#old"}, "sk": {"S": "META"}})  # no shards
    tokens = sends(monkeypatch, {})
    View(pk="VIDEO#old", sk="VIEW#USER#u7").save()
    assert MissingShards.__name__ in applied and tokens[0] == tokens[-1]  # the same request, the same token
    assert Video.view_count.total(("VIDEO#old", "META")) == 1
