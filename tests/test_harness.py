"""Tests of the test harness: the serialised moto server (its memory stays bounded) and the fault proxy."""

from __future__ import annotations

import socket
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, Iterator, List, Optional

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, ConnectionClosedError, ReadTimeoutError

from pynamodb_counters.testing.server import ServedMoto
from tests.support import faults
from tests.support.factories import raw_client
from tests.support.faults import Fault, FaultProxy

TABLE = "harness"
PARENT = "parent"
_SESSION = boto3.session.Session()


def make_client(endpoint_url: str, region: str = "us-east-1", **config: Any) -> Any:
    """Return a DynamoDB client for ``endpoint_url`` with dummy credentials."""
    config.setdefault("retries", {"total_max_attempts": 1})
    return _SESSION.client(
        "dynamodb",
        endpoint_url=endpoint_url,
        region_name=region,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(**config),
    )


def create_table(client: Any) -> None:
    """Create the test table with a string hash key ``pk``."""
    client.create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )


def put_item(key: str) -> Dict[str, Any]:
    """A transaction item that creates ``key`` if it does not exist."""
    return {
        "Put": {
            "TableName": TABLE,
            "Item": {"pk": {"S": key}},
            "ConditionExpression": "attribute_not_exists(pk)",
        }
    }


def add_to_parent() -> Dict[str, Any]:
    """A transaction item that adds one to the parent's ``n``."""
    return {
        "Update": {
            "TableName": TABLE,
            "Key": {"pk": {"S": PARENT}},
            "UpdateExpression": "ADD n :one",
            "ExpressionAttributeValues": {":one": {"N": "1"}},
        }
    }


def keys(client: Any, table: str = TABLE) -> List[str]:
    """All hash keys in the test table (or ``table``), sorted."""
    pages = client.get_paginator("scan").paginate(TableName=table)
    return sorted(item["pk"]["S"] for page in pages for item in page["Items"])


pytestmark = pytest.mark.served

@pytest.fixture(scope="module")
def harness_server() -> Iterator[ServedMoto]:
    with ServedMoto() as server:
        yield server


@pytest.fixture
def server(harness_server: ServedMoto) -> Iterator[ServedMoto]:
    """The module's server, reset before and after each test."""
    harness_server.reset()
    yield harness_server
    harness_server.reset()


@pytest.fixture
def direct(server: ServedMoto) -> Any:
    """A client talking to the server directly, with the table created."""
    client = make_client(server.endpoint_url)
    create_table(client)
    return client


@pytest.fixture
def proxy(server: ServedMoto) -> Iterator[FaultProxy]:
    with FaultProxy(server.endpoint_url) as fault_proxy:
        yield fault_proxy


@pytest.fixture
def via_proxy(proxy: FaultProxy, direct: Any) -> Any:
    """A non-retrying client talking through the fault proxy."""
    return make_client(proxy.endpoint_url)


# ServedMoto


@pytest.mark.slow
def test_concurrent_transactions_are_atomic(server: ServedMoto, direct: Any) -> None:
    threads, per_thread = 8, 50
    direct.put_item(TableName=TABLE, Item={"pk": {"S": PARENT}, "n": {"N": "0"}})
    clients = [make_client(server.endpoint_url, retries={"mode": "standard"}) for _ in range(threads)]
    served_before = server.requests_served

    def work(thread: int) -> int:
        """Run this thread's transactions; return how many needed a retry."""
        retried = 0
        for i in range(per_thread):
            response = clients[thread].transact_write_items(
                TransactItems=[put_item(f"child-{thread}-{i}"), add_to_parent()]
            )
            retried += response["ResponseMetadata"]["RetryAttempts"] > 0
        return retried

    with ThreadPoolExecutor(threads) as pool:
        futures = [pool.submit(work, t) for t in range(threads)]
        retried = sum(future.result() for future in futures)

    parent = direct.get_item(TableName=TABLE, Key={"pk": {"S": PARENT}})["Item"]
    children = [key for key in keys(direct) if key.startswith("child-")]
    assert int(parent["n"]["N"]) == threads * per_thread
    assert len(children) == threads * per_thread
    # Unserialised, moto answers some of these with HTTP 500 (then retried).
    assert retried == 0
    assert server.requests_served - served_before >= threads * per_thread


def test_any_region_and_dummy_credentials(server: ServedMoto) -> None:
    for region in ("us-east-1", "eu-west-1", "ap-southeast-2"):
        client = make_client(server.endpoint_url, region=region)
        create_table(client)
        assert client.list_tables()["TableNames"] == [TABLE]


def test_reset_drops_everything(server: ServedMoto, direct: Any) -> None:
    direct.put_item(TableName=TABLE, Item={"pk": {"S": "x"}})
    assert direct.list_tables()["TableNames"] == [TABLE]
    server.reset()
    assert direct.list_tables()["TableNames"] == []


def test_a_cancelled_transaction_leaves_items_and_stream_as_they_were_with_item_backups() -> None:
    """With item backups, as with moto's copy of every table: a cancelled transaction leaves no item and no stream
    record of its actions."""
    with ServedMoto(item_backups=True) as engine:
        client = make_client(engine.endpoint_url)
        client.create_table(TableName="Streamed", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                            BillingMode="PAY_PER_REQUEST",
                            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"})
        client.put_item(TableName="Streamed", Item={"pk": {"S": "kept"}, "n": {"N": "1"}})
        with pytest.raises(ClientError, match="TransactionCanceled"):
            client.transact_write_items(TransactItems=[
                {"Put": {"TableName": "Streamed", "Item": {"pk": {"S": "new"}}}},
                {"Update": {"TableName": "Streamed", "Key": {"pk": {"S": "kept"}}, "UpdateExpression": "ADD n :one",
                            "ExpressionAttributeValues": {":one": {"N": "1"}}}},
                {"ConditionCheck": {"TableName": "Streamed", "Key": {"pk": {"S": "absent"}},
                                    "ConditionExpression": "attribute_exists(pk)"}}])
        assert keys(client, "Streamed") == ["kept"]
        assert client.get_item(TableName="Streamed", Key={"pk": {"S": "kept"}})["Item"]["n"] == {"N": "1"}
        streams = boto3.client("dynamodbstreams", region_name="us-east-1", endpoint_url=engine.endpoint_url,
                               aws_access_key_id="testing", aws_secret_access_key="testing")
        arn = client.describe_table(TableName="Streamed")["Table"]["LatestStreamArn"]
        shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard,
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        records = streams.get_records(ShardIterator=iterator)["Records"]
        assert [(r["eventName"], r["dynamodb"]["Keys"]["pk"]["S"]) for r in records] == [("INSERT", "kept")]


def test_start_on_port_in_use_leaves_moto_unpatched_with_item_backups() -> None:
    from moto.dynamodb.models import DynamoDBBackend

    stock = DynamoDBBackend.transact_write_items
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        engine = ServedMoto(port=taken.getsockname()[1], item_backups=True)
        with pytest.raises(RuntimeError, match="in use"):
            engine.start()
        engine.stop()
    assert DynamoDBBackend.transact_write_items is stock


def test_start_on_port_in_use_raises() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(RuntimeError, match=f"127.0.0.1:{port}.*in use"):
            ServedMoto(port).start()


def test_reset_requires_start() -> None:
    with pytest.raises(RuntimeError, match="not started"):
        ServedMoto().reset()


def tracked_instances() -> int:
    """How many objects moto holds for its dashboard, over every service."""
    from moto.core.model_instances import model_data

    return sum(len(getattr(cls, "instances_tracked", ())) for models in model_data.values()
               for cls in models.values())


@pytest.mark.slow
@pytest.mark.served
def test_the_served_engine_memory_stays_bounded(served: ServedMoto) -> None:
    from tests.support.models import Like, Post

    client = raw_client(served.endpoint_url)
    Post(pk="POST#big", sk="META").save()
    for start in range(0, 1000, 25):  # a thousand likes, loaded uncounted (BatchWriteItem) and counted by hand
        client.batch_write_item(RequestItems={"Social": [
            {"PutRequest": {"Item": {"pk": {"S": "POST#big"}, "sk": {"S": f"LIKE#USER#{n}"},
                                     "liked_at": {"N": "1"}}}} for n in range(start, start + 25)]})
    client.update_item(TableName="Social", Key={"pk": {"S": "POST#big"}, "sk": {"S": "META"}},
                       UpdateExpression="SET like_tally = :n", ExpressionAttributeValues={":n": {"N": "1000"}})
    for n in range(300):  # 300 TransactWriteItems, each deep-copying the 1,001-item table
        Like(pk="POST#big", sk=f"LIKE#USER#new{n}", liked_at=2).save()
    assert Post.get("POST#big", "META", consistent_read=True).like_tally == 1300
    assert client.scan(TableName="Social", Select="COUNT", ConsistentRead=True)["Count"] == 1301
    # without forgetting them, moto keeps every item of every transaction's table copy: over 300,000 objects
    assert tracked_instances() < 100


# FaultProxy


def test_proxy_forwards_transparently(proxy: FaultProxy, via_proxy: Any) -> None:
    for i in range(3):
        via_proxy.transact_write_items(TransactItems=[put_item(f"k{i}")])
    assert keys(via_proxy) == ["k0", "k1", "k2"]
    assert proxy.forwarded == 4
    assert proxy.injected == {}


def test_lose_response_commits_but_client_fails(proxy: FaultProxy, via_proxy: Any, direct: Any) -> None:
    proxy.inject(faults.LOSE_RESPONSE)
    with pytest.raises(ConnectionClosedError):
        via_proxy.transact_write_items(TransactItems=[put_item("lost")])
    assert keys(direct) == ["lost"]
    assert proxy.forwarded == 1
    assert proxy.injected == {"LOSE_RESPONSE": 1}


def test_reset_before_never_reaches_server(proxy: FaultProxy, via_proxy: Any, direct: Any) -> None:
    proxy.inject(faults.RESET_BEFORE)
    with pytest.raises(ConnectionClosedError) as raised:
        via_proxy.transact_write_items(TransactItems=[put_item("reset")])
    assert "reset" in repr(raised.value.__context__).lower()
    assert keys(direct) == []
    assert proxy.forwarded == 0
    assert proxy.injected == {"RESET_BEFORE": 1}


@pytest.mark.parametrize(
    "fault, code, status",
    [
        (faults.THROTTLE, "ThrottlingException", 400),
        (faults.SERVER_ERROR, "InternalServerError", 500),
        (faults.CONFLICT, "TransactionCanceledException", 400),
    ],
)
def test_answer_faults(
    proxy: FaultProxy,
    via_proxy: Any,
    direct: Any,
    fault: Fault,
    code: str,
    status: int,
) -> None:
    proxy.inject(fault)
    items = [put_item("a"), put_item("b"), put_item("c")]
    with pytest.raises(ClientError) as raised:
        via_proxy.transact_write_items(TransactItems=items)
    response = raised.value.response
    assert response["Error"]["Code"] == code
    assert response["ResponseMetadata"]["HTTPStatusCode"] == status
    assert keys(direct) == []
    assert proxy.forwarded == 0
    assert proxy.injected == {fault.name: 1}


def test_conflict_reasons_match_the_request(proxy: FaultProxy, via_proxy: Any) -> None:
    proxy.inject(faults.conflict(index=1))
    with pytest.raises(ClientError) as raised:
        via_proxy.transact_write_items(TransactItems=[put_item("a"), put_item("b"), add_to_parent()])
    reasons = raised.value.response["CancellationReasons"]
    assert [reason["Code"] for reason in reasons] == [
        "None",
        "TransactionConflict",
        "None",
    ]


def test_delay_beyond_read_timeout(proxy: FaultProxy, direct: Any) -> None:
    proxy.inject(faults.delay(30.0))
    client = make_client(proxy.endpoint_url, read_timeout=0.2)
    with pytest.raises(ReadTimeoutError):
        client.transact_write_items(TransactItems=[put_item("late")])
    assert proxy.wait_forwarded(1)
    assert keys(direct) == ["late"]
    assert proxy.injected == {"DELAY": 1}
    started = time.monotonic()
    proxy.stop()
    assert time.monotonic() - started < 2.0


def test_faults_only_hit_their_target(proxy: FaultProxy, via_proxy: Any) -> None:
    proxy.inject(faults.THROTTLE)
    via_proxy.put_item(TableName=TABLE, Item={"pk": {"S": "plain"}})
    with pytest.raises(ClientError):
        via_proxy.transact_write_items(TransactItems=[put_item("tx")])
    proxy.inject(faults.THROTTLE, times=2, target="")
    for _ in range(2):
        with pytest.raises(ClientError):
            via_proxy.put_item(TableName=TABLE, Item={"pk": {"S": "plain2"}})
    via_proxy.put_item(TableName=TABLE, Item={"pk": {"S": "plain3"}})
    assert keys(via_proxy) == ["plain", "plain3"]
    assert proxy.injected == {"THROTTLE": 3}


def test_clear_drops_queued_faults(proxy: FaultProxy, via_proxy: Any) -> None:
    proxy.inject(faults.THROTTLE, times=5)
    proxy.set_random_faults(1.0, [faults.SERVER_ERROR], seed=1)
    proxy.clear()
    via_proxy.transact_write_items(TransactItems=[put_item("ok")])
    assert proxy.injected == {}


def _random_run(upstream_url: str, run: str, seed: int) -> Dict[str, Any]:
    """Send 30 transactions through a proxy with random faults; record outcomes."""
    with FaultProxy(upstream_url) as fault_proxy:
        fault_proxy.set_random_faults(0.5, [faults.THROTTLE, faults.SERVER_ERROR, faults.CONFLICT], seed=seed)
        client = make_client(fault_proxy.endpoint_url)
        outcomes: List[Optional[str]] = []
        for i in range(30):
            try:
                client.transact_write_items(TransactItems=[put_item(f"{run}-{i}")])
            except ClientError as error:
                outcomes.append(error.response["Error"]["Code"])
            else:
                outcomes.append(None)
        return {"outcomes": outcomes, "injected": dict(fault_proxy.injected)}


def test_random_faults_are_deterministic(server: ServedMoto, direct: Any) -> None:
    first = _random_run(server.endpoint_url, "first", seed=42)
    second = _random_run(server.endpoint_url, "second", seed=42)
    assert first["outcomes"] == second["outcomes"]
    assert first["injected"] == second["injected"]

    codes = {
        "THROTTLE": "ThrottlingException",
        "SERVER_ERROR": "InternalServerError",
        "CONFLICT": "TransactionCanceledException",
    }
    outcomes = first["outcomes"]
    assert first["injected"] == {name: outcomes.count(code) for name, code in codes.items()}
    successes = outcomes.count(None)
    assert 0 < successes < len(outcomes)
    assert len([k for k in keys(direct) if k.startswith("first-")]) == successes
