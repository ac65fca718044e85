"""A new child's Put is built once per shape through PynamoDB and then made for each next child from its own
serialized item (``_actions.put_request``): every request made so must be the very request PynamoDB builds for
that child (``get_save_kwargs_from_instance`` with ``attribute_not_exists`` on its hash key and ``ALL_OLD``):
the same item, attribute for attribute and in the same order, nulls, defaults and the version attribute as
PynamoDB serializes them, the same condition, names and values."""
from __future__ import annotations

import inspect
import json
from typing import Any, Dict, List, Optional

import pytest
from pynamodb.attributes import (
    BinaryAttribute,
    BinarySetAttribute,
    BooleanAttribute,
    ListAttribute,
    MapAttribute,
    NumberAttribute,
    NumberSetAttribute,
    UnicodeAttribute,
    UnicodeSetAttribute,
    VersionAttribute,
)
from pynamodb.constants import ALL_OLD
from pynamodb.models import Model

from pynamodb_counters import CounterField, CounterMixin, counted_by
from pynamodb_counters.declare._spec import spec_of
from pynamodb_counters.write import _actions
from tests.support.models import REGION, Card, Edit, Like, Message

# PynamoDB 6 asks binary attributes how to encode; PynamoDB 5 has one encoding. (Never import
# tests.support.apps.keyed_models for this: its models would share tables with the CLI tests' copies of them.)
BINARY = {"legacy_encoding": False} if "legacy_encoding" in inspect.signature(BinaryAttribute).parameters else {}

class Address(MapAttribute[str, Any]):
    city = UnicodeAttribute()
    zip_code = UnicodeAttribute(null=True, attr_name="zip")


class Holder(CounterMixin, Model):
    """This file's own parent: the suite's other parents' audits never meet its children."""

    class Meta:
        table_name = "Holders"
        region = REGION

    holder_id = UnicodeAttribute(hash_key=True)
    badges = CounterField()
    stamps = CounterField()


class Badge(CounterMixin, Model):
    """A child keyed by bytes, with sets, maps, lists, defaults and attributes renamed."""

    class Meta:
        table_name = "Badges"
        region = REGION

    owner = BinaryAttribute(hash_key=True, **BINARY)
    serial = BinaryAttribute(range_key=True, **BINARY)
    user_id = UnicodeAttribute(attr_name="uid")
    tags = UnicodeSetAttribute(null=True)
    scores = NumberSetAttribute(null=True)
    blobs = BinarySetAttribute(null=True, **BINARY)
    address = Address(null=True)
    extra = MapAttribute(null=True)  # type: ignore[var-annotated]
    history = ListAttribute(null=True)  # type: ignore[var-annotated]
    level = NumberAttribute(default=3)
    label = UnicodeAttribute(default=lambda: "new")
    shown = BooleanAttribute(default=False)
    note = UnicodeAttribute(null=True)
    user = counted_by(Holder.badges, key=lambda badge: badge.user_id)


class Stamp(CounterMixin, Model):
    """A hash-only child with optimistic locking."""

    class Meta:
        table_name = "Stamps"
        region = REGION

    stamp_id = UnicodeAttribute(hash_key=True)
    user_id = UnicodeAttribute()
    version = VersionAttribute()
    user = counted_by(Holder.stamps, key=lambda stamp: stamp.user_id)


def pynamodb_put(instance: Model, given: Any = None) -> Dict[str, Any]:
    """The Put PynamoDB builds for ``instance``, as a counted save asks it to."""
    absent = spec_of(type(instance)).keys[0].does_not_exist()
    request: Dict[str, Any] = _actions.pynamodb_view(instance).get_save_kwargs_from_instance(
        condition=absent if given is None else absent & given, return_values_on_condition_failure=ALL_OLD)
    return request


def ordered(request: Dict[str, Any]) -> str:
    """The request as botocore sends it, in its order: two requests equal so are the same bytes."""
    return json.dumps(request, default=repr)


def made(instance: Model, given: Any = None) -> Dict[str, Any]:
    return _actions.put_request(instance, spec_of(type(instance)), given)


def badges(n: int) -> List[Badge]:
    return [
        Badge(owner=b"\x00\xff" + bytes([n]), serial=b"s%d" % n, user_id=f"u{n}"),
        Badge(owner=b"o%d" % n, serial=b"\x01", user_id="u", tags={"a", "b"}, scores={1, 2.5}, blobs={b"\x00"},
              address=Address(city="Oslo"), extra={"k": [1, {"x": None}]}, history=["a", 2],
              level=n, label="set", shown=True, note=""),
        Badge(owner=b"p%d" % n, serial=b"\x02", user_id="v", address=Address(city="Rome", zip_code="00100"),
              tags=set(), history=[]),
    ]


def shapes(n: int) -> List[Model]:
    """Children of every shape: string, numeric and binary keys, hash-only, a polymorphic subclass (its
    discriminator), defaults, sets and maps, nulls and the version attribute, unset and set."""
    return [
        Like(pk=f"POST#{n}", sk="LIKE#USER#a", liked_at=n),
        Card(pk=f"BOARD#{n}", sk=f"CARD#{n}"),
        Message(pk=f"MSG#{n}", sk="MSG", thread_id=f"THREAD#{n}"),  # its status and words by default
        Message(pk=f"MSG#{n}", sk="MSG", thread_id=f"THREAD#{n}", status="published", words=n),
        Edit(doc_id=f"doc{n}", seq=n),
        Edit(doc_id=f"doc{n}", seq=n, version=n + 1),
        Stamp(stamp_id=f"s{n}", user_id="u"),
        Stamp(stamp_id=f"s{n}", user_id="u", version=n),
        *badges(n),
    ]


@pytest.fixture(autouse=True)
def forget_puts() -> Any:
    def forget() -> None:
        for model in (Like, Card, Message, Edit, Stamp, Badge):
            held = spec_of(model).requests
            for shape in [shape for shape in held if _actions.is_put_shape(shape)]:
                del held[shape]
    forget()
    yield
    forget()


@pytest.mark.parametrize("index", range(len(shapes(0))))
def test_a_put_made_from_its_shape_is_pynamodbs(index: int) -> None:
    for n in range(4):  # the first built through PynamoDB, the next made from the shape it left
        instance = shapes(n)[index]
        expected = pynamodb_put(instance)
        request = made(instance)
        assert request == expected
        assert ordered(request) == ordered(expected)
        assert request["Item"] is not expected["Item"]


def test_a_shape_is_held_once_and_made_again() -> None:
    first, second = Like(pk="POST#1", sk="LIKE#a", liked_at=1), Like(pk="POST#2", sk="LIKE#b", liked_at=2)
    made(first)
    held = [shape for shape in spec_of(Like).requests if _actions.is_put_shape(shape)]
    assert len(held) == 1
    request = made(second)
    assert [shape for shape in spec_of(Like).requests if _actions.is_put_shape(shape)] == held
    assert request["Item"] == {"pk": {"S": "POST#2"}, "sk": {"S": "LIKE#b"}, "liked_at": {"N": "2"}}
    again = made(second)
    assert again == request and again["Item"] is not request["Item"]


def test_a_callers_condition_is_pynamodbs() -> None:
    for n in range(3):
        like = Like(pk=f"POST#{n}", sk="LIKE#a", liked_at=n)
        given = (Like.liked_at < n + 10) & Like.sk.startswith("LIKE#")
        assert ordered(made(like, given)) == ordered(pynamodb_put(like, given))


def test_a_table_renamed_at_run_time_is_followed() -> None:
    like = Like(pk="POST#1", sk="LIKE#a", liked_at=1)
    made(like)
    old = Like.Meta.table_name
    Like.Meta.table_name = "Renamed"
    try:
        assert made(like) == pynamodb_put(like)
        assert made(like)["TableName"] == "Renamed"
    finally:
        Like.Meta.table_name = old
    assert made(like)["TableName"] == old


def test_a_null_refused_as_pynamodb_refuses_it() -> None:
    made(Badge(owner=b"o", serial=b"s", user_id="u"))  # the shape held
    missing = Badge(owner=b"o", serial=b"s")  # user_id is not nullable
    with pytest.raises(ValueError) as pynamodb:
        pynamodb_put(missing)
    with pytest.raises(ValueError) as ours:
        made(missing)
    assert str(ours.value) == str(pynamodb.value)


def test_a_model_overriding_pynamodbs_save_args_is_built_by_pynamodb() -> None:
    calls: List[Optional[Any]] = []

    class Traced(Stamp):
        def _get_save_args(self, *args: Any, **kwargs: Any) -> Any:  # PynamoDB 5 and 6 differ in its arguments
            calls.append(kwargs.get("condition", args[-1] if args else None))
            return super()._get_save_args(*args, **kwargs)

    for n in range(3):
        stamp = Traced(stamp_id=f"t{n}", user_id="u")
        assert made(stamp) == pynamodb_put(stamp)
    assert len(calls) == 6
