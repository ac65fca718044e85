"""Fixtures: an app per test on moto's in-process DynamoDB, and a check that every counter stayed exact."""
from __future__ import annotations

import os
from collections import Counter
from typing import Any, Callable, Dict, Iterator, List

import boto3
import pytest
from flask import Flask
from flask.testing import FlaskClient
from moto import mock_aws
from pynamodb_counters.testing import StreamReader

from flask_likes import create_app
from flask_likes.models import BOOKMARK_PREFIX, COMMENT, LIKE_PREFIX, META, LikeModels
from flask_likes.stream import stream_handler

# Dummy credentials, set before any client exists: nothing here may reach AWS.
os.environ["AWS_ACCESS_KEY_ID"] = "testing"
os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"
os.environ["AWS_SESSION_TOKEN"] = "testing"
os.environ["AWS_DEFAULT_REGION"] = "us-east-1"
os.environ.pop("AWS_PROFILE", None)
# The app reads FLASK_-prefixed settings from the environment (the README's "Run it" exports
# FLASK_DYNAMODB_HOST): the tests' apps name every setting they depend on, so a shell's settings never reach them.
TABLE = "LikesTest"
REGION = "us-east-1"
TEST_CONFIG = {"TESTING": True, "DYNAMODB_TABLE": TABLE, "DYNAMODB_HOST": None, "AWS_REGION": REGION}


def table_items() -> List[Dict[str, Any]]:
    """Every item of the table, read raw (not through the app's models)."""
    client = boto3.client("dynamodb", region_name=REGION)
    items: List[Dict[str, Any]] = client.scan(TableName=TABLE, ConsistentRead=True)["Items"]
    return items


def like_items(post_id: str) -> List[str]:
    """The range keys of the like items stored for ``post_id``."""
    return sorted(item["sk"]["S"] for item in table_items()
                  if item["pk"]["S"] == f"POST#{post_id}" and item["sk"]["S"].startswith(LIKE_PREFIX))


def stored_tally(post_id: str) -> int:
    """The post's ``like_tally`` as stored."""
    for item in table_items():
        if item["pk"]["S"] == f"POST#{post_id}" and item["sk"]["S"] == META:
            return int(item["like_tally"]["N"])
    raise AssertionError(f"post {post_id} is not stored")


def stored_counts(post_id: str) -> Dict[str, int]:
    """The post's stored counters, read with one strongly consistent GetItem (not through the app's models)."""
    client = boto3.client("dynamodb", region_name=REGION)
    item = client.get_item(TableName=TABLE, Key={"pk": {"S": f"POST#{post_id}"}, "sk": {"S": META}},
                           ConsistentRead=True).get("Item")
    assert item is not None, f"post {post_id} is not stored"
    return {name: int(item[name]["N"]) if name in item else 0
            for name in ("like_tally", "comment_count", "published_count")}


def comment_item(comment_id: str) -> Dict[str, Any]:
    """The comment's stored item, raw."""
    [item] = [item for item in table_items() if item["pk"]["S"] == f"COMMENT#{comment_id}"]
    return item


def _counter(item: Dict[str, Any], name: str) -> int:
    return int(item[name]["N"]) if name in item else 0


def assert_counters_exact() -> None:
    """Every post's stored ``like_tally`` equals the number of its like items, its ``bookmark_count`` the number of
    its bookmarks, its ``comment_count`` the number of its comments not soft-deleted, and its ``published_count``
    the number of those published (the stream handler must have run for the bookmarks)."""
    items = table_items()
    posts = {item["pk"]["S"]: item for item in items if item["sk"]["S"] == META}
    likes = Counter(item["pk"]["S"] for item in items if item["sk"]["S"].startswith(LIKE_PREFIX))
    bookmarks = Counter(item["pk"]["S"] for item in items if item["sk"]["S"].startswith(BOOKMARK_PREFIX))
    comments = [item for item in items if item["sk"]["S"] == COMMENT and "deleted_at" not in item]
    counted = Counter(f"POST#{item['post_id']['S']}" for item in comments)
    published = Counter(f"POST#{item['post_id']['S']}" for item in comments if item["status"]["S"] == "published")
    assert set(likes) | set(bookmarks) | set(counted) <= set(posts), "a like, bookmark or comment without its post"
    assert {pk: _counter(post, "like_tally") for pk, post in posts.items()} == {pk: likes[pk] for pk in posts}
    assert ({pk: _counter(post, "bookmark_count") for pk, post in posts.items()}
            == {pk: bookmarks[pk] for pk in posts})
    assert {pk: _counter(post, "comment_count") for pk, post in posts.items()} == {pk: counted[pk] for pk in posts}
    assert ({pk: _counter(post, "published_count") for pk, post in posts.items()}
            == {pk: published[pk] for pk in posts})


@pytest.fixture
def app(request: pytest.FixtureRequest) -> Iterator[Flask]:
    """An app on a fresh moto table; ``DUPLICATE_LIKE_STATUS`` from indirect parametrization (default 409).

    After the test, the stream handler is given the records it has not been given (as Lambda would deliver them),
    and then every stored counter must equal the number of stored children it counts.
    """
    with mock_aws():
        app = create_app({**TEST_CONFIG, "DUPLICATE_LIKE_STATUS": getattr(request, "param", 409)})
        models: LikeModels = app.extensions["likes_models"]
        models.post.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
        stream = StreamReader(models.post)
        yield app
        result = stream_handler(models)(stream.pending())
        assert result["batchItemFailures"] == [], result.error
        assert_counters_exact()


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    """Flask's test client for ``app``."""
    return app.test_client()


@pytest.fixture
def dynamodb_calls(app: Flask) -> List[str]:
    """The DynamoDB operations the app's models send from now on, by name (the library's transactions use a
    client of their own, so a like, an unlike or a comment's counted write does not show here)."""
    calls: List[str] = []
    models: LikeModels = app.extensions["likes_models"]

    def record(model: Any, **_: Any) -> None:
        calls.append(model.name)

    for model in (models.post, models.like, models.comment):
        model._get_connection().connection.client.meta.events.register("before-call.dynamodb", record)
    return calls


@pytest.fixture
def make_post(client: FlaskClient) -> Callable[[str], None]:
    """Create a post through the API."""

    def make(post_id: str) -> None:
        response = client.post(f"/posts/{post_id}")
        assert response.status_code == 201, response.json

    return make
