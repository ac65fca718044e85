"""The async twins on aiobotocore, over real HTTP on the served engine (moto in-process does not serve
aiobotocore): the same results, signals and errors as the sync methods, exactly once over lost responses and
conflicts injected at the transport, a storm of tasks on one loop, a loop never blocked, clients per loop.

The sync tests of every relation kind also run through the async twins (``pytest --driver=async``, tox's async
env): these are what only async code can show."""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import time
from typing import Any, Dict, List, Optional, Tuple

import pytest
from botocore.exceptions import ClientError, ReadTimeoutError
from pynamodb.signals import post_dynamodb_send, pre_dynamodb_send

from pynamodb_counters import CountedTransaction, RetryPolicy, aio, audit
from pynamodb_counters.exceptions import DuplicateChildError, LimitExceededError, MissingExtraError
from pynamodb_counters.signals import child_added, child_removed, duplicate_rejected
from pynamodb_counters.testing import Backend, ServedMoto, assert_counters_exact
from pynamodb_counters.transport import Call, Interceptor, intercepting
from tests.support.drivers import engine_elsewhere
from tests.support.models import Game, Like, Message, Post, Seat, Thread

pytestmark = pytest.mark.served


def post(pk: str = "POST#a91f") -> Post:
    created = Post(pk=pk, sk="META", title="hello")
    created.save()
    return created


class Recorded:
    """The library's signals and PynamoDB's send signals, in order, as plain values."""

    def __init__(self) -> None:
        self.seen: List[Tuple[str, ...]] = []

    def pynamodb(self, name: str) -> Any:
        def receive(sender: Any, operation_name: str, table_name: Optional[str], req_uuid: Any) -> None:
            self.seen.append((name, operation_name, str(table_name)))
        return receive

    def ours(self, name: str) -> Any:
        def receive(sender: Any, **kwargs: Any) -> None:
            self.seen.append((name, sender.__name__, repr(getattr(kwargs.get("instance"), "sk", None))))
        return receive

    def __enter__(self) -> Recorded:
        self.connected = [(signal, receiver) for signal, receiver in (
            (pre_dynamodb_send, self.pynamodb("pre")), (post_dynamodb_send, self.pynamodb("post")),
            (child_added, self.ours("added")), (child_removed, self.ours("removed")),
            (duplicate_rejected, self.ours("duplicate")))]
        for signal, receiver in self.connected:
            signal.connect(receiver)
        return self

    def __exit__(self, *exc: Any) -> None:
        for signal, receiver in self.connected:
            signal.disconnect(receiver)


def story(pk: str) -> List[Any]:
    """A like, its duplicate, a read of the post and its total, a transaction, an unlike: sync."""
    out: List[Any] = []
    like = Like(pk=pk, sk="LIKE#USER#1", liked_at=1)
    out.append(like.save().changes)
    with pytest.raises(DuplicateChildError) as caught:
        Like(pk=pk, sk="LIKE#USER#1", liked_at=1).save()
    out.append(str(caught.value))
    out.append(Post.get(pk, "META", consistent_read=True).like_tally)
    out.append(Post.like_tally.total((pk, "META"), consistent_read=True))
    with CountedTransaction() as transaction:
        transaction.save(Like(pk=pk, sk="LIKE#USER#2", liked_at=2))
    out.append(transaction.result.changes if transaction.result else None)
    out.append(Like.get(pk, "LIKE#USER#1", consistent_read=True).delete().changes)
    return out


async def astory(pk: str) -> List[Any]:
    """:func:`story`, awaited."""
    out: List[Any] = []
    like = Like(pk=pk, sk="LIKE#USER#1", liked_at=1)
    out.append((await like.asave()).changes)
    with pytest.raises(DuplicateChildError) as caught:
        await Like(pk=pk, sk="LIKE#USER#1", liked_at=1).asave()
    out.append(str(caught.value))
    out.append((await Post.aget(pk, "META", consistent_read=True)).like_tally)
    out.append(await Post.like_tally.atotal((pk, "META"), consistent_read=True))
    async with CountedTransaction() as transaction:
        transaction.save(Like(pk=pk, sk="LIKE#USER#2", liked_at=2))
    out.append(transaction.result.changes if transaction.result else None)
    out.append((await (await Like.aget(pk, "LIKE#USER#1", consistent_read=True)).adelete()).changes)
    return out


def test_the_async_twins_return_raise_and_signal_as_the_sync_methods(served: ServedMoto) -> None:
    post("POST#sync")
    post("POST#async")
    with Recorded() as sync_run:
        told = story("POST#sync")
    with Recorded() as async_run:
        awaited = asyncio.run(astory("POST#async"))
    as_sync = [json.loads(json.dumps(value, default=repr).replace("POST#async", "POST#sync")) for value in awaited]
    assert as_sync == [json.loads(json.dumps(value, default=repr)) for value in told]
    assert async_run.seen == sync_run.seen  # PynamoDB's send signals (operation, table) and ours, in order
    assert ("pre", "TransactWriteItems", "None") in async_run.seen
    assert ("added", "Like", "'LIKE#USER#1'") in async_run.seen
    assert Post.like_tally.total(("POST#async", "META"), consistent_read=True) == 1


def test_a_parent_asave_keeps_the_counters_and_arefresh_reads_them(served: ServedMoto) -> None:
    async def run() -> Tuple[int, int, Optional[str]]:
        stale = Post(pk="POST#p", sk="META", title="first")
        await stale.asave()
        await Like(pk="POST#p", sk="LIKE#USER#1", liked_at=1).asave()
        stale.title = "edited"
        await stale.asave()  # counter-preserving: the like that landed since stays counted
        fresh = await Post.aget("POST#p", "META", consistent_read=True)
        await stale.arefresh(consistent_read=True)
        return fresh.like_tally, stale.like_tally, fresh.title

    assert asyncio.run(run()) == (1, 1, "edited")


def test_aupdate_is_a_counted_update_and_adelete_ignores_a_missing_child(served: ServedMoto) -> None:
    Thread(pk="THREAD#t1", sk="META").save()

    async def run() -> Tuple[Any, Any]:
        message = Message(pk="MSG#m1", sk="MSG", thread_id="THREAD#t1", words=3)
        await message.asave()
        await message.aupdate([Message.status.set("published")])
        gone = Message(pk="MSG#gone", sk="MSG", thread_id="THREAD#t1")
        return (await gone.adelete(ignore_missing=True)).missing, message.status

    assert asyncio.run(run()) == (True, "published")
    thread = Thread.get("THREAD#t1", "META", consistent_read=True)
    assert (thread.message_count, thread.published_count, thread.word_total) == (1, 1, 3)


class LoseTheFirstResponse(Interceptor):
    """DynamoDB applies the first TransactWriteItems; its response is lost on the way back."""

    def __init__(self) -> None:
        self.tokens: List[str] = []

    def request(self, call: Call) -> None:
        if call.operation == "TransactWriteItems":
            self.tokens.append(call.parameters["ClientRequestToken"])

    def response(self, call: Call, response: Dict[str, Any]) -> Dict[str, Any]:
        if call.operation == "TransactWriteItems" and len(self.tokens) == 1:
            raise ReadTimeoutError(endpoint_url="lost on the way back")
        return response


class ConflictFirst(Interceptor):
    """The first TransactWriteItems is cancelled for a conflict, unsent."""

    def __init__(self) -> None:
        self.sent = 0

    def request(self, call: Call) -> None:
        if call.operation == "TransactWriteItems":
            self.sent += 1
            if self.sent == 1:
                actions = len(call.parameters["TransactItems"])
                raise ClientError({"Error": {"Code": "TransactionCanceledException", "Message": "conflict"},
                                   "CancellationReasons": [{"Code": "TransactionConflict"}] * actions,
                                   "ResponseMetadata": {"HTTPStatusCode": 400}}, "TransactWriteItems")


@pytest.mark.parametrize("fault", [LoseTheFirstResponse, ConflictFirst])
def test_a_lost_response_or_a_conflict_counts_once_under_both_drivers(served: ServedMoto, fault: type) -> None:
    post()
    quick = RetryPolicy(base_delay=0)
    with intercepting(fault()):
        synced = Like(pk="POST#a91f", sk="LIKE#USER#1", liked_at=1).save(retry=quick)
    with intercepting(fault()):
        awaited = asyncio.run(Like(pk="POST#a91f", sk="LIKE#USER#2", liked_at=1).asave(retry=quick))
    assert (awaited.attempts, awaited.changes[0].delta) == (synced.attempts, synced.changes[0].delta) == (2, 1)
    assert Post.like_tally.total(("POST#a91f", "META"), consistent_read=True) == 2
    assert_counters_exact(Post.like_tally)


def test_the_capacity_dynamodb_reports_reaches_the_async_result(served: ServedMoto) -> None:
    post()

    class Metered(Interceptor):  # moto meters no capacity: DynamoDB's answer, as it would report it
        def response(self, call: Call, response: Dict[str, Any]) -> Dict[str, Any]:
            if call.operation == "TransactWriteItems":
                return {**response, "ConsumedCapacity": [{"TableName": "Social", "CapacityUnits": 4.0,
                                                          "WriteCapacityUnits": 4.0}]}
            return response

    with intercepting(Metered()):
        result = asyncio.run(Like(pk="POST#a91f", sk="LIKE#USER#1", liked_at=1).asave())
    assert result.consumed_capacity == ({"TableName": "Social", "CapacityUnits": 4.0, "WriteCapacityUnits": 4.0},)
    assert result.capacity_units == 4.0


def test_a_storm_of_200_tasks_on_one_loop_leaves_every_counter_exact(served: ServedMoto) -> None:
    """Likes and unlikes, messages written, published, moved between threads and deleted, seats taken and moved
    between games under their limits: 200 tasks at once on one loop, every counter a recount at the end."""
    post()
    for thread in ("THREAD#t1", "THREAD#t2"):
        Thread(pk=thread, sk="META").save()
    for game in ("GAME#g1", "GAME#g2"):
        Game(pk=game, sk="META", max_players=12).save()
    refused: List[str] = []

    async def liker(n: int) -> None:
        like = Like(pk="POST#a91f", sk=f"LIKE#USER#{n}", liked_at=n)
        await like.asave()
        if n % 3 == 0:
            await like.adelete()

    async def writer(n: int) -> None:
        message = Message(pk=f"MSG#{n}", sk="MSG", thread_id=f"THREAD#t{n % 2 + 1}", words=n % 7)
        await message.asave()
        message.status = "published"
        message.words = n % 5
        if n % 4 == 0:
            message.thread_id = f"THREAD#t{(n + 1) % 2 + 1}"  # a move
        await message.asave()
        if n % 5 == 0:
            await message.adelete()

    async def seater(n: int) -> None:
        seat = Seat(pk=f"SEAT#{n}", sk="SEAT", game_id=f"GAME#g{n % 2 + 1}")
        try:
            await seat.asave()
        except LimitExceededError:
            refused.append(seat.pk)
            return
        if n % 3 == 0:
            seat.game_id = f"GAME#g{(n + 1) % 2 + 1}"  # a move, refused where the other game is full
            try:
                await seat.asave()
            except LimitExceededError:
                refused.append(seat.pk)

    async def storm() -> None:
        tasks = [liker(n) for n in range(70)] + [writer(n) for n in range(70)] + [seater(n) for n in range(60)]
        await asyncio.gather(*tasks)
        await aio.aclose()

    asyncio.run(storm())
    threads, games = [("THREAD#t1", "META"), ("THREAD#t2", "META")], [("GAME#g1", "META"), ("GAME#g2", "META")]
    for counter, parents in ((Thread.message_count, threads), (Thread.published_count, threads),
                             (Thread.word_total, threads), (Game.seated, games), (Post.like_tally, None)):
        report = audit(counter) if parents is None else audit(counter, parents=parents)
        assert report.drifts == () and report.parents_checked == (1 if parents is None else 2), counter
    games = [Game.get(pk, "META", consistent_read=True) for pk in ("GAME#g1", "GAME#g2")]
    assert [game.seated for game in games] == [12, 12] and refused  # full, and refused beyond the limit
    assert Post.like_tally.total(("POST#a91f", "META")) == 70 - 24


@pytest.mark.slow
def test_the_loop_is_never_blocked_while_50_writes_wait_on_a_slow_transport() -> None:
    """A ticker on the loop keeps ticking while 50 likes wait on requests that each take 1 s more (the engine in a
    process of its own, so that nothing but the library shares this process's interpreter lock). The longest gap
    is the loop planning the 50 writes at once (about 2 ms of CPU each), never a wait on I/O."""
    slow = 1.0
    with engine_elsewhere(latency=slow) as endpoint, Backend("served", [Post, Like], endpoint):
        post()

        async def run() -> Tuple[float, float]:
            # the one blocking step allowed: the client made on first use (botocore's service model loaded), as
            # an app makes it on its first request
            await Like(pk="POST#a91f", sk="LIKE#USER#first", liked_at=0).asave()
            gaps: List[float] = []
            done = asyncio.Event()

            async def ticker() -> None:
                loop = asyncio.get_running_loop()
                while not done.is_set():
                    before = loop.time()
                    await asyncio.sleep(0.005)
                    gaps.append(loop.time() - before)

            ticking = asyncio.ensure_future(ticker())
            start = time.perf_counter()
            await asyncio.gather(*(Like(pk="POST#a91f", sk=f"LIKE#USER#{n}", liked_at=n).asave()
                                   for n in range(50)))
            wall = time.perf_counter() - start
            done.set()
            await ticking
            await aio.aclose()
            return max(gaps), wall

        longest, wall = asyncio.run(run())
        assert longest < slow / 4, f"the loop stood still for {longest:.3f} s while requests waited {slow} s"
        assert wall < 50 * slow / 4  # the writes waited together, not one after another
        assert Post.like_tally.total(("POST#a91f", "META"), consistent_read=True) == 51


def test_each_loop_makes_its_own_clients(served: ServedMoto) -> None:
    """A client is bound to the loop that made it: a second asyncio.run() (a new loop) works, and closing one
    loop's clients leaves the next loop free to make its own."""
    post()
    for n in range(3):
        assert asyncio.run(Like(pk="POST#a91f", sk=f"LIKE#USER#{n}", liked_at=n).asave()).changes[0].delta == 1
    assert Post.like_tally.total(("POST#a91f", "META"), consistent_read=True) == 3


def test_a_loop_that_ends_without_aclose_leaves_no_warning(served: ServedMoto) -> None:
    script = textwrap.dedent(f"""
        import asyncio, os, warnings
        warnings.simplefilter("error")
        from tests.support.models import Like, Post
        for model in (Like, Post):
            model.Meta.host = {served.endpoint_url!r}
        async def main():
            await Post(pk="POST#w", sk="META").asave()
            await Like(pk="POST#w", sk="LIKE#USER#1", liked_at=1).asave()
        asyncio.run(main())  # no aio.aclose()
        print(Post.like_tally.total(("POST#w", "META"), consistent_read=True))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=str(__import__("pathlib").Path(__file__).parents[1]))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"
    assert "Unclosed" not in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_without_the_extra_the_first_async_call_names_the_install_command(served: ServedMoto,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    post()
    monkeypatch.setitem(sys.modules, "aiobotocore", None)  # as if it were not installed
    monkeypatch.setitem(sys.modules, "aiobotocore.config", None)
    monkeypatch.setitem(sys.modules, "aiobotocore.session", None)
    with pytest.raises(MissingExtraError, match=r'pip install "pynamodb-counters\[async\]"') as caught:
        asyncio.run(Like(pk="POST#a91f", sk="LIKE#USER#1", liked_at=1).asave())
    assert isinstance(caught.value, ImportError)
    assert Post.like_tally.total(("POST#a91f", "META"), consistent_read=True) == 0  # nothing was written
    assert list(Like.query("POST#a91f", Like.sk.startswith("LIKE#"))) == []
