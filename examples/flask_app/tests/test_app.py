"""The likes API on moto's in-process DynamoDB: statuses, stored state, idempotency keys and the cache."""
from __future__ import annotations

import gc
import logging
from typing import Callable, List

import pytest
from flask import Flask
from flask.testing import FlaskClient
from pynamodb_counters.exceptions import RetriesExhaustedError, TransactionError

from flask_likes import create_app

from .conftest import TEST_CONFIG, like_items, stored_tally, table_items

LIKE = "/posts/p1/likes/{}"


def test_like_is_counted_and_read_with_one_getitem(client: FlaskClient, make_post: Callable[[str], None],
                                                    dynamodb_calls: List[str]) -> None:
    make_post("p1")
    response = client.put(LIKE.format("u1"), json={"liked_at": 1750636800})
    assert response.status_code == 201
    assert response.json == {"post_id": "p1", "user_id": "u1", "created": True}
    del dynamodb_calls[:]
    response = client.get("/posts/p1")
    assert response.status_code == 200
    assert response.json == {"post_id": "p1", "likes": 1, "comment_count": 0, "published_count": 0}
    assert dynamodb_calls == ["GetItem"]
    assert stored_tally("p1") == 1
    assert like_items("p1") == ["LIKE#USER#u1"]


@pytest.mark.parametrize("app, status", [(200, 200), (409, 409)], indirect=["app"])
def test_duplicate_like_answers_the_configured_status(client: FlaskClient, make_post: Callable[[str], None],
                                                      status: int) -> None:
    make_post("p1")
    assert client.put(LIKE.format("u1"), json={"liked_at": 1}).status_code == 201
    response = client.put(LIKE.format("u1"), json={"liked_at": 2})
    assert response.status_code == status
    if status == 200:
        assert response.json == {"post_id": "p1", "user_id": "u1", "created": False}
    else:
        assert response.json["liked_at"] == 1  # the stored like, unchanged
    assert client.get("/posts/p1").json["likes"] == 1
    assert stored_tally("p1") == 1
    assert like_items("p1") == ["LIKE#USER#u1"]


@pytest.mark.parametrize("app", [200, 409], indirect=True)
def test_unlike(client: FlaskClient, make_post: Callable[[str], None]) -> None:
    make_post("p1")
    client.put(LIKE.format("u1"))
    client.put(LIKE.format("u2"))
    response = client.delete(LIKE.format("u1"))
    assert response.status_code == 204
    assert response.data == b""
    assert client.get("/posts/p1").json["likes"] == 1
    assert stored_tally("p1") == 1
    assert like_items("p1") == ["LIKE#USER#u2"]


@pytest.mark.parametrize("app, status", [(200, 204), (409, 404)], indirect=["app"])
def test_unlike_of_an_absent_like(client: FlaskClient, make_post: Callable[[str], None], status: int) -> None:
    make_post("p1")
    client.put(LIKE.format("u1"))
    assert client.delete(LIKE.format("u2")).status_code == status
    assert client.delete(LIKE.format("u1")).status_code == 204
    assert client.delete(LIKE.format("u1")).status_code == status
    assert stored_tally("p1") == 0
    assert like_items("p1") == []


def test_like_on_a_missing_post_is_404_and_writes_nothing(client: FlaskClient) -> None:
    response = client.put(LIKE.format("u1"))
    assert response.status_code == 404
    assert response.json == {"error": "post p1 does not exist"}
    assert table_items() == []  # no like, and no phantom post
    assert client.get("/posts/p1").status_code == 404


@pytest.mark.parametrize("app, duplicate", [(200, 200), (409, 409)], indirect=["app"])
def test_idempotency_key_replay_counts_once(app: Flask, client: FlaskClient, make_post: Callable[[str], None],
                                            duplicate: int) -> None:
    make_post("p1")
    first = client.put(LIKE.format("u1"), json={"liked_at": 7}, headers={"Idempotency-Key": "req-0001"})
    assert client.get("/posts/p1/like-count").json["likes"] == 1  # cached
    replay = client.put(LIKE.format("u1"), json={"liked_at": 7}, headers={"Idempotency-Key": "req-0001"})
    assert (first.status_code, replay.status_code) == (201, 201)
    assert replay.json == first.json
    assert stored_tally("p1") == 1
    assert like_items("p1") == ["LIKE#USER#u1"]
    # the replay sent child_added again: the cache dropped the count instead of making it 2
    assert app.extensions["like_cache"].get("p1") is None
    assert client.get("/posts/p1/like-count").json["likes"] == 1
    # another key is another request: a real duplicate
    assert client.put(LIKE.format("u1"), headers={"Idempotency-Key": "req-0002"}).status_code == duplicate
    assert stored_tally("p1") == 1


@pytest.mark.parametrize("key", ["", "x" * 37])
def test_idempotency_key_must_be_1_to_36_characters(client: FlaskClient, make_post: Callable[[str], None],
                                                    key: str) -> None:
    make_post("p1")
    assert client.put(LIKE.format("u1"), headers={"Idempotency-Key": key}).status_code == 400
    assert client.delete(LIKE.format("u1"), headers={"Idempotency-Key": key}).status_code == 400
    assert like_items("p1") == []
    assert client.put(LIKE.format("u1"), headers={"Idempotency-Key": "x" * 36}).status_code == 201


def test_idempotency_key_reused_for_another_request_is_422(app: Flask, client: FlaskClient,
                                                           make_post: Callable[[str], None],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # moto ignores ClientRequestToken, so DynamoDB's answer to a token reused with other parameters is simulated
    import botocore.exceptions

    make_post("p1")
    mismatch = botocore.exceptions.ClientError(
        {"Error": {"Code": "IdempotentParameterMismatchException", "Message": "token reused"}},
        "TransactWriteItems")

    def refuse(self: object, *args: object, **kwargs: object) -> None:
        raise TransactionError("DynamoDB rejected the transaction", mismatch)

    monkeypatch.setattr(app.extensions["likes_models"].like, "save", refuse)
    response = client.put(LIKE.format("u1"), headers={"Idempotency-Key": "req-0001"})
    assert response.status_code == 422
    assert like_items("p1") == []


def test_exhausted_retries_are_503_with_retry_after(app: Flask, client: FlaskClient,
                                                   make_post: Callable[[str], None],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    make_post("p1")

    def busy(self: object, *args: object, **kwargs: object) -> None:
        raise RetriesExhaustedError("retries exhausted", attempts=8, ambiguous=True, token="req-0001")

    monkeypatch.setattr(app.extensions["likes_models"].like, "save", busy)
    response = client.put(LIKE.format("u1"), headers={"Idempotency-Key": "req-0001"})
    assert (response.status_code, response.headers["Retry-After"]) == (503, "1")
    assert response.json["may_have_committed"] is True


def test_cache_receiver_drops_the_count_on_like_and_unlike(app: Flask, client: FlaskClient,
                                                          make_post: Callable[[str], None],
                                                          dynamodb_calls: List[str],
                                                          caplog: pytest.LogCaptureFixture) -> None:
    cache = app.extensions["like_cache"]
    make_post("p1")
    assert client.get("/posts/p1/like-count").json == {"post_id": "p1", "likes": 0}
    assert cache.get("p1") == 0
    del dynamodb_calls[:]
    assert client.get("/posts/p1/like-count").json["likes"] == 0
    assert dynamodb_calls == []  # served from the cache

    with caplog.at_level(logging.INFO, logger="flask_likes.cache"):
        client.put(LIKE.format("u1"))
    assert cache.get("p1") is None
    assert "like +1 on post p1 committed" in caplog.text
    assert client.get("/posts/p1/like-count").json["likes"] == 1  # a stale cache would say 0
    assert dynamodb_calls == ["GetItem"]

    client.delete(LIKE.format("u1"))
    assert cache.get("p1") is None
    assert client.get("/posts/p1/like-count").json["likes"] == 0


def test_cache_is_not_dropped_by_rejected_writes(app: Flask, client: FlaskClient,
                                                 make_post: Callable[[str], None]) -> None:
    cache = app.extensions["like_cache"]
    make_post("p1")
    client.put(LIKE.format("u1"))
    assert client.get("/posts/p1/like-count").json["likes"] == 1
    assert client.put(LIKE.format("u1")).status_code == 409
    assert client.delete(LIKE.format("u2")).status_code == 404
    assert cache.get("p1") == 1


def test_receivers_outlive_garbage_collection_and_stay_per_app(app: Flask, client: FlaskClient,
                                                               make_post: Callable[[str], None]) -> None:
    other = create_app({"DYNAMODB_TABLE": "Other"})  # its own models, cache and receivers
    gc.collect()
    cache = app.extensions["like_cache"]
    make_post("p1")
    client.get("/posts/p1/like-count")
    other.extensions["like_cache"].read_through("p1", lambda: 42)
    client.put(LIKE.format("u1"))
    assert cache.get("p1") is None
    assert other.extensions["like_cache"].get("p1") == 42  # another app's likes are not this app's


def test_post_endpoints(client: FlaskClient) -> None:
    assert client.get("/posts/p1").status_code == 404
    response = client.post("/posts/p1", json={"title": "Hello"})
    assert (response.status_code, response.json) == (201, {"post_id": "p1", "likes": 0, "comment_count": 0,
                                                           "published_count": 0})
    assert client.post("/posts/p1").status_code == 409
    assert client.post("/posts/bad%23id").status_code == 400
    assert client.put("/posts/p1/likes/u1", json={"liked_at": "soon"}).status_code == 400
    assert [item["sk"]["S"] for item in table_items()] == ["META"]


def test_create_table_command(app: Flask) -> None:
    result = app.test_cli_runner().invoke(args=["create-table"])
    assert result.output == "table LikesTest exists\n"


def test_duplicate_like_status_is_checked() -> None:
    with pytest.raises(ValueError, match="DUPLICATE_LIKE_STATUS"):
        create_app({"DUPLICATE_LIKE_STATUS": 400})


@pytest.mark.parametrize("body", [b"not json", b"{", b'["a list"]', b"7"])
def test_a_json_body_that_is_not_a_json_object_is_400_and_nothing_is_written(
        client: FlaskClient, make_post: Callable[[str], None], body: bytes) -> None:
    make_post("p1")
    response = client.put(LIKE.format("u1"), data=body, content_type="application/json")
    assert response.status_code == 400
    assert response.json["error"] in ("the body must be JSON", "the body must be a JSON object")
    assert like_items("p1") == []
    assert client.post("/posts/p2", data=body, content_type="application/json").status_code == 400
    assert client.get("/posts/p2").status_code == 404


def test_the_tests_ignore_the_shells_flask_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLASK_DYNAMODB_HOST", "http://127.0.0.1:9")  # as after the README's "Run it"
    monkeypatch.setenv("FLASK_DYNAMODB_TABLE", "Elsewhere")
    app = create_app(TEST_CONFIG)
    models = app.extensions["likes_models"]
    assert (models.post.Meta.host, models.post.Meta.table_name) == (None, "LikesTest")
