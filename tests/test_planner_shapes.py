"""The planner builds each shape of a parent's counter Update once through PynamoDB, then copies it with another
key (``ModelSpec.requests``). A copied request must be the very request PynamoDB would build for that key."""
from __future__ import annotations

from typing import Any, Iterator, List

import pytest
from pynamodb.models import Model

from pynamodb_counters import _planner
from pynamodb_counters._operations import delete_operation, save_operation
from pynamodb_counters._planner import plan
from pynamodb_counters._spec import spec_of
from tests.models import (
    Board,
    Bookmark,
    Card,
    Clap,
    DailyClaps,
    Doc,
    Edit,
    Fan,
    Game,
    Like,
    Message,
    Player,
    Post,
    Seat,
    Show,
    Spectator,
    Thread,
    User,
    Video,
    View,
    Vote,
)


def children(n: int) -> List[Model]:
    """One child of each kind of parent: hash-only and numeric keys, a polymorphic parent, sharded counters,
    sums (positive and negative), conditional counts, fixed and stored limits, a rollup and its show."""
    return [
        Like(pk=f"POST#{n}", sk="LIKE#USER#a", liked_at=1),
        Bookmark(pk=f"POST#{n}", sk="BOOKMARK#USER#a", user_id=f"u{n}"),
        Card(pk=f"BOARD#{n}", sk="CARD#1"),
        Edit(doc_id=f"doc{n}", seq=n),
        View(pk=f"VIDEO#{n}", sk=f"VIEW#USER#{n}"),
        Fan(pk=f"VIDEO#{n}", sk=f"FAN#USER#{n}"),
        Message(pk=f"MSG#{n}", sk="MSG", thread_id=f"THREAD#{n}", status="published", words=7 + n),
        Vote(pk=f"THREAD#v{n}", sk="VOTE#USER#a", value=-1),
        Player(pk=f"GAME#{n}", sk="PLAYER#a"),
        Seat(pk=f"SEAT#{n}", sk="SEAT", game_id=f"GAME#s{n}"),
        Spectator(pk=f"GAME#w{n}", sk="WATCH#a"),
        Clap(pk=f"SHOW#{n}", sk="CLAP#USER#a", day="2026-12-01", clapped_at=1796083200 + n),
    ]


def forget_shapes() -> None:
    """Empty every parent model's held shapes."""
    for model in (Post, User, Board, Doc, Video, Thread, Game, Show, DailyClaps):
        spec_of(model).requests.clear()


@pytest.fixture
def fresh_memo() -> Iterator[None]:
    forget_shapes()
    yield
    forget_shapes()


def built_afresh(operations: List[Any], token: str, monkeypatch: pytest.MonkeyPatch) -> List[Any]:
    """Each operation planned alone, with no shape held or kept: every Update built through PynamoDB."""
    with monkeypatch.context() as patch:
        patch.setattr(_planner, "_SHAPES_HELD", 0)
        forget_shapes()
        return [item for op in operations for item in plan([op], token).items]


@pytest.mark.usefixtures("fresh_memo")
@pytest.mark.parametrize("kind", ["save", "delete"])
def test_a_held_shape_copied_with_another_key_is_the_request_pynamodb_builds_for_that_key(
        kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    operation = save_operation if kind == "save" else delete_operation
    for n in range(3):
        forget_shapes()
        for child in children(100 + n):  # the shapes are built for other keys, and held
            plan([operation(child)], "tok")
        held = sum(len(spec_of(model).requests) for model in (Post, User, Board, Doc, Video, Thread, Game, Show))
        assert held >= 10  # every parent's but the rollup's (created with its first clap's defaults)
        copied = [item for child in children(n) for item in plan([operation(child)], "tok").items]
        assert copied == built_afresh([operation(child) for child in children(n)], "tok", monkeypatch), n


@pytest.mark.usefixtures("fresh_memo")
def test_a_sum_counter_holds_a_bounded_number_of_shapes() -> None:
    for words in range(_planner._SHAPES_HELD + 50):
        message = Message(pk=f"MSG#{words}", sk="MSG", thread_id="THREAD#t", words=words)
        item = plan([save_operation(message)], "tok").items[-1]
        assert item["Update"]["Key"] == {"pk": {"S": "THREAD#t"}, "sk": {"S": "META"}}
        assert {"N": str(words)} in item["Update"]["ExpressionAttributeValues"].values() or words == 0
    assert len(spec_of(Thread).requests) == _planner._SHAPES_HELD
