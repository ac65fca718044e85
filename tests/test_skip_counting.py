"""A ``skip_counting()`` block ends for every copy of the context made inside it: asyncio tasks and contexts run in
other threads skip counting while the block is open and count again once it exits; nested blocks end in order."""
from __future__ import annotations

import asyncio
import contextvars
import threading
from typing import List

import pytest

from pynamodb_counters import skip_counting
from tests.support.factories import like, likes, post, tally
from tests.support.models import Like, Post

pytestmark = pytest.mark.usefixtures("dynamodb")


def test_a_task_created_inside_skip_counting_counts_after_the_block() -> None:
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


def test_a_task_skips_while_the_block_is_open_and_counts_once_it_exits() -> None:
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


def test_a_context_copied_inside_the_block_counts_in_a_thread_after_it() -> None:
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


def test_nested_blocks_end_in_order_and_copies_follow() -> None:
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
