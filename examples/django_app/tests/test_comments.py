"""Comments that change, on Django and moto's in-process DynamoDB: publish, move, soft delete and restore, text
edits and refused moves; each test reads the stored counters (one GetItem of each post) and checks that Django's
cache and the ``comment_counts_changed`` signal follow."""
from __future__ import annotations

import json
import logging
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest
from django.test import Client

from likes.cache import peek_comment_counts, peek_like_count
from likes.dynamo import get_models
from likes.signals import comment_counts_changed

from .conftest import comment_item, stored_counts, table_items

Counts = Dict[str, int]


def counts(comments: int, published: int, likes: int = 0) -> Counts:
    return {"like_tally": likes, "comment_count": comments, "published_count": published}


def send(client: Client, method: str, url: str, body: Optional[Dict[str, Any]] = None) -> Any:
    """A request with a JSON body (or none)."""
    data = json.dumps(body) if body is not None else ""
    return getattr(client, method)(url, data, content_type="application/json")


def patch(client: Client, comment_id: str, body: Dict[str, Any]) -> Any:
    return send(client, "patch", f"/comments/{comment_id}", body)


@pytest.fixture
def make_comment(client: Client) -> Callable[..., str]:
    """Comment on a post through the API (and publish it, if asked); the comment's id."""

    def make(post_id: str, text: str = "First!", publish: bool = False) -> str:
        response = send(client, "post", f"/posts/{post_id}/comments", {"text": text})
        assert response.status_code == 201, response.json()
        comment_id: str = response.json()["comment"]["comment_id"]
        if publish:
            assert patch(client, comment_id, {"status": "published"}).status_code == 200
        return comment_id

    return make


@pytest.fixture
def signalled() -> Iterator[List[Dict[str, Any]]]:
    """The calls of a receiver connected to ``comment_counts_changed`` for the test."""
    calls: List[Dict[str, Any]] = []

    def record(sender: Any, **kwargs: Any) -> None:
        calls.append({"sender": sender, **kwargs})

    comment_counts_changed.connect(record)
    yield calls
    comment_counts_changed.disconnect(record)


def cached(client: Client, post_id: str) -> Any:
    """The post's comment counts from the cached endpoint (filling the cache on a miss)."""
    response = client.get(f"/posts/{post_id}/comment-count")
    assert response.status_code == 200, response.json()
    return response.json()


def test_a_new_comment_is_a_draft_counted_once(client: Client, make_post: Callable[[str], None],
                                               dynamodb_calls: List[str]) -> None:
    make_post("p1")
    response = send(client, "post", "/posts/p1/comments", {"text": "First!"})
    assert response.status_code == 201
    comment = response.json()["comment"]
    assert response["Location"] == f"/comments/{comment['comment_id']}"
    assert comment == {"comment_id": comment["comment_id"], "post_id": "p1", "text": "First!", "status": "draft",
                       "deleted_at": None}
    assert response.json()["changes"] == [{"post_id": "p1", "counter": "comment_count", "delta": 1}]
    assert stored_counts("p1") == counts(1, 0)
    del dynamodb_calls[:]
    assert client.get("/posts/p1").json() == {"post_id": "p1", "likes": 0, "comment_count": 1, "published_count": 0}
    assert dynamodb_calls == ["GetItem"]
    assert client.get(f"/comments/{comment['comment_id']}").json() == comment


def test_publish_counts_it_as_published_and_unpublish_takes_it_back(client: Client,
                                                                    make_post: Callable[[str], None],
                                                                    make_comment: Callable[..., str],
                                                                    dynamodb_calls: List[str],
                                                                    signalled: List[Dict[str, Any]]) -> None:
    make_post("p1")
    comment_id = make_comment("p1")
    assert cached(client, "p1") == {"post_id": "p1", "comment_count": 1, "published_count": 0}

    del dynamodb_calls[:], signalled[:]
    response = patch(client, comment_id, {"status": "published"})
    assert response.status_code == 200
    assert response.json()["comment"]["status"] == "published"
    assert response.json()["changes"] == [{"post_id": "p1", "counter": "published_count", "delta": 1}]
    assert dynamodb_calls == ["GetItem"]  # the load; the edit itself is one transaction on the library's client
    assert stored_counts("p1") == counts(1, 1)
    assert [(c["sender"], c["comment_id"], c["post_ids"]) for c in signalled] == [
        (get_models().comment, comment_id, ("p1",))]
    assert peek_comment_counts("p1") is None
    assert cached(client, "p1")["published_count"] == 1  # a stale cache would say 0

    response = patch(client, comment_id, {"status": "draft"})
    assert response.json()["changes"] == [{"post_id": "p1", "counter": "published_count", "delta": -1}]
    assert stored_counts("p1") == counts(1, 0)
    assert peek_comment_counts("p1") is None
    assert cached(client, "p1")["published_count"] == 0


def test_a_move_moves_both_counts(client: Client, make_post: Callable[[str], None],
                                  make_comment: Callable[..., str], signalled: List[Dict[str, Any]],
                                  caplog: pytest.LogCaptureFixture) -> None:
    make_post("p1")
    make_post("p2")
    comment_id = make_comment("p1", publish=True)
    assert (cached(client, "p1")["comment_count"], cached(client, "p2")["comment_count"]) == (1, 0)

    del signalled[:]
    with caplog.at_level(logging.INFO, logger="likes.receivers"):
        response = patch(client, comment_id, {"post_id": "p2"})
    assert response.status_code == 200
    assert response.json()["comment"]["post_id"] == "p2"
    assert sorted((c["post_id"], c["counter"], c["delta"]) for c in response.json()["changes"]) == [
        ("p1", "comment_count", -1), ("p1", "published_count", -1),
        ("p2", "comment_count", 1), ("p2", "published_count", 1)]
    assert stored_counts("p1") == counts(0, 0)
    assert stored_counts("p2") == counts(1, 1)
    assert comment_item(comment_id)["post_id"] == {"S": "p2"}
    # sent once for the post it left (the comment already on p2), once for the post it joined
    assert sorted(c["post_ids"] for c in signalled) == [("p1",), ("p2",)]
    assert {c["instance"].post_id for c in signalled} == {"p2"}
    assert (peek_comment_counts("p1"), peek_comment_counts("p2")) == (None, None)
    assert f"comment {comment_id} moved the counts of post p1; cached counts dropped" in caplog.text
    assert cached(client, "p1") == {"post_id": "p1", "comment_count": 0, "published_count": 0}
    assert cached(client, "p2") == {"post_id": "p2", "comment_count": 1, "published_count": 1}


def test_a_soft_delete_takes_it_out_of_both_counts_and_a_restore_puts_it_back(
        client: Client, make_post: Callable[[str], None], make_comment: Callable[..., str]) -> None:
    make_post("p1")
    comment_id = make_comment("p1", publish=True)
    make_comment("p1")  # a draft that stays
    assert cached(client, "p1")["comment_count"] == 2

    response = client.delete(f"/comments/{comment_id}")
    assert response.status_code == 200
    deleted_at = response.json()["comment"]["deleted_at"]
    assert deleted_at is not None
    assert sorted((c["counter"], c["delta"]) for c in response.json()["changes"]) == [
        ("comment_count", -1), ("published_count", -1)]
    assert stored_counts("p1") == counts(1, 0)
    assert "deleted_at" in comment_item(comment_id)  # soft: the item stays
    assert peek_comment_counts("p1") is None
    assert cached(client, "p1") == {"post_id": "p1", "comment_count": 1, "published_count": 0}

    again = client.delete(f"/comments/{comment_id}")  # already deleted: nothing written
    assert (again.status_code, again.json()["changes"], again.json()["comment"]["deleted_at"]) == (
        200, [], deleted_at)
    assert peek_comment_counts("p1") is not None
    assert client.get(f"/comments/{comment_id}").json()["deleted_at"] == deleted_at

    response = client.post(f"/comments/{comment_id}/restore")
    assert response.status_code == 200
    assert (response.json()["comment"]["status"], response.json()["comment"]["deleted_at"]) == ("published", None)
    assert sorted((c["counter"], c["delta"]) for c in response.json()["changes"]) == [
        ("comment_count", 1), ("published_count", 1)]
    assert stored_counts("p1") == counts(2, 1)
    assert "deleted_at" not in comment_item(comment_id)
    assert peek_comment_counts("p1") is None
    assert cached(client, "p1") == {"post_id": "p1", "comment_count": 2, "published_count": 1}
    assert client.post(f"/comments/{comment_id}/restore").json()["changes"] == []  # not deleted: nothing written


def test_a_soft_deleted_comment_published_counts_only_once_restored(client: Client,
                                                                     make_post: Callable[[str], None],
                                                                     make_comment: Callable[..., str]) -> None:
    make_post("p1")
    comment_id = make_comment("p1")
    client.delete(f"/comments/{comment_id}")
    assert stored_counts("p1") == counts(0, 0)
    response = patch(client, comment_id, {"status": "published"})
    assert (response.status_code, response.json()["changes"]) == (200, [])
    assert stored_counts("p1") == counts(0, 0)
    client.post(f"/comments/{comment_id}/restore")
    assert stored_counts("p1") == counts(1, 1)


def test_a_text_edit_changes_no_count(client: Client, make_post: Callable[[str], None],
                                      make_comment: Callable[..., str], signalled: List[Dict[str, Any]]) -> None:
    make_post("p1")
    comment_id = make_comment("p1", publish=True)
    before = cached(client, "p1")
    del signalled[:]
    response = patch(client, comment_id, {"text": "Edited"})
    assert response.status_code == 200
    assert (response.json()["comment"]["text"], response.json()["changes"]) == ("Edited", [])
    assert comment_item(comment_id)["text"] == {"S": "Edited"}
    assert stored_counts("p1") == counts(1, 1)
    assert signalled == []
    assert peek_comment_counts("p1") == {"comment_count": 1, "published_count": 1}  # the cache stays
    assert cached(client, "p1") == before


def test_a_move_to_a_missing_post_is_refused_and_changes_nothing(client: Client,
                                                                 make_post: Callable[[str], None],
                                                                 make_comment: Callable[..., str],
                                                                 signalled: List[Dict[str, Any]]) -> None:
    make_post("p1")
    comment_id = make_comment("p1", publish=True)
    cached(client, "p1")
    stored = comment_item(comment_id)
    del signalled[:]
    response = patch(client, comment_id, {"post_id": "nowhere", "text": "Moved"})
    assert response.status_code == 409
    assert response.json() == {"error": "post nowhere does not exist; the comment was not moved"}
    assert stored_counts("p1") == counts(1, 1)
    assert comment_item(comment_id) == stored  # not moved, text unchanged
    assert [item["pk"]["S"] for item in table_items() if item["pk"]["S"].startswith("POST#")] == ["POST#p1"]
    assert signalled == []
    assert peek_comment_counts("p1") == {"comment_count": 1, "published_count": 1}


def test_comment_and_like_caches_are_apart(client: Client, make_post: Callable[[str], None],
                                           make_comment: Callable[..., str]) -> None:
    make_post("p1")
    send(client, "put", "/posts/p1/likes/u1")
    comment_id = make_comment("p1")
    assert (client.get("/posts/p1/like-count").json()["likes"], cached(client, "p1")["comment_count"]) == (1, 1)
    patch(client, comment_id, {"status": "published"})
    assert (peek_like_count("p1"), peek_comment_counts("p1")) == (1, None)  # a comment's write: its cache only
    assert cached(client, "p1")["published_count"] == 1
    client.delete("/posts/p1/likes/u1")
    assert (peek_like_count("p1"), peek_comment_counts("p1")) == (None, {"comment_count": 1, "published_count": 1})
    assert stored_counts("p1") == counts(1, 1)


def test_missing_comments_and_posts_are_404_and_write_nothing(client: Client,
                                                              make_post: Callable[[str], None]) -> None:
    response = send(client, "post", "/posts/p1/comments", {"text": "Hello"})
    assert (response.status_code, response.json()) == (404, {"error": "post p1 does not exist"})
    assert table_items() == []  # no comment, and no phantom post
    make_post("p1")
    for method, url in [("get", "/comments/c404"), ("patch", "/comments/c404"), ("delete", "/comments/c404"),
                        ("post", "/comments/c404/restore")]:
        response = send(client, method, url, {"text": "x"} if method == "patch" else None)
        assert (response.status_code, response.json()) == (404, {"error": "comment c404 does not exist"}), url
    assert client.get("/posts/p404/comment-count").status_code == 404
    assert client.put("/comments/c1").status_code == 405
    assert stored_counts("p1") == counts(0, 0)
    assert [item["sk"]["S"] for item in table_items()] == ["META"]


@pytest.mark.parametrize("body, error", [
    ({}, "nothing to change: give status, text or post_id"),
    ({"status": "hidden"}, "status must be 'draft' or 'published'"),
    ({"text": ""}, "text must be a string of 1 to 2000 characters"),
    ({"text": 7}, "text must be a string of 1 to 2000 characters"),
    ({"post_id": "bad#id"}, "post_id must be 1 to 64 letters, digits, '-' or '_'"),
    ({"post_id": 2}, "post_id must be a string"),
    ({"status": "published", "pk": "COMMENT#other"}, "unknown field 'pk': a comment's status, text and post_id "
                                                     "can change"),
])
def test_a_bad_edit_is_400_and_writes_nothing(client: Client, make_post: Callable[[str], None],
                                              make_comment: Callable[..., str], body: Dict[str, Any],
                                              error: str) -> None:
    make_post("p1")
    comment_id = make_comment("p1")
    stored = comment_item(comment_id)
    response = patch(client, comment_id, body)
    assert (response.status_code, response.json()) == (400, {"error": error})
    assert comment_item(comment_id) == stored
    assert stored_counts("p1") == counts(1, 0)
    assert send(client, "post", "/posts/p1/comments", {"text": "x" * 2001}).status_code == 400
    assert send(client, "post", "/posts/p1/comments").status_code == 400  # no text
