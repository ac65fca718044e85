"""Audits and repairs of counters fed from the stream, whatever waits in the stream: hypothesis draws pins written
(by PynamoDB and raw boto3: saves, edits, deletes), how much of the stream the handler has counted, a drift made by
hand on each board, and pins written between the audit and the repair. The audit finds exactly the drift made by
hand, by its size; after the repair and the handler's run over the whole stream every counter equals a recount, and
a replay changes nothing."""
from __future__ import annotations

from typing import Dict, List, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pynamodb_counters import audit, repair
from pynamodb_counters.streams import count_stream
from pynamodb_counters.testing import Backend
from tests.support.factories import raw_client
from tests.support.stream_models import STREAM_MODELS, Board, Folder, Pin
from tests.support.stream_records import lambda_event, read_stream
from tests.support.stream_state import exact

pytestmark = pytest.mark.slow

BOARDS = ("BOARD#a", "BOARD#b")
KEYS = [(pk, "META") for pk in BOARDS]

#: one write: its board, its pin, what it does, by whom, the pin's rating and status
writes = st.tuples(st.sampled_from(BOARDS), st.sampled_from([f"PIN#u{n}" for n in range(5)]),
                   st.sampled_from(["save", "save", "delete"]), st.booleans(), st.integers(0, 3),
                   st.sampled_from(["draft", "published"]))
Write = Tuple[str, str, str, bool, int, str]


def write(steps: List[Write]) -> None:
    client = raw_client(None)
    for pk, sk, op, raw, rating, status in steps:
        if op == "delete" and raw:
            client.delete_item(TableName="Boards", Key={"pk": {"S": pk}, "sk": {"S": sk}})
        elif op == "delete":
            Pin(pk=pk, sk=sk).delete()
        elif raw:
            client.put_item(TableName="Boards", Item={"pk": {"S": pk}, "sk": {"S": sk}, "rating": {"N": str(rating)},
                                                      "status": {"S": status}})
        else:
            Pin(pk=pk, sk=sk, rating=rating, status=status).save()


def handle(records: List[dict]) -> None:
    """The handler on ``records``, in batches of 7, until every batch is applied."""
    for start in range(0, len(records), 7):
        result = count_stream(lambda_event(records[start:start + 7], "Boards"), models=[Pin])
        assert result == {"batchItemFailures": []}, result.error


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(before=st.lists(writes, max_size=12), counted=st.floats(0, 1),
       drift=st.tuples(st.integers(-2, 3), st.integers(-2, 3)), meanwhile=st.lists(writes, max_size=5))
def test_an_audit_finds_exactly_the_drift_made_by_hand_and_its_repair_leaves_every_counter_exact(
        before: List[Write], counted: float, drift: Tuple[int, int], meanwhile: List[Write]) -> None:
    with Backend("moto", STREAM_MODELS):
        for pk in BOARDS:
            Board(pk=pk, sk="META").save()
            for name in ("inbox", "art"):
                Folder(pk=pk, sk=f"FOLDER#{name}").save()
        write(before)
        records = read_stream("Boards")
        handle(records[:int(counted * len(records))])  # the rest waits
        made: Dict[Tuple[str, str], int] = {}
        for key, by in zip(KEYS, drift):
            if by:
                raw_client(None).update_item(TableName="Boards", Key={"pk": {"S": key[0]}, "sk": {"S": "META"}},
                                             UpdateExpression="ADD pin_count :n, stars :n",
                                             ExpressionAttributeValues={":n": {"N": str(by)}})
                made[key] = by
        found = {}
        for counter in (Board.pin_count, Board.stars, Board.published):
            report = audit(counter, parents=KEYS)
            assert report.unverifiable == ()
            found[counter.attr_name] = {d.key: d.stored - d.actual for d in report.drifts}
        assert found == {"pin_count": made, "stars": made, "published": {}}
        write(meanwhile)  # more pins wait, written after the audit
        drifts = audit(Board.pin_count, parents=KEYS).drifts + audit(Board.stars, parents=KEYS).drifts
        assert all(r.status == "repaired" for r in repair(drifts).repairs)
        handle(read_stream("Boards"))  # the whole stream, from its start
        exact(*BOARDS)
        handle(read_stream("Boards"))  # and a replay
        exact(*BOARDS)
