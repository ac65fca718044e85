"""Counted writes are sent the PynamoDB way: its send signals per attempt, its client settings (issue 11)."""
from __future__ import annotations

from typing import Any, Dict, Iterator, List

import pytest
from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model
from pynamodb.signals import post_dynamodb_send, pre_dynamodb_send

from pynamodb_counters import CounterMixin
from pynamodb_counters.write._send import transact_client
from tests.support.factories import post
from tests.support.models import Like, Post

pytestmark = pytest.mark.usefixtures("dynamodb")


@pytest.fixture
def sends() -> Iterator[List[Dict[str, Any]]]:
    seen: List[Dict[str, Any]] = []

    def pre(sender: Any, **kwargs: Any) -> None:
        seen.append(dict(kwargs, signal="pre", sender=sender))

    def post_(sender: Any, **kwargs: Any) -> None:
        seen.append(dict(kwargs, signal="post", sender=sender))

    with pre_dynamodb_send.connected_to(pre), post_dynamodb_send.connected_to(post_):
        yield seen


def test_each_counted_like_fires_pynamodbs_send_signals_once(sends: List[Dict[str, Any]]) -> None:
    post()
    sends.clear()
    Like(pk="POST#a91f", sk="LIKE#USER#1", liked_at=1).save()
    Like.get("POST#a91f", "LIKE#USER#1").delete()
    writes = [s for s in sends if s["operation_name"] == "TransactWriteItems"]
    assert [s["signal"] for s in writes] == ["pre", "post", "pre", "post"]
    assert writes[0]["req_uuid"] == writes[1]["req_uuid"] != writes[2]["req_uuid"]
    assert writes[0]["sender"] is Like._get_connection().connection  # the model's PynamoDB connection
    assert writes[0]["table_name"] is None  # as PynamoDB reports a TransactWriteItems
    assert Post.get("POST#a91f", "META").like_tally == 0


def test_a_refused_write_fires_pre_but_not_post_as_pynamodb_does(sends: List[Dict[str, Any]]) -> None:
    from pynamodb_counters.exceptions import ParentNotFoundError

    sends.clear()
    with pytest.raises(ParentNotFoundError):
        Like(pk="POST#none", sk="LIKE#USER#1", liked_at=1).save()
    assert [s["signal"] for s in sends if s["operation_name"] == "TransactWriteItems"] == ["pre"]


def test_the_client_carries_pynamodbs_settings_with_retries_off() -> None:
    class Tuned(CounterMixin, Model):
        class Meta:
            table_name = "Social"
            region = "us-east-1"
            connect_timeout_seconds = 3
            read_timeout_seconds = 7
            max_pool_connections = 33
            extra_headers = {"x-team": "likes"}

        pk = UnicodeAttribute(hash_key=True)

    client = transact_client(Tuned)
    pynamodb_client = Tuned._get_connection().connection.client
    config = client.meta.config
    # botocore reads parameter_validation into the serializer it picks (meta.config keeps its default)
    validating = [type(c._serializer).__name__ == "ParamValidationDecorator" for c in (client, pynamodb_client)]
    assert validating == [False, False]
    assert (config.connect_timeout, config.read_timeout, config.max_pool_connections) == (3, 7, 33)
    assert config.retries["total_max_attempts"] == 1
    assert client.meta.endpoint_url == pynamodb_client.meta.endpoint_url
    assert client.meta.region_name == pynamodb_client.meta.region_name
    seen: List[Dict[str, str]] = []

    def capture(request: Any, **_: Any) -> Any:
        seen.append(dict(request.headers))
        from botocore.awsrequest import AWSResponse

        raw = type("Raw", (), {"stream": lambda self, **_: iter([b"{}"])})()
        return AWSResponse(request.url, 200, {}, raw)  # answered here: nothing leaves the process

    client.meta.events.register("before-send.dynamodb.TransactWriteItems", capture)
    client.transact_write_items(TransactItems=[])
    assert seen and seen[0].get("x-team") == "likes"  # PynamoDB's before-send hook added Meta.extra_headers
