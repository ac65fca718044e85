"""A parent's counter Update is built once per shape through PynamoDB, then copied with another key
(``_actions.parent_request``, held in ``ModelSpec.requests``). A copied request must be the very request
PynamoDB would build for that key (and the suite checks every shape it holds after each test: ``conftest.py``)."""
from __future__ import annotations

from typing import Any, Iterator, List

import pytest
from pynamodb.models import Model

from pynamodb_counters.declare._spec import spec_of
from pynamodb_counters.write import _actions
from pynamodb_counters.write._commit import UnitOfWork
from pynamodb_counters.write._plan import Plan
from pynamodb_counters.write._writes import Write, delete_write, save_write
from tests.support.models import (
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


def plan(writes: List[Write], token: str) -> Plan:
    return UnitOfWork(writes, token).plan()


def built_afresh(writes: List[Any], token: str, monkeypatch: pytest.MonkeyPatch) -> List[Any]:
    """Each write planned alone, with no shape held or kept: every Update built through PynamoDB."""
    with monkeypatch.context() as patch:
        patch.setattr(_actions, "SHAPES_HELD", 0)
        forget_shapes()
        return [item for write in writes for item in plan([write], token).items]


@pytest.mark.usefixtures("fresh_memo")
@pytest.mark.parametrize("kind", ["save", "delete"])
def test_a_held_shape_copied_with_another_key_is_the_request_pynamodb_builds_for_that_key(
        kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    operation = save_write if kind == "save" else delete_write
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
    for words in range(_actions.SHAPES_HELD + 50):
        message = Message(pk=f"MSG#{words}", sk="MSG", thread_id="THREAD#t", words=words)
        item = plan([save_write(message)], "tok").items[-1]
        assert item["Update"]["Key"] == {"pk": {"S": "THREAD#t"}, "sk": {"S": "META"}}
        assert {"N": str(words)} in item["Update"]["ExpressionAttributeValues"].values() or words == 0
    assert len(spec_of(Thread).requests) == _actions.SHAPES_HELD


@pytest.mark.usefixtures("dynamodb")
def test_a_subclass_of_a_polymorphic_parent_declared_after_its_shape_was_held_is_counted() -> None:
    """Models split across modules: a subclass of a single-table parent, imported after the parent's counter
    Update was first built, must be accepted as that parent (the held shape's discriminator guard must see it)."""
    from pynamodb.attributes import DiscriminatorAttribute, UnicodeAttribute

    from pynamodb_counters import CounterField, CounterMixin, counted_by
    from tests.support.models import REGION

    class Thing(CounterMixin, Model):  # a family of its own: the suite's shared models stay as declared
        class Meta:
            table_name = "Things"
            region = REGION

        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        kind = DiscriminatorAttribute()

    class Folder(Thing, discriminator="Folder"):
        file_count = CounterField()

    class File(Thing, discriminator="File"):
        folder = counted_by(Folder.file_count, key=lambda f: (f.pk, "FOLDER"))

    Thing.create_table(read_capacity_units=1, write_capacity_units=1, wait=True)
    Folder(pk="F1", sk="FOLDER").save()
    File(pk="F1", sk="FILE#1").save()  # the shape of Folder's Update is held, guarded by the classes known so far

    class SharedFolder(Folder, discriminator="SharedFolder"):  # declared later, in another module
        pass

    SharedFolder(pk="F2", sk="FOLDER").save()
    File(pk="F2", sk="FILE#1").save()
    stored = Folder.get("F2", "FOLDER", consistent_read=True)
    assert isinstance(stored, SharedFolder) and stored.file_count == 1


@pytest.mark.usefixtures("dynamodb", "fresh_memo")
def test_a_parent_model_moved_to_another_table_at_run_time_is_counted_there(monkeypatch: pytest.MonkeyPatch) -> None:
    """PynamoDB follows a ``Meta.table_name`` changed at run time (a table per tenant, per test worker): a held
    shape must not send a parent's Update to the table it was built for."""
    Post(pk="POST#a", sk="META").save()
    Like(pk="POST#a", sk="LIKE#USER#1", liked_at=1).save()  # the shape of Post's Update is held, for "Social"
    monkeypatch.setattr(Post.Meta, "table_name", "SocialB")
    Post.create_table(read_capacity_units=1, write_capacity_units=1, wait=True)
    Post(pk="POST#a", sk="META").save()
    Like(pk="POST#a", sk="LIKE#USER#2", liked_at=1).save()
    assert Post.get("POST#a", "META", consistent_read=True).like_tally == 1  # in SocialB
    monkeypatch.undo()
    assert Post.get("POST#a", "META", consistent_read=True).like_tally == 1  # in Social: not counted twice there


@pytest.mark.usefixtures("fresh_memo")
@pytest.mark.parametrize("change", ["shards", "limit"])
def test_a_counter_redeclared_at_run_time_is_not_planned_from_its_old_shape(
        change: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite redeploys a counter within one process (sharded, unsharded, limited): a held shape must follow."""
    child, counter, value = (Fan(pk="VIDEO#1", sk="FAN#USER#a"), Video.fan_count, 1) if change == "shards" else \
        (Player(pk="GAME#1", sk="PLAYER#a"), Game.players, 1000)
    operation = delete_write if change == "shards" else save_write
    plan([operation(child)], "tok")  # the shape is held
    monkeypatch.setattr(counter, "shards" if change == "shards" else "_limit", value)
    assert plan([operation(child)], "tok").items == built_afresh([operation(child)], "tok", monkeypatch)
