"""A table's DynamoDB stream as the suite reads it: moto's real records (``GetRecords``, from TRIM_HORIZON), the
deletions made around the library marked as DynamoDB's TTL marks its own (moto never expires an item), and the
event a Lambda on the stream receives."""
from __future__ import annotations

import base64
import datetime
import json
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

import boto3

from pynamodb_counters.streams import SERVICE
from tests.support.factories import raw_client
from tests.support.models import REGION

RawKey = Tuple[Tuple[str, Any], ...]


def stream_arn(table: str, host: Optional[str]) -> str:
    arn: str = raw_client(host).describe_table(TableName=table)["Table"]["LatestStreamArn"]
    return arn


def read_stream(table: str, host: Optional[str] = None, after: Optional[str] = None) -> List[Dict[str, Any]]:
    """Every record of ``table``'s stream, in order, as ``GetRecords`` returns them (from TRIM_HORIZON, or after
    the sequence number ``after``)."""
    streams = boto3.client("dynamodbstreams", region_name=REGION, endpoint_url=host)
    arn = stream_arn(table, host)
    records: List[Dict[str, Any]] = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        start: Dict[str, Any] = {"ShardIteratorType": "TRIM_HORIZON"} if after is None else \
            {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": after}
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"], **start)["ShardIterator"]
        while iterator:
            page = streams.get_records(ShardIterator=iterator, Limit=1000)
            records.extend(page["Records"])
            if not page["Records"]:
                break
            iterator = page.get("NextShardIterator")
    return records


def key_of_image(image: Mapping[str, Any]) -> RawKey:
    return tuple(sorted((name, json.dumps(value, sort_keys=True, default=str)) for name, value in image.items()))


def expire(table: str, keys: Iterable[Dict[str, Any]], host: Optional[str] = None) -> Set[RawKey]:
    """Delete the items ``keys`` (raw) of ``table`` around the library, as DynamoDB's TTL deletes them; returns the
    keys, to mark their records (:func:`ttl_marked`)."""
    client = raw_client(host)
    done = set()
    for key in keys:
        client.delete_item(TableName=table, Key=key)
        done.add(key_of_image(key))
    return done


def ttl_marked(records: Sequence[Dict[str, Any]], expired: Set[RawKey]) -> List[Dict[str, Any]]:
    """``records`` with each REMOVE of a key in ``expired`` marked as a deletion by DynamoDB's TTL (the service's
    ``userIdentity``, as AWS's record format documents)."""
    marked = []
    for record in records:
        record = dict(record)
        if record["eventName"] == "REMOVE" and key_of_image(record["dynamodb"]["Keys"]) in expired:
            record["userIdentity"] = dict(SERVICE)
        marked.append(record)
    return marked


def lambda_event(records: Sequence[Dict[str, Any]], table: str, host: Optional[str] = None) -> Dict[str, Any]:
    """The event a Lambda on ``table``'s stream receives with ``records``: JSON (binaries in base64, times in
    seconds), each record naming its source."""
    arn = stream_arn(table, host)

    def plain(value: Any) -> Any:
        if isinstance(value, (bytes, bytearray)):
            return base64.b64encode(value).decode("ascii")
        if isinstance(value, datetime.datetime):
            return value.timestamp()
        raise TypeError(value)

    return {"Records": [{**json.loads(json.dumps(record, default=plain)), "eventSourceARN": arn}
                        for record in records]}
