"""Fixtures: moto's in-process DynamoDB with a fresh table per test, and a check that every counter stayed
exact. The tests run with pytest-django (``DJANGO_SETTINGS_MODULE = likes_site.test_settings``)."""
from __future__ import annotations

import os
from collections import Counter
from typing import Any, Callable, Dict, Iterator, List

import boto3
import pytest
from django.conf import settings
from django.core.cache import cache
from django.test import Client
from moto import mock_aws

from likes.dynamo import COMMENT, LIKE_PREFIX, META, get_models

# Dummy credentials, set before any client exists: nothing here may reach AWS.
os.environ["AWS_ACCESS_KEY_ID"] = "testing"
os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"
os.environ["AWS_SESSION_TOKEN"] = "testing"
os.environ["AWS_DEFAULT_REGION"] = "us-east-1"
os.environ.pop("AWS_PROFILE", None)


def table_items() -> List[Dict[str, Any]]:
    """Every item of the table, read raw (not through the app's models)."""
    client = boto3.client("dynamodb", region_name=settings.LIKES["REGION"])
    items: List[Dict[str, Any]] = client.scan(TableName=settings.LIKES["TABLE"], ConsistentRead=True)["Items"]
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
    client = boto3.client("dynamodb", region_name=settings.LIKES["REGION"])
    item = client.get_item(TableName=settings.LIKES["TABLE"], ConsistentRead=True,
                           Key={"pk": {"S": f"POST#{post_id}"}, "sk": {"S": META}}).get("Item")
    assert item is not None, f"post {post_id} is not stored"
    return {name: _counter(item, name) for name in ("like_tally", "comment_count", "published_count")}


def comment_item(comment_id: str) -> Dict[str, Any]:
    """The comment's stored item, raw."""
    [item] = [item for item in table_items() if item["pk"]["S"] == f"COMMENT#{comment_id}"]
    return item


def _counter(item: Dict[str, Any], name: str) -> int:
    return int(item[name]["N"]) if name in item else 0


def assert_counters_exact() -> None:
    """Every post's stored ``like_tally`` equals the number of its like items, its ``comment_count`` the number of
    its comments not soft-deleted, and its ``published_count`` the number of those published."""
    items = table_items()
    posts = {item["pk"]["S"]: item for item in items if item["sk"]["S"] == META}
    likes = Counter(item["pk"]["S"] for item in items if item["sk"]["S"].startswith(LIKE_PREFIX))
    comments = [item for item in items if item["sk"]["S"] == COMMENT and "deleted_at" not in item]
    counted = Counter(f"POST#{item['post_id']['S']}" for item in comments)
    published = Counter(f"POST#{item['post_id']['S']}" for item in comments if item["status"]["S"] == "published")
    assert set(likes) | set(counted) <= set(posts), "a like or a comment without its post"
    assert {pk: _counter(post, "like_tally") for pk, post in posts.items()} == {pk: likes[pk] for pk in posts}
    assert {pk: _counter(post, "comment_count") for pk, post in posts.items()} == {pk: counted[pk] for pk in posts}
    assert ({pk: _counter(post, "published_count") for pk, post in posts.items()}
            == {pk: published[pk] for pk in posts})


@pytest.fixture(autouse=True)
def dynamodb() -> Iterator[None]:
    """A fresh table on moto and an empty cache for each test; afterwards, every counter must be exact."""
    cache.clear()
    with mock_aws():
        get_models().post.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
        yield
        assert_counters_exact()


@pytest.fixture
def dynamodb_calls() -> Iterator[List[str]]:
    """The DynamoDB operations the app's models send from now on, by name (the library's transactions use a
    client of their own, so a like, an unlike or a comment's counted write does not show here)."""
    calls: List[str] = []

    def record(model: Any, **_: Any) -> None:
        calls.append(model.name)

    handlers = []
    for model in (get_models().post, get_models().like, get_models().comment):
        events = model._get_connection().connection.client.meta.events
        events.register("before-call.dynamodb", record)
        handlers.append(events)
    yield calls
    for events in handlers:
        events.unregister("before-call.dynamodb", record)


@pytest.fixture
def make_post(client: Client) -> Callable[[str], None]:
    """Create a post through the API."""

    def make(post_id: str) -> None:
        response = client.post(f"/posts/{post_id}")
        assert response.status_code == 201, response.json()

    return make
