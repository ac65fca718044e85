"""The mixin on a model that counts nothing (no counters, no relations): PynamoDB's behaviour, unchanged, for
every model PynamoDB allows (``../shared/peer/run`` injects the mixin into PynamoDB's own suite)."""
from __future__ import annotations

from pynamodb.attributes import MapAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_counters import CounterMixin


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
