"""A table's previous stream, still readable: what DynamoDB keeps for 24 hours after a stream is disabled (changing
a table's stream view type disables the stream and enables a new one, with a new ARN), and what its event source
mapping still delivers. moto keeps one stream per table: :func:`restart_stream` starts a new one there (the old
one's records go), and :func:`previous_stream` serves the old one's records, under the old ARN, to a DynamoDB
Streams client, at the client's transport (botocore's ``before-call`` and ``after-call`` events)."""
from __future__ import annotations

import contextlib
import json
from typing import Any, Dict, Iterator, List, Optional, Sequence

from botocore.awsrequest import AWSResponse

from tests.support.factories import raw_client
from tests.support.models import REGION

ACCOUNT = "123456789012"  # moto's default account
SHARD = "shardId-00000001-previous-stream"


def restart_stream(table: str) -> str:
    """Disable ``table``'s stream and enable a new one, as ``aws dynamodb update-table`` does to change its view
    type; returns the new stream's ARN. moto refuses a second stream of a table while it remembers the first's
    label (it is forgotten first), and numbers every stream's records from the same number: the new stream's
    continue after the old one's, as DynamoDB's sequence numbers grow with time."""
    import moto.dynamodb.models as moto_models

    client = raw_client(None)
    moto_table = moto_models.dynamodb_backends[ACCOUNT][REGION].tables[table]
    old = moto_table.stream_shard
    client.update_table(TableName=table, StreamSpecification={"StreamEnabled": False})
    moto_table.latest_stream_label = None
    client.update_table(TableName=table, StreamSpecification={"StreamEnabled": True,
                                                              "StreamViewType": "NEW_AND_OLD_IMAGES"})
    moto_table.stream_shard.starting_sequence_number = old.starting_sequence_number + len(old.items) + 1000
    arn: str = client.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    return arn


@contextlib.contextmanager
def previous_stream(client: Any, table: str, arn: str, records: Sequence[Dict[str, Any]]) -> Iterator[List[str]]:
    """``client`` (a DynamoDB Streams client) reads a disabled stream of ``table`` at ``arn`` besides the table's
    own: ``ListStreams`` of the table names it too, and its one shard, ended, holds ``records`` (as GetRecords
    returns them). Yields the operations answered for it."""
    answered: List[str] = []

    def before(model: Any, params: Dict[str, Any], **_: Any) -> Optional[Any]:
        body = json.loads(params.get("body") or b"{}")
        if model.name == "DescribeStream" and body.get("StreamArn") == arn:
            found: Dict[str, Any] = {"StreamDescription": {
                "StreamArn": arn, "StreamStatus": "DISABLED", "TableName": table,
                "StreamViewType": "NEW_AND_OLD_IMAGES",
                "Shards": [{"ShardId": SHARD, "SequenceNumberRange": {
                    "StartingSequenceNumber": records[0]["dynamodb"]["SequenceNumber"] if records else "0",
                    "EndingSequenceNumber": records[-1]["dynamodb"]["SequenceNumber"] if records else "0"}}]}}
        elif model.name == "GetShardIterator" and body.get("StreamArn") == arn:
            found = {"ShardIterator": "previous:0"}
        elif model.name == "GetRecords" and str(body.get("ShardIterator", "")).startswith("previous:"):
            start = int(body["ShardIterator"].split(":", 1)[1])
            page = list(records[start:start + int(body.get("Limit", 1000))])
            found = {"Records": page}
            if start + len(page) < len(records):
                found["NextShardIterator"] = f"previous:{start + len(page)}"
        else:
            return None
        answered.append(model.name)
        return AWSResponse("https://streams.previous", 200, {}, None), found

    def after(model: Any, parsed: Dict[str, Any], **_: Any) -> None:
        if model.name == "ListStreams":
            parsed.setdefault("Streams", []).insert(0, {"StreamArn": arn, "TableName": table,
                                                        "StreamLabel": arn.rsplit("/", 1)[-1]})
            answered.append("ListStreams")

    events = client.meta.events
    events.register("before-call", before)
    events.register("after-call", after)
    try:
        yield answered
    finally:
        events.unregister("before-call", before)
        events.unregister("after-call", after)
