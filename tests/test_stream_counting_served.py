"""Counting from the stream under concurrency, on the served engine: 8 writer threads (half raw boto3, half
PynamoDB through the models) save, edit, move and delete pins while handlers count the table's real stream, each
batch split by partition key over two concurrent invocations (Lambda's ParallelizationFactor keeps order per key
only), delivered twice, records repeated, and an auditor repairs a counter drifted by hand while records wait for
the handlers. Afterwards every counter equals a recount of the pins (with no repair after the writers stopped), and
a replay of the whole stream changes nothing."""
from __future__ import annotations

import random
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Optional, Sequence, Tuple

import pytest

from pynamodb_counters import Drift, Repair, RetryPolicy, audit, repair
from pynamodb_counters.streams import StreamResult, count_stream
from pynamodb_counters.testing import lambda_event, stream_records
from pynamodb_counters.testing.server import ServedMoto
from tests.support.factories import raw_client
from tests.support.stream_models import STREAM_MODELS, Board, DailyPins, Folder, Pin

pytestmark = pytest.mark.served

FAST = RetryPolicy(max_attempts=10, base_delay=0.001, max_delay=0.01)
BOARDS = [f"BOARD#{n}" for n in range(4)]
STEPS = 320  # the writers' saves, edits and deletes, 40 a thread


@pytest.fixture
def counters_models() -> List[type]:
    return list(STREAM_MODELS)


def stored() -> Dict[str, Any]:
    """Every counter, as stored."""
    found: Dict[str, Any] = {}
    for pk in BOARDS:
        board = Board.get(pk, "META", consistent_read=True)
        found[pk] = (board.pin_count, board.stars, board.published, Board.views.total((pk, "META"),
                                                                                      consistent_read=True))
        for folder in Folder.query(pk, Folder.sk.startswith("FOLDER#"), consistent_read=True):
            if folder.pin_count:
                found[f"{pk}/{folder.sk}"] = folder.pin_count
        for day in DailyPins.query(pk, DailyPins.sk.startswith("DAY#"), consistent_read=True):
            if day.pins:
                found[f"{pk}/{day.sk}"] = day.pins
    return found


def recount() -> Dict[str, Any]:
    """The same, recounted from the stored pins."""
    found: Dict[str, Any] = {}
    for pk in BOARDS:
        pins = list(Pin.query(pk, Pin.sk.startswith("PIN#"), consistent_read=True))
        found[pk] = (len(pins), sum(int(pin.rating) for pin in pins),
                     sum(pin.status == "published" for pin in pins), len(pins))
        for pin in pins:
            for where in (f"{pk}/FOLDER#{pin.folder}", f"{pk}/DAY#{pin.day}"):
                found[where] = found.get(where, 0) + 1
    return found


def deliver(records: Sequence[Dict[str, Any]], host: str, rng: random.Random) -> List[StreamResult]:
    """One batch as Lambda may deliver it: split by partition key over two concurrent invocations, each part
    delivered twice, some records repeated."""
    event = lambda_event(records, Board)["Records"]
    parts: List[List[Dict[str, Any]]] = [[], []]
    for record in event:
        parts[zlib.crc32(record["dynamodb"]["Keys"]["pk"]["S"].encode()) % 2].append(record)
    results: List[StreamResult] = []

    def invoke(part: List[Dict[str, Any]]) -> None:
        repeated = part + part[: rng.randrange(0, len(part) + 1)]
        for _ in range(2):
            results.append(count_stream({"Records": repeated}, models=[Pin], retry=FAST))

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(invoke, [part for part in parts if part]))
    return results


@pytest.mark.slow
def test_eight_writers_half_raw_boto3_counted_from_the_stream_by_parallel_handlers_stay_exact(
        served: ServedMoto) -> None:
    host = served.endpoint_url
    for pk in BOARDS:
        Board(pk=pk, sk="META").save()
        for name in ("inbox", "art"):
            Folder(pk=pk, sk=f"FOLDER#{name}").save()
    rng = random.Random(30)
    plan = [(n % 8, rng.choice(["save", "save", "edit", "delete"]), rng.choice(BOARDS), f"PIN#u{rng.randrange(24)}",
             rng.randrange(4), rng.choice(["inbox", "art"]), rng.choice(["d1", "d2"])) for n in range(STEPS)]
    unexpected: List[str] = []
    lock = threading.Lock()
    client = raw_client(host)

    def act(step: Tuple[int, str, str, str, int, str, str]) -> None:
        writer, op, pk, sk, rating, folder, day = step
        try:
            if writer < 4:  # raw boto3
                if op == "delete":
                    client.delete_item(TableName="Boards", Key={"pk": {"S": pk}, "sk": {"S": sk}})
                elif op == "edit":  # of a pin that exists: moto 5 records an UpdateItem that creates its item
                    # as two INSERTs (DynamoDB records one), which any stream consumer would count twice
                    try:
                        client.update_item(TableName="Boards", Key={"pk": {"S": pk}, "sk": {"S": sk}},
                                           UpdateExpression="SET folder = :f, rating = :r, #s = :s",
                                           ConditionExpression="attribute_exists(pk)",
                                           ExpressionAttributeNames={"#s": "status"},
                                           ExpressionAttributeValues={":f": {"S": folder},
                                                                      ":r": {"N": str(rating)},
                                                                      ":s": {"S": "published"}})
                    except client.exceptions.ConditionalCheckFailedException:
                        pass  # no such pin: nothing written
                else:
                    client.put_item(TableName="Boards", Item={"pk": {"S": pk}, "sk": {"S": sk},
                                                              "folder": {"S": folder}, "day": {"S": day},
                                                              "rating": {"N": str(rating)}, "status": {"S": "draft"}})
            elif op == "delete":
                Pin(pk=pk, sk=sk).delete()
            elif op == "edit":
                pin = Pin(pk=pk, sk=sk, folder=folder, day=day, rating=rating, status="published")
                pin.save()
            else:
                Pin(pk=pk, sk=sk, folder=folder, day=day, rating=rating).save()
        except Exception as error:  # noqa: BLE001 - collected, asserted empty
            with lock:
                unexpected.append(repr(error))

    handled: List[StreamResult] = []
    writing = threading.Event()
    writing.set()

    def handler() -> None:
        after: Optional[str] = None
        batches = random.Random(31)
        while True:
            still = writing.is_set()
            records = stream_records(Board, after=after)
            if records:
                after = records[-1]["dynamodb"]["SequenceNumber"]
                handled.extend(deliver(records, host, batches))
            elif not still:
                return

    drifts: List[Drift] = []
    repairs: List[Repair] = []

    def auditor() -> None:
        """Drift board 0's pin count by hand (a raw ADD of 5), then audit every board and repair what is found,
        while pins are written and wait for the handlers, until the drift is repaired."""
        client.update_item(TableName="Boards", Key={"pk": {"S": BOARDS[0]}, "sk": {"S": "META"}},
                           UpdateExpression="ADD pin_count :n", ExpressionAttributeValues={":n": {"N": "5"}})
        for _ in range(200):
            found = audit(Board.pin_count, parents=[(pk, "META") for pk in BOARDS]).drifts
            drifts.extend(found)
            repairs.extend(repair(found).repairs)
            if any(done.status == "repaired" for done in repairs):
                return

    with ThreadPoolExecutor(10) as pool:
        done = pool.submit(handler)
        audited = pool.submit(auditor)
        list(pool.map(act, plan))
        audited.result()
        writing.clear()
        done.result()

    # the only drift ever found is the one made by hand, by exactly its size, and it was repaired once
    assert drifts and {(drift.key, drift.stored - drift.actual) for drift in drifts} == {((BOARDS[0], "META"), 5)}
    assert [(r.drift.key, r.before - r.after) for r in repairs if r.status == "repaired"] == [((BOARDS[0], "META"),
                                                                                                5)]

    assert unexpected == []
    assert all(result == {"batchItemFailures": []} for result in handled), [r.error for r in handled if r.error]
    exact = stored()
    assert exact == recount()
    replay = count_stream(lambda_event(stream_records(Board), Board), models=[Pin], retry=FAST)
    assert replay == {"batchItemFailures": []} and replay.counted == () and replay.updates > 0
    assert stored() == exact
