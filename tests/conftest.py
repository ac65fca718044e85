"""Engines for the suite: moto in-process (``dynamodb``) and the served, serialised moto engine (``served``)."""
from __future__ import annotations

import functools
import os
from typing import Any, Iterator, Tuple

import pytest

# Dummy credentials before anything creates a botocore client: no test may reach AWS.
os.environ["AWS_ACCESS_KEY_ID"] = "testing"
os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"
os.environ["AWS_DEFAULT_REGION"] = "us-east-1"
os.environ.pop("AWS_PROFILE", None)

from moto import mock_aws  # noqa: E402

from pynamodb_counters.testing.server import ServedMoto  # noqa: E402
from tests.faults import FaultProxy  # noqa: E402
from tests.models import ALL_MODELS, TABLE_MODELS  # noqa: E402


def point_models_at(host: str | None) -> None:
    """Send every test model to ``host`` (``None``: the default endpoint, which moto intercepts in-process)."""
    for model in ALL_MODELS:
        if _pointed.get(model, "") != host:  # per model: subclasses (View of VideoItem) share their base's Meta
            model.Meta.host = host
            model._connection = None  # PynamoDB caches one connection (and botocore client) per model
            _pointed[model] = host


_pointed: dict[type, str | None] = {}  # the host each model's cached connection was made for


def create_tables() -> None:
    for model in TABLE_MODELS:
        model.create_table(billing_mode="PAY_PER_REQUEST")


@pytest.fixture
def dynamodb() -> Iterator[None]:
    """moto in-process, fresh for each test, with every test table created."""
    point_models_at(None)
    with mock_aws():
        create_tables()
        yield


@pytest.fixture(scope="session")
def served_engine() -> Iterator[ServedMoto]:
    """One moto server on 127.0.0.1 for the session, serving one request at a time. Fails, never skips, when
    it cannot start."""
    with ServedMoto() as engine:
        yield engine


@pytest.fixture
def served(served_engine: ServedMoto) -> Iterator[ServedMoto]:
    """The served engine, reset, with every test table created and every model pointed at it."""
    served_engine.reset()
    point_models_at(served_engine.endpoint_url)
    create_tables()
    try:
        yield served_engine
    finally:
        point_models_at(None)
        served_engine.reset()


@pytest.fixture
def proxy(served: ServedMoto) -> Iterator[FaultProxy]:
    """A fault proxy in front of the served engine, with every model pointed at the proxy."""
    with FaultProxy(served.endpoint_url) as fault_proxy:
        point_models_at(fault_proxy.endpoint_url)
        try:
            yield fault_proxy
        finally:
            point_models_at(served.endpoint_url)


def post(pk: str = "POST#a91f", **attributes: object) -> Tuple[str, str]:
    """Create a post and return its key."""
    from tests.models import Post

    Post(pk=pk, sk="META", **attributes).save()
    return (pk, "META")


def stored(table: str) -> list[dict]:
    """Every item of ``table`` as DynamoDB holds it (raw, typed values), read with a consistent scan."""
    from tests.models import Post

    client = _raw_client(Post.Meta.host)
    return [item for page in client.get_paginator("scan").paginate(TableName=table, ConsistentRead=True)
            for item in page["Items"]]


@functools.cache
def _raw_client(host: str | None) -> Any:
    import boto3

    return boto3.client("dynamodb", region_name="us-east-1", endpoint_url=host)


def snapshot() -> dict[str, list[dict]]:
    """Every test table's items, to show that a refused write left everything as it was."""
    return {model.Meta.table_name: sorted(stored(model.Meta.table_name), key=repr) for model in TABLE_MODELS}
