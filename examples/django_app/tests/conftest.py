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

from likes.dynamo import LIKE_PREFIX, META, get_models

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


def assert_counters_exact() -> None:
    """Every post's stored ``like_tally`` equals the number of its like items."""
    items = table_items()
    likes = Counter(item["pk"]["S"] for item in items if item["sk"]["S"].startswith(LIKE_PREFIX))
    tallies = {item["pk"]["S"]: int(item["like_tally"]["N"]) for item in items if item["sk"]["S"] == META}
    assert set(likes) <= set(tallies), "a like item without its post"
    assert tallies == {pk: likes.get(pk, 0) for pk in tallies}


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
    client of their own, so a like or an unlike does not show here)."""
    calls: List[str] = []

    def record(model: Any, **_: Any) -> None:
        calls.append(model.name)

    handlers = []
    for model in (get_models().post, get_models().like):
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
