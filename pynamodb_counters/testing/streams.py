"""
A table's stream as a Lambda function on it receives it, for tests of the stream handlers
(:func:`~pynamodb_counters.streams.count_stream`, :func:`~pynamodb_counters.streams.count_expiries`) on moto,
in-process or served, or on whatever DynamoDB the models point at::

    from pynamodb_counters.streams import count_stream
    from pynamodb_counters.testing import StreamReader

    stream = StreamReader(Like)                # Lambda's checkpoint: the stream's start
    Like(pk="POST#1", sk="LIKE#ann").save()
    result = count_stream(stream.pending(), models=[Like])   # the records since the last call, as a Lambda event

The records are read through the model's own connection settings (its region, credentials and ``Meta.host``), from
the table's latest stream, every shard from its start; nothing is written.
"""
from __future__ import annotations

import base64
import datetime
import json
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ..exceptions import ConfigurationError
from ..reconcile._stream_proof import streams_client
from ..streams._records import padded

__all__ = ["StreamReader", "lambda_event", "stream_records"]


def stream_records(model: type, *, after: Optional[str] = None) -> List[Dict[str, Any]]:
    """Every record of the latest stream of ``model``'s table, in order, as ``GetRecords`` returns them (times as
    ``datetime``, binary values as ``bytes``): each shard read from its start, parents before their children,
    keeping only the records after the sequence number ``after`` where it is given.

    :raises ConfigurationError: the table has no stream.
    """
    client, arn = streams_client(model), _stream_arn(model)
    since = None if after is None else padded(after)
    records: List[Dict[str, Any]] = []
    start: Dict[str, str] = {}
    while True:
        described = client.describe_stream(StreamArn=arn, **start)["StreamDescription"]
        for shard in described.get("Shards", []):
            ended = "EndingSequenceNumber" in shard.get("SequenceNumberRange", {})
            iterator = client.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                                 ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
            while iterator:
                page = client.get_records(ShardIterator=iterator, Limit=1000)
                records.extend(record for record in page.get("Records", [])
                               if since is None or padded(record["dynamodb"]["SequenceNumber"]) > since)
                if not page.get("Records") and not ended:
                    break  # an open shard's current end
                iterator = page.get("NextShardIterator")
        last = described.get("LastEvaluatedShardId")
        if not last:
            return records
        start = {"ExclusiveStartShardId": last}


def lambda_event(records: Sequence[Mapping[str, Any]], model: type) -> Dict[str, Any]:
    """The event a Lambda function on the stream of ``model``'s table receives with ``records`` (as ``GetRecords``
    returns them): ``{"Records": [...]}``, each record as JSON (binary values in base64, times in seconds since the
    epoch), naming its source (``eventSourceARN``, the stream's ARN)."""
    arn = _stream_arn(model)
    return {"Records": [{**json.loads(json.dumps(record, default=_plain)), "eventSourceARN": arn}
                        for record in records]}


class StreamReader:
    """The stream of ``model``'s table, read as a Lambda function's event source mapping reads it: each
    :meth:`pending` gives the records written since the previous one (the first, from the stream's start) as a
    Lambda event, and moves the checkpoint past them.

    :ivar checkpoint: the sequence number of the last record given, ``None`` before any.
    :raises ConfigurationError: (from :meth:`pending`) the table has no stream.
    """

    def __init__(self, model: type) -> None:
        self.model = model
        self.checkpoint: Optional[str] = None

    def pending(self) -> Dict[str, Any]:
        """The records written since the last call, as the Lambda event of a batch (``{"Records": []}`` when
        there are none)."""
        records = stream_records(self.model, after=self.checkpoint)
        if records:
            self.checkpoint = str(records[-1]["dynamodb"]["SequenceNumber"])
        return lambda_event(records, self.model)


def _stream_arn(model: type) -> str:
    """The ARN of the latest stream of ``model``'s table.

    :raises ConfigurationError: it has none.
    """
    described = model._get_connection().describe_table()  # type: ignore[attr-defined]
    arn = described.get("LatestStreamArn")
    if not arn:
        table = model.Meta.table_name  # type: ignore[attr-defined]
        raise ConfigurationError(f"{table} has no stream: create the table with Meta.stream_view_type = "
                                 f"STREAM_NEW_AND_OLD_IMAGE (create_table() reads it), or enable it with aws dynamodb "
                                 f"update-table --table-name {table} --stream-specification "
                                 f"StreamEnabled=true,StreamViewType=NEW_AND_OLD_IMAGES")
    return str(arn)


def _plain(value: Any) -> Any:
    """A value of a ``GetRecords`` record as Lambda's JSON holds it."""
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, datetime.datetime):
        return value.timestamp()
    raise TypeError(f"{type(value).__name__} is not a value of a stream record")
