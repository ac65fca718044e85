"""What a user's mypy sees: counters are ints, relations are Relations, parent keys are tuples."""
from __future__ import annotations

from typing import Any, Dict, Tuple

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model
from typing_extensions import assert_type

from pynamodb_counters import (
    AuditReport,
    CountedTransaction,
    CounterField,
    CounterMixin,
    Relation,
    WriteResult,
    audit,
    counted_by,
    reshard,
)


class Post(CounterMixin, Model):
    class Meta:
        table_name = "Social"

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    like_tally = CounterField()
    view_count = CounterField(shards=16)


class Like(CounterMixin, Model):
    class Meta:
        table_name = "Social"

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    liked_at = NumberAttribute()
    post = counted_by(Post.like_tally, key=lambda like: (like.pk, "META"), prefix="LIKE#")


def check(post: Post, like: Like) -> None:
    assert_type(post.like_tally, int)
    assert_type(Post.like_tally, CounterField)
    assert_type(Like.post, Relation)
    assert_type(like.post, Tuple[Any, ...])
    total: int = post.like_tally + 1
    transaction = CountedTransaction()
    transaction.save(like)
    assert_type(transaction.commit(), WriteResult)
    assert_type(audit(Post.like_tally), AuditReport)
    assert_type(Post.view_count.total(post), int)
    assert_type(Post.view_count.totals([("POST#a91f", "META")]), Dict[Tuple[Any, ...], int])
    assert_type(reshard(Post.view_count, 4), int)
    assert total
