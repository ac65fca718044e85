"""Children counted from the table's stream (``counted_by(..., counting="stream")``): written as plain PynamoDB
writes them (or by raw boto3, or BatchWriteItem), counted by ``count_stream`` from moto's real stream records,
exactly once whatever Lambda delivers, at one UpdateItem per parent item of a batch.

Every counter is compared with a recount of the children stored (:func:`recount`)."""
from __future__ import annotations

import random
from collections import Counter
from datetime import datetime, timezone
from typing import Any, List, Tuple

import pytest
from botocore.exceptions import ClientError
from pynamodb.attributes import TTLAttribute, UnicodeAttribute
from pynamodb.connection import Connection
from pynamodb.models import Model
from pynamodb.signals import pre_dynamodb_send
from pynamodb.transactions import TransactWrite

from pynamodb_counters import CountedTransaction, CounterField, CounterMixin, counted_by, signals
from pynamodb_counters.exceptions import ConfigurationError, CounterError, InvalidArgumentError
from pynamodb_counters.streams import SkipReason, count_stream
from pynamodb_counters.testing import lambda_event
from tests.support.client_hooks import hooked
from tests.support.factories import raw_client
from tests.support.models import REGION
from tests.support.stream_models import STREAM_MODELS, Board, DailyPins, Folder, Note, Pin
from tests.support.stream_state import BOARDS, boards, count, exact, stored, stream

pytestmark = pytest.mark.usefixtures("dynamodb")

@pytest.fixture
def counters_models() -> List[type]:
    return list(STREAM_MODELS)


def activity(seed: int = 7, writes: int = 60) -> None:
    """Pins saved, edited (rated, published, moved between folders and days) and deleted at random, through
    PynamoDB, raw boto3 and BatchWriteItem."""
    rng = random.Random(seed)
    client = raw_client(None)
    for _ in range(writes):
        pk, user = rng.choice(BOARDS), f"u{rng.randrange(8)}"
        how = rng.random()
        if how < 0.55:
            Pin(pk=pk, sk=f"PIN#{user}", folder=rng.choice(["inbox", "art"]), day=rng.choice(["d1", "d2"]),
                status=rng.choice(["draft", "published"]), rating=rng.randrange(4)).save()
        elif how < 0.7:
            client.put_item(TableName="Boards", Item={"pk": {"S": pk}, "sk": {"S": f"PIN#{user}"},
                                                      "folder": {"S": "art"}, "day": {"S": "d3"},
                                                      "status": {"S": "published"}, "rating": {"N": "5"}})
        elif how < 0.8:
            with Pin.batch_write() as batch:
                batch.save(Pin(pk=pk, sk=f"PIN#{user}", rating=1))
                batch.delete(Pin(pk=pk, sk=f"PIN#x{user}"))
        elif how < 0.9:
            Pin(pk=pk, sk=f"PIN#{user}").delete()
        else:
            client.delete_item(TableName="Boards", Key={"pk": {"S": pk}, "sk": {"S": f"PIN#{user}"}})


# -- the declaration ---------------------------------------------------------------------------------------------
def test_counting_is_transaction_or_stream() -> None:
    with pytest.raises(ConfigurationError, match=r"counting=.* is 'transaction' .* or 'stream' .*not 'lambda'"):
        counted_by(Board.pin_count, key=lambda pin: (pin.pk, "META"), counting="lambda")


def test_a_limited_counter_cannot_be_fed_from_the_stream() -> None:
    class Room(CounterMixin, Model):
        class Meta:
            table_name = "StreamRooms"
            region = "us-east-1"

        pk = UnicodeAttribute(hash_key=True)
        seats = CounterField(limit=3)

    with pytest.raises(ConfigurationError, match=r"cannot feed .*Room.seats.*limit="):
        counted_by(Room.seats, key=lambda guest: guest.pk, counting="stream")


def test_a_stream_relation_needs_no_expiries_and_takes_none() -> None:
    class Expiring(CounterMixin, Model):
        class Meta:
            table_name = "Boards"
            region = "us-east-1"
            stream_view_type = "NEW_AND_OLD_IMAGES"

        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        expires_at = TTLAttribute(null=True)
        board = counted_by(Board.pin_count, key=lambda item: (item.pk, "META"), prefix="EXP#", counting="stream")

    assert Expiring.board.counting == "stream"
    with pytest.raises(ConfigurationError, match=r"counting='stream', expiries='stream'.*leave expiries= out"):
        counted_by(Board.pin_count, key=lambda item: (item.pk, "META"), counting="stream", expiries="stream")


# -- a child counted from the stream alone is written as plain PynamoDB writes it -----------------------------------
def test_a_stream_child_is_written_with_one_plain_request(monkeypatch: pytest.MonkeyPatch) -> None:
    boards("BOARD#b1")
    sent: List[str] = []
    with pre_dynamodb_send.connected_to(lambda _, operation_name, **__: sent.append(operation_name)):
        Pin(pk="BOARD#b1", sk="PIN#u1").save()
        Pin(pk="BOARD#b1", sk="PIN#u1", rating=3).save()  # a duplicate save overwrites, as PynamoDB's does
        pin = Pin.get("BOARD#b1", "PIN#u1")
        pin.update(actions=[Pin.rating.set(2)])
        pin.delete()
    assert sent == ["PutItem", "PutItem", "GetItem", "UpdateItem", "DeleteItem"]
    assert Board.get("BOARD#b1", "META", consistent_read=True).pin_count == 0  # nothing counted yet


def test_a_child_with_both_kinds_counts_its_transaction_relations_at_once_and_the_others_from_the_stream() -> None:
    boards("BOARD#b1")
    Note(pk="BOARD#b1", sk="NOTE#1", words=12).save()
    board = Board.get("BOARD#b1", "META", consistent_read=True)
    assert (board.note_count, board.note_words) == (1, 0)
    result = count(stream())
    assert [change.attribute for change in result.changes] == ["note_words"]
    exact("BOARD#b1")


def test_pynamodbs_transact_write_and_a_counted_transaction_write_a_stream_child_plainly_and_the_stream_counts_it(
        ) -> None:
    boards("BOARD#b1")
    with TransactWrite(connection=Connection(region=REGION)) as transaction:  # PynamoDB's own: not a bypass
        transaction.save(Pin(pk="BOARD#b1", sk="PIN#u1", rating=2))
    counted = CountedTransaction()
    counted.save(Pin(pk="BOARD#b1", sk="PIN#u2", rating=3))
    counted.save(Note(pk="BOARD#b1", sk="NOTE#1", words=4))  # a mixed child: its transaction relation at once
    assert [(c.attribute, c.delta) for c in counted.commit().changes] == [("note_count", 1)]
    assert stored("BOARD#b1")["pin_count"] == 0
    count(stream())
    exact("BOARD#b1")
    assert stored("BOARD#b1")["stars"] == 5


# -- count_stream --------------------------------------------------------------------------------------------------
def test_every_kind_of_relation_is_counted_from_writes_by_anyone() -> None:
    boards()
    activity()
    Note(pk="BOARD#b2", sk="NOTE#1", words=7).save()
    result = count(stream())
    assert result == {"batchItemFailures": []} and result.error is None
    exact()
    assert result.counted and not result.missing and not result.floored


def test_a_batch_delivered_again_counts_nothing() -> None:
    boards()
    activity()
    records = stream()
    count(records)
    before = {pk: stored(pk) for pk in BOARDS}
    again = count(records)
    assert again.counted == () and again.changes == ()
    assert {pk: stored(pk) for pk in BOARDS} == before
    assert {skipped.reason for skipped in again.skipped} >= {SkipReason.COUNTED_ALREADY}
    exact()


@pytest.mark.parametrize("seed", [1, 2])
def test_any_split_and_redelivery_counts_each_record_once(seed: int) -> None:
    """Batches cut anywhere, each delivered once or twice, each redelivered from a record within it (Lambda's
    retry from the record named), with records repeated: the counters equal a recount."""
    boards()
    activity(seed=seed)
    records = stream()
    rng = random.Random(seed)
    start = 0
    while start < len(records):
        end = min(len(records), start + rng.randrange(1, 12))
        batch = records[start:end]
        if rng.random() < 0.3:
            batch = batch + batch[: rng.randrange(1, len(batch) + 1)]  # records repeated
        count(batch)
        if rng.random() < 0.5:
            count(records[rng.randrange(start, end):end])  # redelivered from a record within it
        if rng.random() < 0.3:
            count(records[max(0, start - 5):end])  # an earlier batch's tail with it
        start = end
    exact()


def test_a_hot_parent_costs_one_update_per_parent_item_per_batch() -> None:
    """100 pins of one board in one batch: one UpdateItem of each item they count into (the board, its three
    other view shards, the folder, the day), one write unit each (every item under 1 KB)."""
    boards("BOARD#b1")
    start = stream()[-1]["dynamodb"]["SequenceNumber"]
    for n in range(100):
        Pin(pk="BOARD#b1", sk=f"PIN#u{n}", folder="inbox", day="d1", rating=1).save()
    result = count(stream(after=start))
    assert result.updates == 6 and result.write_units == 6.0
    assert sorted((change.attribute, change.shard, change.delta) for change in result.changes
                  if change.parent is Board and change.attribute != "views") == [("pin_count", 0, 100),
                                                                                ("stars", 0, 100)]
    assert sum(change.delta for change in result.changes if change.attribute == "views") == 100
    exact("BOARD#b1")


def test_one_pin_on_each_of_many_boards_costs_one_unit_per_parent_item() -> None:
    pks = [f"BOARD#m{n}" for n in range(8)]
    for pk in pks:
        Board(pk=pk, sk="META").save()
        Folder(pk=pk, sk="FOLDER#inbox").save()
    start = stream()[-1]["dynamodb"]["SequenceNumber"]
    for pk in pks:
        Pin(pk=pk, sk="PIN#u1", day="d1").save()
    result = count(stream(after=start))
    views_apart = sum(1 for change in result.changes if change.attribute == "views" and change.shard)
    assert result.updates == len(pks) * 3 + views_apart  # the board, the folder, the day; a view shard apart
    assert result.write_units == result.updates
    exact(*pks)


def test_a_record_whose_parent_does_not_exist_is_skipped_and_never_blocks_the_stream() -> None:
    boards("BOARD#b1")
    Pin(pk="BOARD#none", sk="PIN#u1").save()
    Pin(pk="BOARD#b1", sk="PIN#u1").save()
    result = count(stream())
    assert result == {"batchItemFailures": []}
    assert any(change.parent is Board and change.key == ("BOARD#none", "META") for change in result.missing)
    exact("BOARD#b1")


def test_a_remove_never_takes_a_counter_below_zero() -> None:
    boards("BOARD#b1")
    Pin(pk="BOARD#b1", sk="PIN#u1", rating=3).save()
    first = stream()
    count(first)
    raw_client(None).update_item(TableName="Boards", Key={"pk": {"S": "BOARD#b1"}, "sk": {"S": "META"}},
                                 UpdateExpression="SET stars = :one", ExpressionAttributeValues={":one": {"N": "1"}})
    Pin(pk="BOARD#b1", sk="PIN#u1").delete()
    result = count(stream(after=first[-1]["dynamodb"]["SequenceNumber"]))
    board = Board.get("BOARD#b1", "META", consistent_read=True)
    assert board.stars == 0 and board.pin_count == 0
    assert [(change.attribute, change.delta) for change in result.floored] == [("stars", -2)]


def test_records_without_both_images_are_refused_and_nothing_is_written() -> None:
    boards("BOARD#b1")
    Pin(pk="BOARD#b1", sk="PIN#u1").save()
    records = stream()
    for record in records:
        record["dynamodb"].pop("OldImage", None)
        record["dynamodb"].pop("NewImage", None)
        record["dynamodb"]["StreamViewType"] = "KEYS_ONLY"
    with pytest.raises(ConfigurationError, match=r"view type is KEYS_ONLY.*NEW_AND_OLD_IMAGES"):
        count(records)
    assert Board.get("BOARD#b1", "META", consistent_read=True).pin_count == 0


def test_the_parents_own_records_and_other_models_are_skipped_and_said_so() -> None:
    boards("BOARD#b1")
    Pin(pk="BOARD#b1", sk="PIN#u1").save()
    count(stream())
    later = stream()
    result = count(later)
    reasons = Counter(skipped.reason for skipped in result.skipped)
    assert reasons[SkipReason.UNKNOWN] >= 3  # the board and its folders, as saved and as counted into
    assert reasons[SkipReason.COUNTED_ALREADY] == 1


def test_bad_arguments_are_refused_before_anything_is_written() -> None:
    with pytest.raises(InvalidArgumentError, match=r"takes a DynamoDB stream event"):
        count_stream({"nope": 1}, models=[Pin])
    with pytest.raises(InvalidArgumentError, match=r"Board.* is not a child counted from the stream"):
        count_stream({"Records": []}, models=[Board])
    with pytest.raises(InvalidArgumentError, match=r"takes a list of models"):
        count_stream({"Records": []}, models=Pin)  # type: ignore[arg-type]


def test_a_parent_outside_the_childs_partition_needs_markers_that_expire_else_the_batch_stops_there() -> None:
    """Counted outside its partition, each record is counted with a marker item that expires through the child's
    TTLAttribute (tests/test_stream_counting_markers.py); a child model without one is refused at its record."""
    class Elsewhere(CounterMixin, Model):
        class Meta:
            table_name = "Boards"
            region = "us-east-1"
            stream_view_type = "NEW_AND_OLD_IMAGES"

        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        board_pk = UnicodeAttribute()
        board = counted_by(Board.pin_count, key=lambda item: (item.board_pk, "META"), prefix="ELSE#",
                           counting="stream")

    boards("BOARD#b1")
    Elsewhere(pk="USER#u1", sk="ELSE#1", board_pk="BOARD#b1").save()
    result = count_stream(lambda_event(stream(), Board), models=[Elsewhere])
    assert result["batchItemFailures"] and isinstance(result.error, ConfigurationError)
    assert "outside its partition" in str(result.error) and "TTLAttribute" in str(result.error)
    assert Board.get("BOARD#b1", "META", consistent_read=True).pin_count == 0


def test_signals_fire_for_what_the_handler_counts() -> None:
    boards("BOARD#b1")
    Pin(pk="BOARD#b1", sk="PIN#u1", rating=2).save()
    pin = Pin.get("BOARD#b1", "PIN#u1")
    pin.folder = "art"
    pin.save()
    heard: List[Tuple[str, str, Tuple[str, ...]]] = []

    def hear(name: str) -> Any:
        return lambda sender, instance, changes, **_: heard.append((name, instance.folder,
                                                                     tuple(c.attribute for c in changes)))

    with signals.child_added.connected_to(hear("added"), sender=Pin), \
            signals.child_removed.connected_to(hear("removed"), sender=Pin):
        count(stream())
        assert heard[0][0] == "added" and "pin_count" in heard[0][2]
        assert ("removed", "art", ("pin_count",)) in heard and ("added", "art", ("pin_count",)) in heard
        heard.clear()
        count(stream())  # delivered again: nothing counted, nothing sent
    assert heard == []


def test_a_gone_rollup_is_created_again_by_its_first_count_with_its_defaults() -> None:
    boards("BOARD#b1")
    Pin(pk="BOARD#b1", sk="PIN#u1", day="d9").save()
    result = count(stream())
    day = DailyPins.get("BOARD#b1", "DAY#d9", consistent_read=True)
    assert (day.pins, day.label) == (1, "pins of d9")
    assert result.error is None


def test_a_failed_update_is_reported_from_its_first_record_and_redelivery_counts_the_rest_once() -> None:
    boards()
    activity(seed=11)
    records = stream()
    calls = {"n": 0}

    def failing(**_: Any) -> None:  # the 4th UpdateItem fails, before it reaches the engine
        calls["n"] += 1
        if calls["n"] == 4:
            raise ClientError({"Error": {"Code": "ValidationException", "Message": "injected: refused"},
                               "ResponseMetadata": {"HTTPStatusCode": 400}}, "UpdateItem")

    with hooked("before-send.dynamodb.UpdateItem", failing, Board):
        result = count(records)
    failed = result["batchItemFailures"][0]["itemIdentifier"]
    assert isinstance(result.error, CounterError) and "injected" in str(result.error)
    position = next(i for i, record in enumerate(records) if record["dynamodb"]["SequenceNumber"] == failed)
    assert count(records[position:]) == {"batchItemFailures": []}
    exact()


# -- records read with GetRecords, view types, deletions by TTL ------------------------------------------------------
def test_records_read_with_get_records_are_counted_with_table() -> None:
    boards("BOARD#b1")
    Pin(pk="BOARD#b1", sk="PIN#u1").save()
    records = stream()  # as GetRecords returns them: no eventSourceARN
    assert all("eventSourceARN" not in record for record in records)
    result = count_stream(records, models=[Pin], table="Boards")
    assert result == {"batchItemFailures": []} and len(result.counted) == 1
    exact("BOARD#b1")


@pytest.mark.parametrize("view", ["NEW_IMAGE", "OLD_IMAGE"])
def test_a_stream_with_one_image_is_refused_and_nothing_is_written(view: str) -> None:
    boards("BOARD#b1")
    Pin(pk="BOARD#b1", sk="PIN#u1").save()
    records = stream()
    for record in records:
        record["dynamodb"]["StreamViewType"] = view
        record["dynamodb"].pop("OldImage" if view == "NEW_IMAGE" else "NewImage", None)
    with pytest.raises(ConfigurationError, match=rf"view type is {view}"):
        count(records)
    assert Board.get("BOARD#b1", "META", consistent_read=True).pin_count == 0


def test_a_deletion_by_ttl_is_a_remove_like_any_other_and_expiries_of_transaction_relations_go_with_it() -> None:
    """One handler for a table: a child with a TTL counted from the stream (no expiries=) and in its transaction
    (expiries='stream'). Its deletion by TTL takes it off both, once; a replay changes nothing."""
    from tests.support.stream_records import expire, ttl_marked

    class Reminder(CounterMixin, Model):
        class Meta:
            table_name = "Boards"
            region = "us-east-1"
            stream_view_type = "NEW_AND_OLD_IMAGES"

        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        due = TTLAttribute(null=True)
        on_board = counted_by(Board.pin_count, key=lambda item: (item.pk, "META"), prefix="REMIND#",
                              counting="stream")
        noted = counted_by(Board.note_count, key=lambda item: (item.pk, "META"), prefix="REMIND#",
                           expiries="stream")

    boards("BOARD#b1")
    Reminder(pk="BOARD#b1", sk="REMIND#1", due=datetime(2026, 1, 1, tzinfo=timezone.utc)).save()
    handler = lambda records: count_stream(lambda_event(records, Board), models=[Reminder])  # noqa: E731
    assert handler(stream()).error is None
    board = Board.get("BOARD#b1", "META", consistent_read=True)
    assert (board.pin_count, board.note_count) == (1, 1)
    expired = expire("Boards", [{"pk": {"S": "BOARD#b1"}, "sk": {"S": "REMIND#1"}}])
    result = handler(ttl_marked(stream(), expired))
    assert result == {"batchItemFailures": []}
    assert result.expiries is not None and len(result.expiries.counted) == 1
    board = Board.get("BOARD#b1", "META", consistent_read=True)
    assert (board.pin_count, board.note_count) == (0, 0)
    replay = handler(ttl_marked(stream(), expired))
    assert replay.counted == () and replay.expiries is not None and replay.expiries.counted == ()
    board = Board.get("BOARD#b1", "META", consistent_read=True)
    assert (board.pin_count, board.note_count) == (0, 0)


def test_bulk_writes_refuse_a_child_counted_from_the_stream_alone_and_write_nothing() -> None:
    from pynamodb_counters import bulk_save
    from pynamodb_counters.exceptions import CountingBypassError

    boards("BOARD#b1")
    with pytest.raises(CountingBypassError, match=r"counted from the stream: write its items with .*batch_write"):
        bulk_save([Pin(pk="BOARD#b1", sk="PIN#u1")])
    assert Pin.count("BOARD#b1", Pin.sk.startswith("PIN#"), consistent_read=True) == 0
