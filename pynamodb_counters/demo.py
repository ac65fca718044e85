"""
The likes story, end to end: ``pynamodb-counters demo``.

Against an embedded moto backend when no endpoint is given (``pip install "pynamodb-counters[moto]"``), or
against any DynamoDB endpoint (a table is created if missing and kept).
"""
from __future__ import annotations

import contextlib
import json
import uuid
from typing import Any, Callable, Iterator, Optional, Tuple

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from . import signals
from .attributes import CounterField
from .exceptions import ConfigurationError, DuplicateChildError
from .models import CounterMixin
from .relations import counted_by
from .transactions import CountedTransaction

__all__ = ["run"]


def social_models(table: str, host: Optional[str], region: str) -> Tuple[Any, Any]:
    """The README's ``Post`` and ``Like`` models, bound to ``table`` at ``host``."""

    class Post(CounterMixin, Model):
        class Meta:
            table_name = table

        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        title = UnicodeAttribute(null=True)
        like_tally = CounterField()

    class Like(CounterMixin, Model):
        class Meta:
            table_name = table

        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        liked_at = NumberAttribute()
        post = counted_by(Post.like_tally, key=lambda like: (like.pk, "META"))

    for model in (Post, Like):
        meta: Any = model.Meta
        meta.host, meta.region = host, region
    return Post, Like


@contextlib.contextmanager
def embedded_backend() -> Iterator[None]:
    """moto's in-process DynamoDB, with dummy credentials that never leave this process."""
    try:
        from moto import mock_aws
    except ImportError as error:  # pragma: no cover - depends on the installation
        raise ConfigurationError('the embedded backend needs moto: pip install "pynamodb-counters[moto]", '
                                 "or pass --endpoint-url") from error
    with mock_aws():
        yield


def run(endpoint_url: Optional[str] = None, region: str = "us-east-1", table: str = "Social",
        out: Callable[[str], Any] = print) -> int:
    """Tell the likes story; return the exit code (0 when every step behaved as documented)."""
    backend = embedded_backend() if endpoint_url is None else contextlib.nullcontext()
    with backend:
        Post, Like = social_models(table, endpoint_url, region)
        if not Post.exists():
            Post.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
        post_id = f"POST#{uuid.uuid4().hex[:4]}"
        out(f"engine: {endpoint_url or 'embedded moto (in-process)'}; table {table}")
        Post(pk=post_id, sk="META", title="Hello, counters").save()
        out(f"created {post_id} with like_tally = 0")

        def likes(user: str) -> Any:
            return Like(pk=post_id, sk=f"LIKE#USER#{user}", liked_at=1750636800)

        plan = CountedTransaction(token="(one token per write)")
        plan.save(likes("7c20"))
        out("one like is one TransactWriteItems:")
        for item in plan.plan().items:
            out(f"  {json.dumps(item)}")

        with signals.duplicate_rejected.connected_to(
                lambda sender, error, **_: out(f"  signal duplicate_rejected: {error.key[1]}"), sender=Like):
            for user in ("7c20", "19ab", "e004"):
                result = likes(user).save()
                out(f"like by USER#{user}: +1 in {result.attempts} request")
            try:
                likes("7c20").save()
            except DuplicateChildError as error:
                out(f"like by USER#7c20 again: refused ({type(error).__name__}), nothing written")
        likes("19ab").delete()
        out("unlike by USER#19ab: -1")

        stored = Post.get(post_id, "META", consistent_read=True)  # one GetItem
        children = Like.count(post_id, Like.sk.startswith("LIKE#"), consistent_read=True)
        out(f"read back with one GetItem: like_tally = {stored.like_tally}; like items = {children}")
        out("cost: a like or an unlike writes two items transactionally, about 4 WCU; reading the count is one "
            "GetItem (0.5 RCU eventually consistent), however many likes there are")
        return 0 if stored.like_tally == children == 2 else 1
