"""Bad arguments raise one kind of error everywhere: InvalidArgumentError (also a ValueError and a TypeError), with
nothing written. Bad declarations stay ConfigurationError."""
from __future__ import annotations

from typing import Any, Callable

import pytest

from pynamodb_counters import (
    CountedTransaction,
    CounterField,
    RetryPolicy,
    audit,
    bulk_write,
    item_bytes,
    read_units,
    repair,
    reshard,
    set_counter,
    write_units,
)
from pynamodb_counters.exceptions import ConfigurationError, InvalidArgumentError
from tests.support.factories import POST, like, post, snapshot
from tests.support.models import Like, Post, Video


def _update_without_actions() -> None:
    CountedTransaction().update(Post(pk=POST, sk="META"), [])


def _check_without_condition() -> None:
    CountedTransaction().condition_check(Post, POST, "META", condition=None)  # type: ignore[arg-type]


BAD_CALLS: dict[str, Callable[[], Any]] = {
    "a token of 37 characters": lambda: CountedTransaction(token="x" * 37),
    "update() without actions": _update_without_actions,
    "condition_check() without a condition": _check_without_condition,
    "a condition that is a string": lambda: like().save(condition="liked_at = :x"),  # type: ignore[arg-type]
    "an unknown keyword on a counted save": lambda: like().save(consistent=True),
    "bulk_write(max_actions=1)": lambda: bulk_write([like()], max_actions=1),
    "set_counter() of an attribute that is not a counter": lambda: set_counter(Post.title, POST, 1),  # type: ignore
    "set_counter() to a negative count": lambda: set_counter(Post.like_tally, (POST, "META"), -1),
    "audit() of an attribute that is not a counter": lambda: audit(Post.title),  # type: ignore[arg-type]
    "repair(max_attempts=0)": lambda: repair([], max_attempts=0),
    "reshard() to 0 shards": lambda: reshard(Video.view_count, 0),
    "reshard() of an attribute that is not a counter": lambda: reshard(Post.title, 2),  # type: ignore[arg-type]
    "write_units() of a negative size": lambda: write_units(-1),
    "read_units() of a negative size": lambda: read_units(-1),
    "item_bytes() of a value that is not DynamoDB's": lambda: item_bytes({"a": {"Q": "?"}}),
    # the library's options where they do not apply: refused, never dropped
    "token= on a child's update that counts nothing": lambda: _other().update([Like.liked_at.set(5)], token="key"),
    "retry= on a child's update that counts nothing": lambda: _other().update([Like.liked_at.set(5)],
                                                                              retry=RetryPolicy()),
    "token=123 on a child's update": lambda: _other().update([Like.liked_at.set(5)], token=123),
    "token=123 on a counted save": lambda: like().save(token=123),  # type: ignore[arg-type]
    "token= on a parent's save": lambda: Post(pk="POST#p2", sk="META").save(token="key"),
    "retry= on a parent's save": lambda: Post(pk="POST#p2", sk="META").save(retry=RetryPolicy()),
    "ignore_duplicate= on a parent's save": lambda: Post(pk="POST#p2", sk="META").save(ignore_duplicate=True),
    "token= on a parent's delete": lambda: Post.get(POST, "META").delete(token="key"),
    "ignore_missing= on a parent's delete": lambda: Post(pk="POST#p9", sk="META").delete(ignore_missing=True),
    "token= on a parent's update": lambda: Post.get(POST, "META").update([Post.title.set("x")], token="key"),
    "retry= on a sharded parent's save": lambda: Video(pk="VIDEO#v9", sk="META").save(retry=RetryPolicy()),
}


def _other() -> Like:
    return Like.get(POST, "LIKE#USER#other", consistent_read=True)


@pytest.mark.usefixtures("dynamodb")
@pytest.mark.parametrize("call", list(BAD_CALLS.values()), ids=list(BAD_CALLS))
def test_a_bad_argument_is_an_invalid_argument_error_and_writes_nothing(call: Callable[[], Any]) -> None:
    post()
    like("other").save()
    before = snapshot()
    with pytest.raises(InvalidArgumentError) as raised:
        call()
    assert isinstance(raised.value, ValueError) and isinstance(raised.value, TypeError)  # either except still works
    assert not isinstance(raised.value, ConfigurationError)
    assert snapshot() == before


def test_a_bad_declaration_stays_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="shards"):
        CounterField(shards=0)
    assert not issubclass(ConfigurationError, InvalidArgumentError)
    assert Like.post.counter is Post.like_tally  # the suite's declarations are untouched
