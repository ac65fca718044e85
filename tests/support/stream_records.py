"""Deletions by TTL, as the suite makes them on moto (which never expires an item): items deleted around the
library (:func:`expire`), and their stream records marked as DynamoDB's TTL marks its own (:func:`ttl_marked`). The
records themselves, and the event a Lambda on the stream receives, come from the shipped
:mod:`pynamodb_counters.testing` (``stream_records``, ``lambda_event``, ``StreamReader``)."""
from __future__ import annotations

import json
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from pynamodb_counters.streams import SERVICE
from tests.support.factories import raw_client

RawKey = Tuple[Tuple[str, Any], ...]


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
