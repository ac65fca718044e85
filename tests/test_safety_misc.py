"""Issue 10, cases 5, 6, 11 and the bulk items of 15: ``skip_counting()`` ends for tasks and threads, bulk chunks
sized with every action and partial results always reported, signals as blinker sends them, ``BulkResult.requests``
against the wire, and bulk refusals ranked as a single write's."""
from __future__ import annotations

import asyncio
import contextlib
import contextvars
import gc
import logging
import threading
import warnings
from typing import Any, Dict, Iterator, List

import pytest
from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

from pynamodb_counters import (
    CounterField,
    CounterMixin,
    RetryPolicy,
    bulk_delete,
    bulk_save,
    counted_by,
    signals,
    skip_counting,
)
from pynamodb_counters._base import SHARD
from pynamodb_counters._chunks import plan_chunks
from pynamodb_counters._send import transact_client
from pynamodb_counters.exceptions import (
    BulkWriteError,
    MissingChildError,
    ParentNotFoundError,
    TransactionError,
    TransactionTooLargeError,
)
from tests.factories import like, likes, post, snapshot, stored, tally
from tests.faults import LOSE_RESPONSE, RESET_BEFORE, SERVER_ERROR, THROTTLE, FaultProxy, answer
from tests.models import REGION, Like, Post


class Album(CounterMixin, Model):
    """A parent in a table whose name sorts after ``Social``, so that its children's chunks come after likes."""

    class Meta:
        table_name = "Tracks"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)  # "ALBUM#a"
    sk = UnicodeAttribute(range_key=True)  # "META"
    track_count = CounterField()


class Track(CounterMixin, Model):
    """Both a counted child (of its album) and a sharded parent (its plays, over 4 items)."""

    class Meta:
        table_name = "Tracks"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)  # "ALBUM#a"
    sk = UnicodeAttribute(range_key=True)  # "TRACK#7"
    play_count = CounterField(shards=4)
    album = counted_by(Album.track_count, key=lambda track: (track.pk, "META"), prefix="TRACK#")


@pytest.fixture
def tracks(dynamodb: None) -> Iterator[None]:
    Album.create_table(billing_mode="PAY_PER_REQUEST")
    Album(pk="ALBUM#a", sk="META").save()
    yield


@contextlib.contextmanager
def transact_requests(*models: type) -> Iterator[List[str]]:
    """Every TransactWriteItems request the counted writes' clients send for ``models``, as botocore's
    ``before-send`` sees it (once per HTTP attempt, whatever the answer)."""
    sent: List[str] = []

    def record(**_: Any) -> None:
        sent.append("TransactWriteItems")

    with hooked("before-send.dynamodb.TransactWriteItems", record, *models):
        yield sent


@contextlib.contextmanager
def hooked(event: str, handler: Any, *models: type) -> Iterator[None]:
    """``handler`` registered for ``event`` on the counted writes' clients of ``models``."""
    clients = {id(client): client for client in (transact_client(model) for model in models)}
    for client in clients.values():
        client.meta.events.register(event, handler)
    try:
        yield
    finally:
        for client in clients.values():
            client.meta.events.unregister(event, handler)


# -- case 5: skip_counting() ends for every copy of the context ---------------------------------------------------
@pytest.mark.usefixtures("dynamodb")
def test_case5_a_task_created_inside_skip_counting_counts_after_the_block() -> None:
    post()

    async def main() -> None:
        released = asyncio.Event()

        async def late_like() -> None:
            await released.wait()
            like("late").save()

        with skip_counting():
            task = asyncio.create_task(late_like())
        released.set()
        await task

    asyncio.run(main())
    assert (tally(), likes()) == (1, 1)


@pytest.mark.usefixtures("dynamodb")
def test_case5_a_task_skips_while_the_block_is_open_and_counts_once_it_exits() -> None:
    post()

    async def main() -> None:
        inside_done, block_closed = asyncio.Event(), asyncio.Event()

        async def two_likes() -> None:
            like("inside").save()  # the block is open: uncounted, as documented
            inside_done.set()
            await block_closed.wait()
            like("after").save()  # the block has exited: counted

        with skip_counting(Like):
            task = asyncio.create_task(two_likes())
            await inside_done.wait()
        block_closed.set()
        await task

    asyncio.run(main())
    assert (tally(), likes()) == (1, 2)


@pytest.mark.usefixtures("dynamodb")
def test_case5_a_context_copied_inside_the_block_counts_in_a_thread_after_it() -> None:
    post()
    with skip_counting():
        copied = contextvars.copy_context()
        like("skipped").save()
    errors: List[BaseException] = []

    def run() -> None:
        try:
            copied.run(like("threaded").save)
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert errors == []
    assert (tally(), likes()) == (1, 2)  # the like saved inside the block is the known drift


@pytest.mark.usefixtures("dynamodb")
def test_case5_nested_blocks_end_in_order_and_copies_follow() -> None:
    post()
    with skip_counting(Like):
        outer = contextvars.copy_context()
        with skip_counting(Post):
            inner = contextvars.copy_context()
        # the inner block is closed, the outer one still skips likes, in this context and in both copies
        outer.run(like("a").save)
        inner.run(like("b").save)
        assert (tally(), likes()) == (0, 2)
    inner.run(like("c").save)
    outer.run(like("d").save)
    assert (tally(), likes()) == (2, 4)


# -- case 6: chunks sized with every action; a bulk call always reports what committed -----------------------------
def test_case6_chunks_count_the_shard_items_of_children_that_are_sharded_parents() -> None:
    children = [("save", Track(pk="ALBUM#a", sk=f"TRACK#{n}")) for n in range(150)]
    children += [("save", like(n)) for n in range(98)]
    for chunk in plan_chunks(children, 100):
        own = sum(4 if isinstance(child, Track) else 1 for _, _, child in chunk)
        parents = {(type(child).__name__, child.pk) for _, _, child in chunk}
        assert own + len(parents) <= 100, (own, parents)


def test_case6_an_edit_of_a_child_that_is_a_sharded_parent_is_sized_as_the_one_update_it_is(tracks: None) -> None:
    """A stored track saved again is an edit: one Update, its shard items untouched. Sized as a new track (4
    actions) it was refused at max_actions=2, which its plan (the edit and its album's Update) fits."""
    Album(pk="ALBUM#a", sk="META").save()
    Track(pk="ALBUM#a", sk="TRACK#1").save()
    stored = Track.get("ALBUM#a", "TRACK#1", consistent_read=True)
    result = bulk_save([stored], max_actions=2)
    assert [o.status for o in result.outcomes] == ["changed"]
    assert Album.get("ALBUM#a", "META", consistent_read=True).track_count == 1


def test_case6_bulk_sizes_chunks_with_shard_items_and_commits_everything(tracks: None) -> None:
    post()
    batch: List[Model] = [like(n) for n in range(98)] + [Track(pk="ALBUM#a", sk=f"TRACK#{n}") for n in range(60)]
    with transact_requests(Like, Track) as sent:
        result = bulk_save(batch)
    assert [o.status for o in result.outcomes] == ["added"] * len(batch)
    assert (tally(), likes()) == (98, 98)
    assert Album.get("ALBUM#a", "META", consistent_read=True).track_count == 60
    assert Track.count("ALBUM#a", Track.sk.startswith("TRACK#"), consistent_read=True) == 60
    shard_items = [item for item in stored("Tracks") if SHARD.attr_name in item]
    assert len(shard_items) == 60 * 3  # every track's own shard items 1..3, written with its Put
    assert result.requests == len(sent) == len(result.results)


def test_case6_a_child_too_large_for_any_chunk_is_refused_before_anything_is_sent(tracks: None) -> None:
    post()
    before = snapshot()
    with pytest.raises(TransactionTooLargeError, match="Nothing was sent"):
        bulk_save([like(1), like(2), like(3), Track(pk="ALBUM#a", sk="TRACK#1")], max_actions=4)  # 4 + 1 > 4
    assert snapshot() == before
    assert stored("Tracks") == [item for item in stored("Tracks") if item["sk"]["S"] == "META"]


def test_case6_an_unexpected_error_in_a_later_chunk_carries_what_committed(tracks: None) -> None:
    post()
    batch: List[Model] = [like(n) for n in range(98)] + [Track(pk="ALBUM#a", sk=f"TRACK#{n}") for n in range(60)]
    calls: List[int] = []

    def explode_on_second_request(**_: Any) -> None:
        calls.append(1)
        if len(calls) == 2:
            raise ValueError("a before-call hook broke")

    with hooked("before-call.dynamodb.TransactWriteItems", explode_on_second_request, Like, Track), \
            pytest.raises(BulkWriteError, match="a before-call hook broke") as raised:
        bulk_save(batch)
    result = raised.value.result
    assert isinstance(raised.value.__cause__, ValueError)
    statuses: Dict[str, int] = {}
    for outcome in result.outcomes:
        statuses[outcome.status] = statuses.get(outcome.status, 0) + 1
    assert result.added == batch[:98] and statuses["added"] == 98
    failed = [o for o in result.outcomes if o.status == "failed"]
    assert failed and all(o.error is raised.value for o in failed)
    assert statuses["failed"] + statuses["unsent"] == 60
    assert (tally(), likes()) == (98, 98)  # what the result says committed, did
    assert Album.get("ALBUM#a", "META", consistent_read=True).track_count == \
        Track.count("ALBUM#a", Track.sk.startswith("TRACK#"), consistent_read=True) == 0
    assert result.requests == 1  # the second request never left: the hook raised before it was built


def test_case6_a_transaction_error_in_a_later_chunk_is_reported_per_child(dynamodb: None) -> None:
    post()
    batch: List[Model] = [like(n) for n in range(98)] + [Track(pk="ALBUM#a", sk=f"TRACK#{n}") for n in range(3)]
    result = bulk_save(batch)  # the Tracks table does not exist
    assert result.added == batch[:98] and (tally(), likes()) == (98, 98)
    assert [o.instance for o in result.failed] == batch[98:]
    assert all(isinstance(o.error, TransactionError) for o in result.failed)


# -- case 11: signals behave as blinker's --------------------------------------------------------------------------
@pytest.mark.usefixtures("dynamodb")
def test_case11_a_muted_signal_calls_no_receiver() -> None:
    post()
    heard: List[Any] = []
    with signals.child_added.connected_to(lambda sender, **kw: heard.append(kw["instance"]), sender=Like):
        with signals.child_added.muted():
            like(1).save()
        like(2).save()
    assert [child.sk for child in heard] == ["LIKE#USER#2"]
    assert (tally(), likes()) == (2, 2)


@pytest.mark.usefixtures("dynamodb")
def test_case11_a_coroutine_receiver_gets_blinkers_answer_not_a_never_awaited_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    post()
    called: List[Any] = []

    async def on_like(sender: Any, **kwargs: Any) -> None:  # pragma: no cover - never run
        called.append(kwargs)

    with signals.child_added.connected_to(on_like, sender=Like):
        with pytest.raises(RuntimeError) as blinker_answer:
            signals.child_added.send(Like)  # what blinker itself answers at send
        with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.ERROR, "pynamodb_counters"):
            warnings.simplefilter("always")
            result = like(1).save()
            gc.collect()
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []
    assert called == []
    [record] = [r for r in caplog.records if r.name == "pynamodb_counters.signals"]
    assert record.exc_info is not None and str(record.exc_info[1]) == str(blinker_answer.value)
    assert "child_added" in record.getMessage()
    assert result.changes and (tally(), likes()) == (1, 1)  # the write stands


@pytest.mark.usefixtures("dynamodb")
def test_case11_a_receiver_returning_a_coroutine_is_closed_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    post()

    async def later() -> None:  # pragma: no cover - never run
        pass

    with signals.child_added.connected_to(lambda sender, **kw: later(), sender=Like):
        with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.ERROR, "pynamodb_counters"):
            warnings.simplefilter("always")
            like(1).save()
            gc.collect()
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []
    [record] = [r for r in caplog.records if r.name == "pynamodb_counters.signals"]
    assert record.exc_info is not None and "returned a coroutine" in str(record.exc_info[1])
    assert (tally(), likes()) == (1, 1)


@pytest.mark.usefixtures("dynamodb")
def test_case11_a_raising_receiver_still_never_undoes_the_write(caplog: pytest.LogCaptureFixture) -> None:
    post()

    def broken(sender: Any, **kwargs: Any) -> None:
        raise KeyError("receiver bug")

    with signals.child_removed.connected_to(broken, sender=Like), signals.child_added.connected_to(broken):
        like(1).save()
        like(2).save()
        like(1).delete()
    assert (tally(), likes()) == (1, 1)
    assert sum("receiver" in r.getMessage() for r in caplog.records) == 3


# -- case 15: BulkResult.requests, and bulk refusals ranked as a single write's -----------------------------------
@pytest.mark.served
def test_case15_bulk_requests_match_the_requests_on_the_wire(proxy: FaultProxy) -> None:
    post("POST#a")
    post("POST#b")
    policy = RetryPolicy(max_attempts=6, base_delay=0.0, max_delay=0.0)
    proxy.inject(THROTTLE, times=2)  # the first chunk: throttled twice, then refused for good, as a whole and
    # in halves until each child fails alone: [0, 1, 2], then [0], then [1, 2], then [1] and [2]
    proxy.inject(answer(400, "ValidationException", "refused on purpose"), times=5)
    proxy.inject(SERVER_ERROR)  # the second chunk: a 5xx, a reset, a lost response (recovered), then done
    proxy.inject(RESET_BEFORE)
    proxy.inject(LOSE_RESPONSE)
    batch = [like(n, "POST#a") for n in range(3)] + [like(n, "POST#b") for n in range(3)]
    with transact_requests(Like) as sent:
        result = bulk_save(batch, retry=policy, max_actions=4)  # 3 likes and their post per transaction
    assert [o.status for o in result.outcomes] == ["failed"] * 3 + ["added"] * 3
    assert isinstance(result.failed[0].error, TransactionError)
    assert result.requests == len(sent) == 11  # 7 for the first chunk, 4 for the second
    assert tally("POST#b") == likes("POST#b") == 3 and likes("POST#a") == 0


@pytest.mark.usefixtures("dynamodb")
def test_case15_a_missing_child_of_a_missing_post_is_parent_not_found_in_bulk_as_alone() -> None:
    with pytest.raises(ParentNotFoundError):
        like(1, "POST#gone").delete()
    post("POST#here")
    like(1, "POST#here").save()
    result = bulk_delete([like(2, "POST#gone"), like(3, "POST#gone"), like(1, "POST#here"), like(4, "POST#here")])
    outcomes = {o.instance.sk + o.instance.pk: o for o in result.outcomes}
    for sk in ("LIKE#USER#2", "LIKE#USER#3"):
        assert type(outcomes[sk + "POST#gone"].error) is ParentNotFoundError
    assert outcomes["LIKE#USER#1POST#here"].status == "removed"
    assert type(outcomes["LIKE#USER#4POST#here"].error) is MissingChildError
    assert tally("POST#here") == likes("POST#here") == 0
