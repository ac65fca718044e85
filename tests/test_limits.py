"""Limits: counters that admit or refuse. The increment rides in the child's transaction, conditioned on the
limit, so a full parent refuses the whole write: exactly, with nothing written."""
from __future__ import annotations

from typing import Any, Iterator, List, Tuple

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_counters import CountedTransaction, CounterField, CounterMixin, audit, bulk_save, signals
from pynamodb_counters.exceptions import (
    ConfigurationError,
    DuplicateChildError,
    InvalidTransactionError,
    LimitExceededError,
)
from tests.support.factories import snapshot
from tests.support.models import REGION, Game, Player, Seat, Spectator

pytestmark = pytest.mark.usefixtures("dynamodb")

KEY = ("GAME#g1", "META")


def game(max_players: Any = None, name: str = "g1") -> None:
    Game(pk=f"GAME#{name}", sk="META", max_players=max_players).save()


def stored(attribute: str, name: str = "g1") -> int:
    return int(getattr(Game.get(f"GAME#{name}", "META", consistent_read=True), attribute))


def player(n: int, name: str = "g1") -> Player:
    return Player(pk=f"GAME#{name}", sk=f"PLAYER#u{n}")


@pytest.fixture
def rejected() -> Iterator[List[Tuple[Any, LimitExceededError]]]:
    seen: List[Tuple[Any, LimitExceededError]] = []

    def receiver(sender: Any, instance: Any, error: LimitExceededError, **_: Any) -> None:
        seen.append((instance, error))

    signals.limit_rejected.connect(receiver)
    yield seen
    signals.limit_rejected.disconnect(receiver)


# -- a fixed limit -------------------------------------------------------------------------------------------
def test_the_fourth_player_of_a_three_player_game_is_refused_and_nothing_is_written(
        rejected: List[Tuple[Any, LimitExceededError]]) -> None:
    game()
    for n in range(3):
        player(n).save()
    before = snapshot()
    latecomer = player(3)
    with pytest.raises(LimitExceededError) as raised:
        latecomer.save()
    error = raised.value
    assert (error.model, error.key, error.attribute, error.limit, error.stored) == (Game, KEY, "players", 3, 3)
    assert "GAME#g1" in str(error) and "players" in str(error) and "limit is 3" in str(error)
    assert snapshot() == before
    assert [(instance, type(e)) for instance, e in rejected] == [(latecomer, LimitExceededError)]


def test_a_leave_is_never_refused_by_a_limit_and_makes_room() -> None:
    game()
    for n in range(3):
        player(n).save()
    Game._get_connection().update_item("GAME#g1", range_key="META", actions=[Game.players.set(5)])  # drifted above
    Player.get("GAME#g1", "PLAYER#u0").delete()  # a decrement: never refused by the limit
    assert stored("players") == 4
    Game._get_connection().update_item("GAME#g1", range_key="META", actions=[Game.players.set(2)])  # repaired
    player(9).save()
    assert stored("players") == 3


def test_a_transaction_that_would_pass_the_limit_is_refused_whole() -> None:
    game()
    player(0).save()
    player(1).save()
    before = snapshot()
    with pytest.raises(LimitExceededError) as raised:
        with CountedTransaction() as transaction:
            transaction.save(player(2))
            transaction.save(player(3))  # 2 + 2 > 3: both or neither
    assert raised.value.stored == 2 and snapshot() == before


def test_a_duplicate_in_a_full_game_is_reported_as_the_duplicate() -> None:
    game()
    for n in range(3):
        player(n).save()
    with pytest.raises(DuplicateChildError):
        player(1).save()  # it would not add: the duplicate is the more fundamental refusal


# -- a limit held by the parent ------------------------------------------------------------------------------
@pytest.mark.parametrize("child", [lambda n, name="g1": Seat(pk=f"SEAT#u{n}", sk="SEAT", game_id=f"GAME#{name}"),
                                   lambda n, name="g1": Spectator(pk=f"GAME#{name}", sk=f"WATCH#u{n}")],
                         ids=["limit=max_players", "limit=lambda game: game.max_players"])
def test_a_limit_read_from_the_stored_parent(child: Any) -> None:
    attribute = "seated" if child(0).__class__ is Seat else "spectators"
    game(max_players=2)
    child(0).save()
    child(1).save()
    before = snapshot()
    with pytest.raises(LimitExceededError) as raised:
        child(2).save()
    assert (raised.value.limit, raised.value.stored) == (2, 2) and snapshot() == before
    Game._get_connection().update_item("GAME#g1", range_key="META", actions=[Game.max_players.set(3)])
    child(2).save()  # the stored limit, not a copy: raised to 3, the third gets in
    assert stored(attribute) == 3
    game(name="open")  # a game without max_players has no limit
    for n in range(5):
        child(10 + n, "open").save()
    assert stored(attribute, "open") == 5


def test_a_limit_held_by_the_parent_takes_one_increment_per_transaction() -> None:
    game(max_players=10)
    before = snapshot()
    with pytest.raises(InvalidTransactionError, match="at most 1"):
        with CountedTransaction() as transaction:
            transaction.save(Seat(pk="SEAT#u1", sk="SEAT", game_id="GAME#g1"))
            transaction.save(Seat(pk="SEAT#u2", sk="SEAT", game_id="GAME#g1"))
    assert snapshot() == before


def test_moving_into_a_full_game_is_refused_and_moving_out_makes_room() -> None:
    game(max_players=1, name="full")
    game(max_players=1, name="other")
    Seat(pk="SEAT#a", sk="SEAT", game_id="GAME#full").save()
    Seat(pk="SEAT#b", sk="SEAT", game_id="GAME#other").save()
    moving = Seat.get("SEAT#b", "SEAT", consistent_read=True)
    moving.game_id = "GAME#full"
    before = snapshot()
    with pytest.raises(LimitExceededError):
        moving.save()
    assert snapshot() == before
    leaving = Seat.get("SEAT#a", "SEAT", consistent_read=True)
    leaving.game_id = "GAME#other"
    with pytest.raises(LimitExceededError):
        leaving.save()  # "other" is full too
    leaving.delete()
    moving.save()
    assert (stored("seated", "full"), stored("seated", "other")) == (1, 0)


# -- bulk writes: exact admission ----------------------------------------------------------------------------
def test_bulk_admits_exactly_the_room_in_input_order_and_rejects_the_rest(
        rejected: List[Tuple[Any, LimitExceededError]]) -> None:
    game()
    player(0).save()
    result = bulk_save([player(n) for n in range(1, 6)])
    assert [(o.instance.sk, o.status) for o in result.outcomes] == [
        ("PLAYER#u1", "added"), ("PLAYER#u2", "added"), ("PLAYER#u3", "rejected"), ("PLAYER#u4", "rejected"),
        ("PLAYER#u5", "rejected")]
    assert all(isinstance(o.error, LimitExceededError) for o in result.rejected)
    assert stored("players") == 3 == Player.count("GAME#g1", Player.sk.startswith("PLAYER#"), consistent_read=True)
    assert sorted(instance.sk for instance, _ in rejected) == ["PLAYER#u3", "PLAYER#u4", "PLAYER#u5"]


def test_bulk_with_a_limit_held_by_the_parent() -> None:
    game(max_players=2)
    result = bulk_save([Seat(pk=f"SEAT#u{n}", sk="SEAT", game_id="GAME#g1") for n in range(4)])
    assert [o.status for o in result.outcomes] == ["added", "added", "rejected", "rejected"]
    assert stored("seated") == 2 and audit(Game.seated, parents=[KEY]).drifts == ()


# -- declarations --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("options", [{"limit": -1}, {"limit": "50"}, {"limit": True}, {"limit": 2.5},
                                     {"shards": 4, "limit": 10}])
def test_a_limit_that_cannot_work_is_refused_at_declaration(options: Any) -> None:
    with pytest.raises(ConfigurationError, match="limit"):
        CounterField(**options)


def test_a_limit_function_must_name_one_number_attribute_of_the_parent() -> None:
    class Arena(CounterMixin, Model):
        class Meta:
            table_name = "Games"
            region = REGION

        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        size = NumberAttribute(null=True)
        name = UnicodeAttribute(null=True)
        by_arithmetic = CounterField(limit=lambda arena: arena.size + 1)
        by_text = CounterField(limit=lambda arena: arena.name)

    for counter in (Arena.by_arithmetic, Arena.by_text):
        with pytest.raises(ConfigurationError, match="one number attribute"):
            counter.limit  # noqa: B018
