"""The likes API on Django and moto's in-process DynamoDB: statuses, stored state, idempotency keys, the
blinker-to-Django signal bridge and the cache."""
from __future__ import annotations

import json
import logging
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest
from django.core.management import call_command
from django.test import Client

from likes.cache import peek_like_count
from likes.dynamo import get_models
from likes.signals import like_added, like_removed

from .conftest import like_items, stored_tally, table_items

LIKE = "/posts/p1/likes/{}"


def put(client: Client, url: str, body: Optional[Dict[str, Any]] = None, key: Optional[str] = None) -> Any:
    headers = {"Idempotency-Key": key} if key is not None else {}
    return client.put(url, json.dumps(body) if body is not None else "", content_type="application/json",
                      headers=headers)


class Recorder:
    """A Django receiver that keeps its calls."""

    def __init__(self) -> None:
        self.calls: List[Dict[str, Any]] = []

    def __call__(self, sender: Any, **kwargs: Any) -> None:
        self.calls.append({"sender": sender, **kwargs})


@pytest.fixture
def bridged() -> Iterator[Dict[str, Recorder]]:
    """Recorders connected to ``like_added`` and ``like_removed`` for the test."""
    recorders = {"added": Recorder(), "removed": Recorder()}
    like_added.connect(recorders["added"])
    like_removed.connect(recorders["removed"])
    yield recorders
    like_added.disconnect(recorders["added"])
    like_removed.disconnect(recorders["removed"])


def test_like_is_counted_and_read_with_one_getitem(client: Client, make_post: Callable[[str], None],
                                                    dynamodb_calls: List[str]) -> None:
    make_post("p1")
    response = put(client, LIKE.format("u1"), {"liked_at": 1750636800})
    assert response.status_code == 201
    assert response.json() == {"post_id": "p1", "user_id": "u1", "created": True}
    del dynamodb_calls[:]
    response = client.get("/posts/p1")
    assert response.status_code == 200
    assert response.json() == {"post_id": "p1", "likes": 1, "comment_count": 0, "published_count": 0}
    assert dynamodb_calls == ["GetItem"]
    assert stored_tally("p1") == 1
    assert like_items("p1") == ["LIKE#USER#u1"]


def test_duplicate_like_is_409(client: Client, make_post: Callable[[str], None]) -> None:
    make_post("p1")
    assert put(client, LIKE.format("u1"), {"liked_at": 1}).status_code == 201
    response = put(client, LIKE.format("u1"), {"liked_at": 2})
    assert response.status_code == 409
    assert response.json()["liked_at"] == 1  # the stored like, unchanged
    assert client.get("/posts/p1").json()["likes"] == 1
    assert stored_tally("p1") == 1
    assert like_items("p1") == ["LIKE#USER#u1"]


def test_duplicate_like_is_200_when_idempotent(client: Client, make_post: Callable[[str], None],
                                               settings: Any) -> None:  # pytest-django's settings fixture
    settings.LIKES = {**settings.LIKES, "DUPLICATE_LIKE_STATUS": 200}
    make_post("p1")
    assert put(client, LIKE.format("u1")).status_code == 201
    response = put(client, LIKE.format("u1"))
    assert (response.status_code, response.json()["created"]) == (200, False)
    assert client.delete(LIKE.format("u2")).status_code == 204
    assert stored_tally("p1") == 1


def test_unlike(client: Client, make_post: Callable[[str], None]) -> None:
    make_post("p1")
    put(client, LIKE.format("u1"))
    put(client, LIKE.format("u2"))
    response = client.delete(LIKE.format("u1"))
    assert response.status_code == 204
    assert response.content == b""
    assert client.get("/posts/p1").json()["likes"] == 1
    assert stored_tally("p1") == 1
    assert like_items("p1") == ["LIKE#USER#u2"]


def test_unlike_of_an_absent_like_is_404(client: Client, make_post: Callable[[str], None]) -> None:
    make_post("p1")
    put(client, LIKE.format("u1"))
    assert client.delete(LIKE.format("u2")).status_code == 404  # the post has 1 like
    assert client.delete(LIKE.format("u1")).status_code == 204
    response = client.delete(LIKE.format("u1"))  # the post has 0 likes
    assert response.status_code == 404
    assert response.json() == {"error": "u1 does not like post p1"}
    assert stored_tally("p1") == 0
    assert like_items("p1") == []


def test_like_on_a_missing_post_is_404_and_writes_nothing(client: Client) -> None:
    response = put(client, LIKE.format("u1"))
    assert response.status_code == 404
    assert response.json() == {"error": "post p1 does not exist"}
    assert table_items() == []  # no like, and no phantom post
    assert client.get("/posts/p1").status_code == 404


def test_idempotency_key_replay_counts_once(client: Client, make_post: Callable[[str], None],
                                            bridged: Dict[str, Recorder]) -> None:
    make_post("p1")
    first = put(client, LIKE.format("u1"), {"liked_at": 7}, key="req-0001")
    replay = put(client, LIKE.format("u1"), {"liked_at": 7}, key="req-0001")
    assert (first.status_code, replay.status_code) == (201, 201)
    assert replay.json() == first.json()
    assert stored_tally("p1") == 1
    assert like_items("p1") == ["LIKE#USER#u1"]
    assert len(bridged["added"].calls) == 2  # the replay is signalled again: receivers must be idempotent
    assert put(client, LIKE.format("u1"), key="req-0002").status_code == 409  # another key: a real duplicate
    assert stored_tally("p1") == 1


@pytest.mark.parametrize("key", ["", "x" * 37])
def test_idempotency_key_must_be_1_to_36_characters(client: Client, make_post: Callable[[str], None],
                                                    key: str) -> None:
    make_post("p1")
    assert put(client, LIKE.format("u1"), key=key).status_code == 400
    assert client.delete(LIKE.format("u1"), headers={"Idempotency-Key": key}).status_code == 400
    assert like_items("p1") == []
    assert put(client, LIKE.format("u1"), key="x" * 36).status_code == 201


def test_blinker_signals_are_bridged_to_django_signals(client: Client, make_post: Callable[[str], None],
                                                       bridged: Dict[str, Recorder]) -> None:
    make_post("p1")
    put(client, LIKE.format("u1"))
    put(client, LIKE.format("u1"))  # a duplicate: no like_added
    client.delete(LIKE.format("u2"))  # absent: no like_removed
    client.delete(LIKE.format("u1"))
    added, removed = bridged["added"].calls, bridged["removed"].calls
    assert [(c["sender"], c["post_id"], c["user_id"]) for c in added] == [(get_models().like, "p1", "u1")]
    assert [(c["post_id"], c["user_id"]) for c in removed] == [("p1", "u1")]
    assert added[0]["instance"].sk == "LIKE#USER#u1"
    assert [change.delta for change in removed[0]["result"].changes] == [-1]


def test_a_raising_django_receiver_does_not_fail_the_like(client: Client, make_post: Callable[[str], None],
                                                          caplog: pytest.LogCaptureFixture) -> None:
    def broken(sender: Any, **kwargs: Any) -> None:
        raise RuntimeError("receiver bug")

    make_post("p1")
    like_added.connect(broken)
    try:
        with caplog.at_level(logging.ERROR):
            assert put(client, LIKE.format("u1")).status_code == 201
    finally:
        like_added.disconnect(broken)
    assert "receiver bug" in caplog.text
    assert stored_tally("p1") == 1
    assert peek_like_count("p1") is None  # the app's own receiver still ran


def test_cache_receiver_drops_the_count_on_like_and_unlike(client: Client, make_post: Callable[[str], None],
                                                          dynamodb_calls: List[str],
                                                          caplog: pytest.LogCaptureFixture) -> None:
    make_post("p1")
    assert client.get("/posts/p1/like-count").json() == {"post_id": "p1", "likes": 0}
    assert peek_like_count("p1") == 0
    del dynamodb_calls[:]
    assert client.get("/posts/p1/like-count").json()["likes"] == 0
    assert dynamodb_calls == []  # served from the cache

    with caplog.at_level(logging.INFO, logger="likes.receivers"):
        put(client, LIKE.format("u1"))
    assert peek_like_count("p1") is None
    assert "u1 liked post p1; cached count dropped" in caplog.text
    assert client.get("/posts/p1/like-count").json()["likes"] == 1  # a stale cache would say 0
    assert dynamodb_calls == ["GetItem"]

    client.delete(LIKE.format("u1"))
    assert peek_like_count("p1") is None
    assert client.get("/posts/p1/like-count").json()["likes"] == 0


def test_cache_is_not_dropped_by_rejected_writes(client: Client, make_post: Callable[[str], None]) -> None:
    make_post("p1")
    put(client, LIKE.format("u1"))
    assert client.get("/posts/p1/like-count").json()["likes"] == 1
    assert put(client, LIKE.format("u1")).status_code == 409
    assert client.delete(LIKE.format("u2")).status_code == 404
    assert peek_like_count("p1") == 1


def test_post_endpoints(client: Client) -> None:
    assert client.get("/posts/p1").status_code == 404
    response = client.post("/posts/p1", {"title": "Hello"}, content_type="application/json")
    assert (response.status_code, response.json()) == (201, {"post_id": "p1", "likes": 0, "comment_count": 0,
                                                             "published_count": 0})
    assert client.post("/posts/p1").status_code == 409
    assert client.post("/posts/bad%23id").status_code == 400
    assert put(client, LIKE.format("u1"), {"liked_at": "soon"}).status_code == 400
    assert client.patch("/posts/p1").status_code == 405
    assert [item["sk"]["S"] for item in table_items()] == ["META"]


def test_create_table_command(capsys: pytest.CaptureFixture[str]) -> None:
    call_command("create_table")
    assert capsys.readouterr().out == "table LikesTest exists\n"
