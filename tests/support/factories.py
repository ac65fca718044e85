"""The parents and children the suite writes, and what DynamoDB holds: one factory for each, shared by every test
file (the models are in :mod:`tests.support.models`; the engines that hold the tables are fixtures of
``conftest.py``)."""
from __future__ import annotations

import contextlib
import functools
from typing import Any, Dict, Iterator, List, Tuple

from pynamodb_counters import skip_counting
from pynamodb_counters.declare._counted import forget_specs
from tests.support.models import TABLE_MODELS, Bookmark, Like, Post, User, Video, View

#: the post most tests like
POST = "POST#a91f"
#: a like's ``liked_at`` where a test reads the stored time back (the factory's default, 1, is shorter)
LIKED_AT = 1750636800

Key = Tuple[str, str]


def post(pk: str = POST, **attributes: object) -> Key:
    """Save a post (no likes yet) and return its key."""
    Post(pk=pk, sk="META", **attributes).save()
    return (pk, "META")


def like(user: object = "7c20", pk: str = POST, liked_at: int = 1) -> Like:
    """A like of post ``pk`` by ``user``, not saved."""
    return Like(pk=pk, sk=f"LIKE#USER#{user}", liked_at=liked_at)


def tally(pk: str = POST) -> int:
    """The post's ``like_tally`` as stored (a consistent read)."""
    return Post.get(pk, "META", consistent_read=True).like_tally


def likes(pk: str = POST) -> int:
    """How many likes of the post are stored (a consistent query)."""
    return Like.count(pk, Like.sk.startswith("LIKE#"), consistent_read=True)


def make_video(pk: str = "VIDEO#v1", title: str = "cats") -> Key:
    """Save a video (a sharded parent: its shard items are created with it) and return its key."""
    Video(pk=pk, sk="META", title=title).save()
    return (pk, "META")


def view(pk: str, user: object) -> View:
    """A view of video ``pk`` by ``user``, not saved."""
    return View(pk=pk, sk=f"VIEW#USER#{user}")


def bookmarked_post() -> None:
    """The post, users U1 and U2, U1's bookmark of the post (``BOOKMARK#USER#7c20``) and U2's
    (``BOOKMARK#USER#other``): the post counts 2, each user 1."""
    post()
    User(user_id="U1").save()
    User(user_id="U2").save()
    Bookmark(pk=POST, sk="BOOKMARK#USER#7c20", user_id="U1").save()
    Bookmark(pk=POST, sk="BOOKMARK#USER#other", user_id="U2").save()  # U2 holds one bookmark of its own


def bookmarks(user_id: str) -> int:
    """The user's ``bookmarks`` counter as stored (a consistent read)."""
    return User.get(user_id, consistent_read=True).bookmarks


def stored(table: str) -> List[Dict[str, Any]]:
    """Every item of ``table`` as DynamoDB holds it (raw, typed values), read with a consistent scan."""
    client = raw_client(Post.Meta.host)
    return [item for page in client.get_paginator("scan").paginate(TableName=table, ConsistentRead=True)
            for item in page["Items"]]


@functools.cache
def raw_client(host: str | None) -> Any:
    """A plain boto3 DynamoDB client for ``host`` (``None``: the default endpoint, which moto intercepts
    in-process), to write behind the library's back or read what it stored."""
    import boto3

    return boto3.client("dynamodb", region_name="us-east-1", endpoint_url=host)


def snapshot() -> Dict[str, List[Dict[str, Any]]]:
    """Every test table's items, to show that a refused write left everything as it was."""
    return {model.Meta.table_name: sorted(stored(model.Meta.table_name), key=repr) for model in TABLE_MODELS}


def raw_item(table: str, key: Dict[str, Any]) -> Dict[str, Any]:
    """One item of ``table`` as DynamoDB holds it (a consistent ``GetItem``)."""
    item: Dict[str, Any] = raw_client(None).get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]
    return item


def raw_update(table: str, key: Dict[str, Any], expression: str, values: Dict[str, Any]) -> None:
    """An UpdateItem behind the library's back; ``#a`` in ``expression`` names the attribute."""
    names = {"#a": expression.split()[1]}
    raw_client(None).update_item(TableName=table, Key=key, UpdateExpression=expression.replace(names["#a"], "#a"),
                                 ExpressionAttributeNames=names, ExpressionAttributeValues=values)


def drifted_by_one(pk: str = POST) -> Key:
    """A post with 2 counted likes and 1 written around the library: stored 2, children 3."""
    key = post(pk)
    for user in range(2):
        like(user, pk).save()
    with skip_counting():
        like("around", pk).save()
    return key


@contextlib.contextmanager
def swapped(relation: Any, slot: str, function: Any) -> Iterator[None]:
    """Inside the block, ``relation``'s function held in ``slot`` (``"_when"``, ``"_parent_defaults"``...) is
    ``function``: swapped past the relation's guard (immutable once declared), and the specs compiled from it
    dropped, then put back."""
    original = getattr(relation, slot)
    object.__setattr__(relation, slot, function)
    forget_specs(relation.declared_on)
    try:
        yield
    finally:
        object.__setattr__(relation, slot, original)
        forget_specs(relation.declared_on)
