"""The mixin on a model that counts nothing (no counters, no relations): PynamoDB's behaviour, unchanged, for
every model PynamoDB allows (``../shared/peer/run`` injects the mixin into PynamoDB's own suite)."""
from __future__ import annotations

from typing import Any

import pytest
from pynamodb.attributes import MapAttribute, NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_counters import CounterMixin
from tests.support.models import REGION


class Profile(CounterMixin, Model):
    """No key at all: PynamoDB lets a model that is never stored be built and loaded (a MapAttribute's host)."""

    class Meta:
        table_name = "Profiles"
        region = "us-east-1"

    name = UnicodeAttribute(null=True)
    extra = MapAttribute(null=True)  # type: ignore[var-annotated]


def test_a_model_without_a_key_is_loaded_as_pynamodb_loads_it() -> None:
    item = {"name": {"S": "ada"}, "extra": {"M": {"city": {"S": "London"}}}}
    loaded = Profile.from_raw_data(dict(item))
    profile = Profile()
    profile.deserialize(dict(item))
    assert loaded.name == profile.name == "ada"
    assert loaded.extra.as_dict() == profile.extra.as_dict() == {"city": "London"}


# -- counting options and update()'s own type errors, as PynamoDB raises them ---------------------------------------
class Plain(CounterMixin, Model):
    class Meta:
        table_name = "Plain"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)
    n = NumberAttribute(null=True)


class Bare(Model):
    class Meta:
        table_name = "Plain"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)
    n = NumberAttribute(null=True)


@pytest.fixture
def plain_table(dynamodb: None) -> None:
    Plain.create_table(billing_mode="PAY_PER_REQUEST")


def _error_of(call: Any) -> str:
    with pytest.raises(TypeError) as raised:
        call()
    return str(raised.value)


@pytest.mark.parametrize("keyword", ["token", "retry", "ignore_duplicate"])
def test_save_rejects_counting_options_on_a_plain_model(plain_table: None, keyword: str) -> None:
    message = _error_of(lambda: Plain(pk="a").save(**{keyword: "x"}))
    assert keyword in message
    with pytest.raises(Plain.DoesNotExist):
        Plain.get("a")


@pytest.mark.parametrize("keyword", ["token", "retry", "ignore_missing"])
def test_delete_rejects_counting_options_on_a_plain_model(plain_table: None, keyword: str) -> None:
    Plain(pk="a").save()
    assert keyword in _error_of(lambda: Plain(pk="a").delete(**{keyword: "x"}))
    assert Plain.get("a")


def test_update_with_a_non_list_raises_pynamodbs_own_type_error(plain_table: None) -> None:
    Plain(pk="a").save()
    Bare(pk="b").save()
    expected = _error_of(lambda: Bare.get("b").update(actions={"not": "a list"}))  # type: ignore[arg-type]
    assert _error_of(lambda: Plain.get("a").update(actions={"not": "a list"})) == expected  # type: ignore
    assert _error_of(lambda: Plain.get("a").update(actions=[])) == expected
