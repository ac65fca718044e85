"""The first hour with counting from the stream: each silent misconfiguration a new user meets is a clear error or
warning naming the fix, and nothing is written.

A relation counted from the stream on a model whose table would have no stream warns when declared; an audit of
its counter on such a table says how to enable the stream; a handler given another table's records refuses them;
``repair()`` given a counter names ``repair(audit(...).drifts)``; and the report's count of drifts says it is a
count (``drift_count``; ``drifted`` warns, one more release)."""
from __future__ import annotations

import warnings
from typing import Any, List

import pytest
from pynamodb.attributes import TTLAttribute, UnicodeAttribute
from pynamodb.constants import STREAM_NEW_AND_OLD_IMAGE, STREAM_OLD_IMAGE
from pynamodb.models import Model

from pynamodb_counters import CounterField, CounterMixin, audit, counted_by, repair
from pynamodb_counters.exceptions import ConfigurationError, ConfigurationWarning, InvalidArgumentError
from pynamodb_counters.streams import count_stream
from pynamodb_counters.testing import lambda_event, stream_records
from tests.support.factories import raw_client, stored
from tests.support.models import REGION
from tests.support.stream_models import STREAM_MODELS, Board, Pin

pytestmark = pytest.mark.usefixtures("dynamodb")


@pytest.fixture
def counters_models() -> List[type]:
    return list(STREAM_MODELS)


def quiet_models(view: Any, table: str = "Quiet", **relation: Any) -> Any:
    """A post and its likes in ``table``, the likes counted from the stream, ``Meta.stream_view_type`` ``view``."""
    meta = type("Meta", (), {"table_name": table, "region": REGION,
                             **({} if view is None else {"stream_view_type": view})})

    class Post(CounterMixin, Model):
        Meta = meta
        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        likes = CounterField()

    class Like(CounterMixin, Model):
        Meta = meta
        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        expires_at = TTLAttribute(null=True)
        post = counted_by(Post.likes, key=lambda like: (like.pk, "META"), prefix="LIKE#",
                          **(relation or {"counting": "stream"}))

    return Post, Like


@pytest.mark.parametrize("view", [None, STREAM_OLD_IMAGE])
def test_a_stream_relation_on_a_model_whose_table_would_have_no_images_warns_when_declared(view: Any) -> None:
    with pytest.warns(ConfigurationWarning) as warned:
        quiet_models(view)
    [warning] = [w for w in warned if issubclass(w.category, ConfigurationWarning)]
    assert warning.filename == __file__  # the class statement, not the library
    message = str(warning.message)
    assert "Like.post" in message and "stream_view_type" in message and "NEW_AND_OLD_IMAGES" in message


def test_a_model_whose_table_has_the_images_declares_in_silence() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConfigurationWarning)
        quiet_models(STREAM_NEW_AND_OLD_IMAGE, table="Loud")
        quiet_models(STREAM_OLD_IMAGE, table="Expiring", expiries="stream")  # an expiry needs the old image alone


def test_an_audit_of_a_counter_fed_from_a_table_without_a_stream_says_how_to_enable_it() -> None:
    with pytest.warns(ConfigurationWarning):
        Post, Like = quiet_models(None)
    Post.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
    try:
        Post(pk="P", sk="META").save()
        Like(pk="P", sk="LIKE#ann").save()
        with pytest.raises(ConfigurationError, match=r"(?s)Quiet has no stream.*update-table --table-name Quiet "
                                                     r"--stream-specification StreamEnabled=true"):
            audit(Post.likes, parents=[("P", "META")])
        assert [item["sk"]["S"] for item in stored("Quiet")] == ["LIKE#ann", "META"]  # no probe left
    finally:
        Post.delete_table()


def test_a_handler_given_another_tables_records_refuses_them_and_writes_nothing() -> None:
    Board(pk="BOARD#b1", sk="META").save()
    Pin(pk="BOARD#b1", sk="PIN#u1").save()
    event = lambda_event(stream_records(Board), Board)
    for record in event["Records"]:  # as a function on the Walls table's stream receives them
        record["eventSourceARN"] = record["eventSourceARN"].replace(":table/Boards/", ":table/Walls/")
    before = stored("Boards")
    with pytest.raises(ConfigurationError, match=r"record 0 .* is of table Walls's stream, and the models given "
                                                 r"\(Pin\) are stored in Boards"):
        count_stream(event, models=[Pin])
    with pytest.raises(ConfigurationError, match="is of table Walls's stream"):
        count_stream(stream_records(Board), models=[Pin], table="Walls")
    assert stored("Boards") == before


@pytest.mark.parametrize("given", ["counter", "relation", "report", "text"])
def test_repair_given_anything_but_drifts_names_repair_of_an_audits_drifts_and_writes_nothing(given: str) -> None:
    Board(pk="BOARD#b1", sk="META").save()
    raw_client(None).update_item(TableName="Boards", Key={"pk": {"S": "BOARD#b1"}, "sk": {"S": "META"}},
                                 UpdateExpression="ADD pin_count :n", ExpressionAttributeValues={":n": {"N": "2"}})
    report = audit(Board.pin_count, parents=[("BOARD#b1", "META")])
    assert report.drift_count == 1
    value = {"counter": Board.pin_count, "relation": Pin.board, "report": report, "text": "Board.pin_count"}[given]
    before = stored("Boards")
    with pytest.raises(InvalidArgumentError, match=r"repair\(\) takes the drifts an audit found.*"
                                                   r"repair\(audit\(Post.like_tally\).drifts\)"):
        repair(value)
    assert stored("Boards") == before


def test_the_count_of_drifts_says_it_is_a_count_and_the_old_name_warns() -> None:
    Board(pk="BOARD#b1", sk="META").save()
    report = audit(Board.pin_count, parents=[("BOARD#b1", "META")])
    assert report.drift_count == 0 and report.as_dict()["drift_count"] == 0
    with pytest.warns(DeprecationWarning, match="drift_count"):
        assert report.drifted == 0


def test_a_malformed_record_in_a_large_event_is_named_by_its_index_and_what_it_lacks() -> None:
    Board(pk="BOARD#b1", sk="META").save()
    Pin(pk="BOARD#b1", sk="PIN#u1").save()
    good = lambda_event(stream_records(Board), Board)["Records"]
    records = [dict(good[0], eventID=f"e{n}") for n in range(1000)]
    records.insert(700, {"eventID": "odd", "eventName": "INSERT"})
    before = stored("Boards")
    with pytest.raises(InvalidArgumentError, match=r"record 700 of 1001 has no 'dynamodb'"):
        count_stream({"Records": records}, models=[Pin])
    one_image = dict(good[-1], dynamodb={**good[-1]["dynamodb"], "StreamViewType": "KEYS_ONLY"})
    with pytest.raises(ConfigurationError, match=r"is an INSERT without NewImage"):
        count_stream({"Records": [one_image]}, models=[Pin])
    assert stored("Boards") == before


def test_the_shipped_stream_reader_delivers_what_was_written_since_the_last_delivery_as_lambda_does(
        counters_stream: Any) -> None:
    stream = counters_stream(Pin)
    Board(pk="BOARD#b1", sk="META").save()
    Pin(pk="BOARD#b1", sk="PIN#u1", rating=2).save()
    first = stream.pending()
    arn = raw_client(None).describe_table(TableName="Boards")["Table"]["LatestStreamArn"]
    assert first["Records"] and all(record["eventSourceARN"] == arn for record in first["Records"])
    assert all(isinstance(record["dynamodb"]["ApproximateCreationDateTime"], float) for record in first["Records"])
    assert count_stream(first, models=[Pin]).error is None
    own = count_stream(stream.pending(), models=[Pin])  # the handler's own updates, since: no pin's
    assert own.counted == () and own.skipped
    assert stream.pending() == {"Records": []}  # nothing written since
    Pin(pk="BOARD#b1", sk="PIN#u2").save()
    Pin(pk="BOARD#b1", sk="PIN#u1").delete()
    second = stream.pending()
    assert [record["eventName"] for record in second["Records"]] == ["INSERT", "REMOVE"]
    assert count_stream(second, models=[Pin]).error is None
    board = Board.get("BOARD#b1", "META", consistent_read=True)
    assert (board.pin_count, board.stars) == (1, 0)


def test_a_results_repr_says_what_was_counted_skipped_left_out_and_floored() -> None:
    Board(pk="BOARD#b1", sk="META").save()
    Pin(pk="BOARD#b1", sk="PIN#u1").save()
    Pin(pk="BOARD#b2", sk="PIN#u1").save()  # its board does not exist
    result = count_stream(lambda_event(stream_records(Board), Board), models=[Pin])
    unknown = sum(1 for skipped in result.skipped if skipped.reason.name == "UNKNOWN")  # the boards' own records
    assert unknown and result.missing and result.counted
    assert repr(result) == (f"StreamResult(counted={len(result.counted)}, skipped={{UNKNOWN: {unknown}}}, "
                            f"missing={len(result.missing)}, floored=0, updates={result.updates}, failure=None)")
    assert "batchItemFailures" not in repr(result)
