"""Exactly once, whatever Lambda does with the stream: hypothesis draws the writers (pins saved through PynamoDB,
put, updated and deleted by raw boto3, written by BatchWriteItem, edited (rating and status: ``amount=`` and
``when=``), moved between folders and days, deleted and created again; notes, counted in their transaction and from
the stream) on two or three boards, then how ``count_stream`` receives moto's records of them: split by partition
key into concurrent sub-streams (Lambda's ParallelizationFactor: order kept per key only) whose batches interleave,
batches of any size starting before the checkpoint, delivered twice, with records repeated, a failed update of one
parent answered with ``batchItemFailures`` and redelivered from the record named, a handler that dies after some of
its updates landed (the batch then delivered again whole, or bisected), and the records of a shard followed by those
of its child shard (sequence numbers continuing with more digits). After the whole stream, every counter (the
board's, its folders', its daily rollups' and its sharded ``views``) equals a recount of the children, no update
was floored nor missed its parent, and a replay of the whole stream changes no item of the table (neither a counter
nor a mark). Each example starts from an empty table, created again on the test's moto."""
from __future__ import annotations

import copy
import json
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from pynamodb_counters.exceptions import RetriesExhaustedError
from pynamodb_counters.streams import StreamResult, count_stream
from pynamodb_counters.testing import lambda_event, stream_records
from tests.support.client_hooks import hooked
from tests.support.deliveries import FAST, Died, Plan, delivery_plans
from tests.support.factories import raw_client
from tests.support.factories import stored as table_items
from tests.support.stream_models import STREAM_MODELS, Board, DailyPins, Folder, Note, Pin
from tests.support.stream_state import recount, stored

pytestmark = pytest.mark.usefixtures("dynamodb")

BOARDS = ("BOARD#b1", "BOARD#b2", "BOARD#b3")
FOLDERS = ("inbox", "art")
DAYS = ("d1", "d2", "d3")
STATUSES = ("draft", "published")
PARENTS = (Board, Folder, DailyPins)

Write = Tuple[str, int, int, str, str, str, int]
#: one write: what, on which board (modulo the boards drawn), which user's pin (or note), its folder, day, status
#: and rating (a note's words are 5 times the rating)
writes = st.tuples(st.sampled_from(("save", "save", "put", "update", "edit", "move", "batch", "delete",
                                    "raw_delete", "note")),
                   st.integers(0, 2), st.integers(0, 3), st.sampled_from(FOLDERS), st.sampled_from(DAYS),
                   st.sampled_from(STATUSES), st.integers(0, 3))


@pytest.fixture
def counters_models() -> List[type]:
    return list(STREAM_MODELS)


# -- the tables, the writers and the counters --------------------------------------------------------------------
def fresh_table(boards: Sequence[str]) -> None:
    """The Boards table created again (an empty table, and a new stream), and the boards with their folders."""
    Board.delete_table()
    Board.create_table(billing_mode="PAY_PER_REQUEST")
    for pk in boards:
        Board(pk=pk, sk="META").save()
        for name in FOLDERS:
            Folder(pk=pk, sk=f"FOLDER#{name}").save()


def write(step: Write, boards: Sequence[str]) -> None:
    """One writer's write, as it would make it: through PynamoDB, or raw boto3 behind the library's back."""
    kind, board, user, folder, day, status, rating = step
    pk, sk = boards[board % len(boards)], f"PIN#u{user}"
    client = raw_client(None)
    key = {"pk": {"S": pk}, "sk": {"S": sk}}
    if kind == "save":  # a new pin, or one saved over (re-created, moved, rated...)
        Pin(pk=pk, sk=sk, folder=folder, day=day, status=status, rating=rating).save()
    elif kind == "put":
        client.put_item(TableName="Boards", Item={**key, "folder": {"S": folder}, "day": {"S": day},
                                                   "status": {"S": status}, "rating": {"N": str(rating)}})
    elif kind == "update":  # of a pin that exists: moto 5 records an UpdateItem that creates its item as two
        # INSERTs (DynamoDB records one), which any stream consumer would count twice
        try:
            client.update_item(TableName="Boards", Key=key, UpdateExpression="SET folder = :f, rating = :r, #s = :s",
                               ConditionExpression="attribute_exists(pk)", ExpressionAttributeNames={"#s": "status"},
                               ExpressionAttributeValues={":f": {"S": folder}, ":r": {"N": str(rating)},
                                                          ":s": {"S": status}})
        except client.exceptions.ConditionalCheckFailedException:
            pass  # no such pin: nothing written
    elif kind in ("edit", "move"):
        try:
            pin = Pin.get(pk, sk, consistent_read=True)
        except Pin.DoesNotExist:
            return
        if kind == "edit":  # PynamoDB's UpdateItem: rated, published or unpublished
            pin.update(actions=[Pin.rating.set(rating), Pin.status.set(status)], condition=Pin.pk.exists())
        else:  # to another folder (perhaps the same), and another day
            pin.folder, pin.day = folder, day
            pin.save()
    elif kind == "batch":  # BatchWriteItem: this pin saved, the next user's deleted
        with Pin.batch_write() as batch:
            batch.save(Pin(pk=pk, sk=sk, folder=folder, day=day, status=status, rating=rating))
            batch.delete(Pin(pk=pk, sk=f"PIN#u{(user + 1) % 4}"))
    elif kind == "delete":
        Pin(pk=pk, sk=sk).delete()
    elif kind == "raw_delete":
        client.delete_item(TableName="Boards", Key=key)
    else:  # a note (user 0 and 1 share note 0, 2 and 3 note 1): saved, else edited (its words) or deleted
        note_sk = f"NOTE#{user // 2}"
        try:
            note = Note.get(pk, note_sk, consistent_read=True)
        except Note.DoesNotExist:
            Note(pk=pk, sk=note_sk, words=5 * rating).save()
            return
        if status == "published":
            note.delete()
        else:
            note.words = 5 * rating
            note.save()


def items() -> List[Dict[str, Any]]:
    """Every item of the table, as DynamoDB holds it."""
    return sorted(table_items("Boards"), key=repr)


# -- the records, as Lambda's shards and sub-streams hold them ------------------------------------------------------
def child_shard(records: List[Dict[str, Any]], split: int, digits: int) -> List[Dict[str, Any]]:
    """``records`` as a shard (up to ``split``) and its child shard (the rest): the child's records get sequence
    numbers that continue the parent's, ``digits`` digits longer (DynamoDB's vary in length, 21 to 40)."""
    longest = max(len(record["dynamodb"]["SequenceNumber"]) for record in records)
    start = 10 ** (longest + digits - 1)
    moved = copy.deepcopy(records[split:])
    for offset, record in enumerate(moved):
        record["dynamodb"]["SequenceNumber"] = str(start + 7 * offset)
    return records[:split] + moved


def sub_streams(records: Sequence[Dict[str, Any]], parallel: int) -> List[List[Dict[str, Any]]]:
    """``records`` split by partition key over ``parallel`` concurrent batches of a shard (ParallelizationFactor):
    board number ``n``'s records in order in batch ``n % parallel``, nothing ordered between those."""
    parts: List[List[Dict[str, Any]]] = [[] for _ in range(parallel)]
    for record in records:
        parts[BOARDS.index(record["dynamodb"]["Keys"]["pk"]["S"]) % parallel].append(record)
    return [part for part in parts if part]


# -- a Lambda handler and what can happen to it -------------------------------------------------------------------
def handle(records: Sequence[Dict[str, Any]]) -> StreamResult:
    """The handler: ``count_stream`` on one batch; nothing it counts is left out for a missing parent or floored."""
    result = count_stream({"Records": list(records)}, models=[Pin, Note], retry=FAST)
    assert not result.missing and not result.floored, (result.missing, result.floored)
    return result


def until_applied(batch: List[Dict[str, Any]]) -> None:
    """``batch`` delivered with nothing injected: applied at once, whole."""
    result = handle(batch)
    assert result == {"batchItemFailures": []} and result.error is None, result.error


def named(batch: Sequence[Dict[str, Any]], result: StreamResult) -> int:
    """Where the record named in ``result``'s ``batchItemFailures`` is in ``batch``."""
    (failure,) = result["batchItemFailures"]
    return next(index for index, record in enumerate(batch)
                if record["dynamodb"]["SequenceNumber"] == failure["itemIdentifier"])


def failing(pk: str, sk: str) -> Callable[..., None]:
    """A ``before-send`` handler that refuses every UpdateItem of the parent item ``(pk, sk)``, as throttling
    DynamoDB would, before it reaches the engine: the handler's retries run out on that parent alone."""

    def refuse(request: Any, **_: Any) -> None:
        key = json.loads(request.body)["Key"]
        if (key["pk"]["S"], key["sk"]["S"]) == (pk, sk):
            raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "injected"},
                               "ResponseMetadata": {"HTTPStatusCode": 400}}, "UpdateItem")

    return refuse


def dying(after: int) -> Callable[..., None]:
    """An ``after-call`` handler: the handler's process dies once its update number ``after`` (from 0) landed."""
    landed = [0]

    def die(**_: Any) -> None:
        landed[0] += 1
        if landed[0] > after:
            raise Died()

    return die


def crashed(batch: List[Dict[str, Any]], after: int) -> bool:
    """``batch`` delivered to a handler that dies once its update number ``after`` landed: whether it died."""
    with hooked("after-call.dynamodb.UpdateItem", dying(after), *PARENTS):
        try:
            handle(batch)
        except Died:  # Lambda saw no answer and checkpointed nothing: the batch comes again
            event("a handler died after an update landed")
            return True
    return False


def failed(batch: List[Dict[str, Any]], fails: int) -> List[Dict[str, Any]]:
    """``batch`` delivered while the updates of one parent item fail, a board's or its inbox folder's (the last
    board the batch names, or one before it): what Lambda delivers again, from the record named."""
    boards = list(dict.fromkeys(record["dynamodb"]["Keys"]["pk"]["S"] for record in batch))
    parent = (boards[-1 - fails % len(boards)], ("META", "FOLDER#inbox")[fails // 3 % 2])
    with hooked("before-send.dynamodb.UpdateItem", failing(*parent), *PARENTS):
        result = handle(batch)
    if not result["batchItemFailures"]:
        return batch  # it counted nothing into that parent: applied
    assert isinstance(result.error, RetriesExhaustedError), result.error
    event("a failed update answered in batchItemFailures" + (", from a later record" if named(batch, result) else ""))
    return batch[named(batch, result):]


def deliver(batch: List[Dict[str, Any]], plan: Plan) -> None:
    """``batch`` as Lambda delivers it, as ``plan`` says; applied in the end."""
    died = plan.dies is not None and crashed(batch, plan.dies)
    half = len(batch) // 2
    for part in [batch[:half], batch[half:]] if died and plan.bisect and half else [batch]:
        if plan.fails is not None:
            part = failed(part, plan.fails)
        until_applied(part)
    if plan.twice:
        until_applied(batch)


def deliver_shard(records: List[Dict[str, Any]], parallel: int, sizes: List[int], plans: List[Plan],
                  order: List[int]) -> None:
    """A shard's records, as Lambda delivers them: over ``parallel`` sub-streams, each cut into batches of
    ``sizes`` (in turn) that ``plans`` (in turn) deliver, the sub-streams' batches interleaved as ``order`` says."""
    parts = sub_streams(records, parallel)
    done = [0] * len(parts)  # each sub-stream's checkpoint
    turn = 0
    while True:
        waiting = [index for index in range(len(parts)) if done[index] < len(parts[index])]
        if not waiting:
            return
        part = waiting[order[turn % len(order)] % len(waiting)] if order else waiting[0]
        plan = plans[turn % len(plans)]
        records_of = parts[part]
        end = min(len(records_of), done[part] + sizes[turn % len(sizes)])
        batch = records_of[max(0, done[part] - plan.back):end]  # starting before the checkpoint: counted already
        for index in plan.repeated:  # a record repeated, in stream order still
            batch.insert(index % len(batch), batch[index % len(batch)])
        deliver(batch, plan)
        done[part] = end
        turn += 1


# about 20 s: run once, in the slow env
@pytest.mark.slow
@settings(max_examples=20, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
# two boards in two sub-streams, a shard and its child: a failed update of a parent with several records in the
# batch, a handler that dies after its second update, a bisected batch, records repeated, a batch delivered twice
@example(boards=2, written=[("save", 0, 0, "inbox", "d1", "draft", 1), ("save", 1, 0, "art", "d2", "published", 2),
                            ("save", 0, 1, "art", "d1", "published", 3), ("note", 0, 0, "inbox", "d1", "draft", 2),
                            ("move", 0, 0, "art", "d2", "draft", 0), ("edit", 0, 1, "inbox", "d1", "draft", 1),
                            ("batch", 1, 1, "inbox", "d3", "draft", 2), ("put", 0, 2, "inbox", "d3", "published", 3),
                            ("update", 1, 0, "inbox", "d1", "published", 0), ("delete", 0, 1, "art", "d1", "draft", 0),
                            ("save", 0, 1, "inbox", "d2", "draft", 2), ("raw_delete", 1, 1, "art", "d1", "draft", 0),
                            ("note", 0, 0, "inbox", "d1", "draft", 3), ("note", 1, 2, "inbox", "d1", "draft", 1)],
         parallel=2, sizes=[5, 3],
         plans=[Plan(fails=0, dies=None, bisect=False, twice=False, repeated=[1], back=0),
                Plan(fails=None, dies=1, bisect=False, twice=False, repeated=[3], back=2),
                Plan(fails=3, dies=0, bisect=True, twice=False, repeated=[0, 4], back=1),
                Plan(fails=None, dies=None, bisect=False, twice=True, repeated=[2], back=0)],
         order=[1, 0, 0], shard=(50, 3), replay=2)
@given(boards=st.integers(2, 3), written=st.lists(writes, min_size=6, max_size=24),
       parallel=st.integers(1, 3), sizes=st.lists(st.integers(1, 16), min_size=1, max_size=5),
       plans=st.lists(delivery_plans, min_size=1, max_size=6), order=st.lists(st.integers(0, 2), max_size=12),
       shard=st.one_of(st.none(), st.tuples(st.integers(0, 100), st.integers(1, 18))), replay=st.integers(1, 4))
def test_any_delivery_of_the_stream_counts_each_record_once(
        boards: int, written: List[Write], parallel: int, sizes: List[int], plans: List[Plan],
        order: List[int], shard: Optional[Tuple[int, int]], replay: int) -> None:
    pks = BOARDS[:boards]
    fresh_table(pks)
    for step in written:
        write(step, pks)
    records = lambda_event(stream_records(Board), Board)["Records"]
    first = next((index for index, record in enumerate(records)  # the boards' and folders' own records before
                  if record["dynamodb"]["Keys"]["sk"]["S"].startswith(("PIN#", "NOTE#"))), len(records))
    setup, records = records[:first], records[first:]  # are delivered in the replay only
    if not records:
        return
    shards = [records]
    if shard is not None:
        split = len(records) * shard[0] // 100
        records = child_shard(records, split, shard[1])
        shards = [records[:split], records[split:]]
        event("a shard and its child shard")
    event(f"{len(sub_streams(records, parallel))} sub-streams")
    for records_of in shards:  # a parent shard's records all before its child's
        if records_of:
            deliver_shard(records_of, parallel, sizes, plans, order)
    assert {pk: stored(pk) for pk in pks} == {pk: recount(pk) for pk in pks}
    counted = items()
    whole = setup + records
    size = -(-len(whole) // replay)
    for start in range(0, len(whole), size):  # and a replay of the whole stream, in `replay` batches
        again = handle(whole[start:start + size])
        assert again == {"batchItemFailures": []} and again.counted == () and again.changes == ()
    assert items() == counted  # not a counter nor a mark changed
