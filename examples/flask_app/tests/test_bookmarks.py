"""Bookmarks, counted from the table's stream: the app writes them plainly, another service writes its own, and the
app's stream handler (``flask_likes.stream``) counts them all, exactly once, as a Lambda function on the stream
would be given them (``pynamodb_counters.testing.StreamReader``)."""
from __future__ import annotations

from typing import Callable, Dict

import boto3
import pytest
from flask import Flask
from flask.testing import FlaskClient
from pynamodb_counters import audit, repair, skip_counting
from pynamodb_counters.testing import StreamReader

from flask_likes.models import META, LikeModels
from flask_likes.stream import stream_handler

from .conftest import REGION, TABLE, table_items


@pytest.fixture
def stream(app: Flask) -> StreamReader:
    """The table's stream, read as the Lambda function's event source mapping reads it."""
    return StreamReader(app.extensions["likes_models"].post)


def bookmarks(client: FlaskClient, post_id: str) -> int:
    response = client.get(f"/posts/{post_id}/bookmark-count")
    assert response.status_code == 200, response.json
    count: int = response.json["bookmarks"]
    return count


def another_service_bookmarks(post_id: str, user_id: str) -> None:
    """A bookmark written by another service straight into the table, with its own client: no library."""
    boto3.client("dynamodb", region_name=REGION).put_item(
        TableName=TABLE, Item={"pk": {"S": f"POST#{post_id}"}, "sk": {"S": f"BOOKMARK#USER#{user_id}"}})


def test_bookmarks_by_anyone_are_counted_once_from_the_stream(
        app: Flask, client: FlaskClient, make_post: Callable[[str], None], stream: StreamReader) -> None:
    handler = stream_handler(app.extensions["likes_models"])
    make_post("p1")
    response = client.put("/posts/p1/bookmarks/u1")
    assert response.status_code == 202 and response.json == {"post_id": "p1", "user_id": "u1",
                                                              "counted": "from the stream"}
    another_service_bookmarks("p1", "u2")
    client.put("/posts/p1/likes/u3")  # a like: counted in its transaction, its records not the handler's
    assert bookmarks(client, "p1") == 0  # stored, not counted yet: the handler has not run

    batch = stream.pending()
    first = handler(batch)
    assert first == {"batchItemFailures": []} and len(first.counted) == 2
    assert bookmarks(client, "p1") == 2
    again = handler(batch)  # Lambda delivers a batch again after a timeout or a failure
    assert len(again.counted) == 0 and bookmarks(client, "p1") == 2

    assert client.put("/posts/p1/bookmarks/u1").status_code == 202  # the same bookmark again: a MODIFY, no count
    assert client.delete("/posts/p1/bookmarks/u2").status_code == 202  # the other service's, removed by the app
    assert client.delete("/posts/p1/bookmarks/u9").status_code == 202  # absent: nothing written, nothing counted
    handler(stream.pending())
    assert bookmarks(client, "p1") == 1


def test_an_audit_while_a_bookmark_waits_for_the_handler_finds_no_drift(
        app: Flask, client: FlaskClient, make_post: Callable[[str], None], stream: StreamReader) -> None:
    models: LikeModels = app.extensions["likes_models"]
    make_post("p1")
    client.put("/posts/p1/bookmarks/u1")
    stream_handler(models)(stream.pending())
    client.put("/posts/p1/bookmarks/u2")  # waits: not yet given to the handler

    waiting = audit(models.post.bookmark_count)
    assert (waiting.drifts, waiting.unverifiable, waiting.parents_checked) == ((), (), 1)
    assert bookmarks(client, "p1") == 1  # and the audit wrote nothing

    with skip_counting():  # drift, made by hand
        models.post(pk="POST#p1", sk=META).update(actions=[models.post.bookmark_count.set(7)])
    drifted = audit(models.post.bookmark_count)
    assert [(d.stored, d.actual) for d in drifted.drifts] == [(7, 1)]  # the waiting bookmark is the stream's
    assert [r.status for r in repair(drifted.drifts).repairs] == ["repaired"]
    assert bookmarks(client, "p1") == 1  # the fixture's handler counts the waiting one: 2 with 2 stored


def test_a_bookmark_of_a_missing_post_is_refused_and_nothing_is_written(client: FlaskClient) -> None:
    response = client.put("/posts/nope/bookmarks/u1")
    assert response.status_code == 404 and response.json == {"error": "post nope does not exist"}
    assert table_items() == []
    assert client.get("/posts/nope/bookmark-count").status_code == 404
    assert client.put("/posts/p%231/bookmarks/u1").status_code == 400  # not an id


def test_the_post_counts_are_unchanged_by_bookmarks(
        client: FlaskClient, make_post: Callable[[str], None]) -> None:
    make_post("p1")
    client.put("/posts/p1/bookmarks/u1")
    body: Dict[str, int] = client.get("/posts/p1").json
    assert body == {"post_id": "p1", "likes": 0, "comment_count": 0, "published_count": 0}


def test_the_count_stream_command_counts_what_is_new_each_time(
        app: Flask, client: FlaskClient, make_post: Callable[[str], None]) -> None:
    make_post("p1")
    client.put("/posts/p1/bookmarks/u1")
    runner = app.test_cli_runner()
    first = runner.invoke(args=["count-stream"])
    assert first.exit_code == 0 and "counted=1," in first.output, first.output
    another_service_bookmarks("p1", "u2")
    second = runner.invoke(args=["count-stream"])  # the whole stream again: the first bookmark is skipped
    assert second.exit_code == 0 and "counted=1," in second.output, second.output
    assert bookmarks(client, "p1") == 2
