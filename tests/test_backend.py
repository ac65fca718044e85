"""The shipped test backend (:class:`pynamodb_counters.testing.Backend`, the plugin's ``counters_backend``) never
destroys data it did not write: it uses only the tables it creates, refuses a table that already exists (a user's,
or one a concurrent run created) and keeps its items, in every mode; and it restores every model it touched exactly,
models sharing one ``Meta`` included.

The plugin's runs are user suites run by pytester in a subprocess, on ``tests/support/apps/plugin_models.py``.
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, List, Tuple

import boto3
import pytest
from moto import mock_aws
from pynamodb.attributes import DiscriminatorAttribute, NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_counters import CounterField, CounterMixin, counted_by
from pynamodb_counters.testing import Backend, ExistingTableError
from pynamodb_counters.testing.server import ServedMoto
from tests.support.app_package import source

pytest_plugins = ["pytester"]


# -- the backend and the plugin delete only the tables they created -------------------------------------------------
ONE_TEST = '''
from app_models import Like, Post


def test_a_like(counters_backend):
    Post(pk="POST#1", sk="META").save()
    Like(pk="POST#1", sk="LIKE#USER#a", liked_at=1).save()
    assert Post.get("POST#1", "META", consistent_read=True).like_tally == 1
'''

TABLE = "PluginSocial"  # the table of plugin_models.py


def client_for(endpoint_url: str) -> Any:
    return boto3.client("dynamodb", region_name="us-east-1", endpoint_url=endpoint_url,
                        aws_access_key_id="testing", aws_secret_access_key="testing")


def create_table(client: Any, name: str = TABLE, keys: Tuple[str, ...] = ("pk", "sk")) -> None:
    schema = [{"AttributeName": keys[0], "KeyType": "HASH"}]
    schema += [{"AttributeName": key, "KeyType": "RANGE"} for key in keys[1:]]
    client.create_table(TableName=name, KeySchema=schema, BillingMode="PAY_PER_REQUEST",
                        AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"} for key in keys])


def put_six_items(client: Any, name: str = TABLE, keys: Tuple[str, ...] = ("pk", "sk")) -> None:
    for n in range(6):
        item = {key: {"S": f"USERDATA#{n}"} for key in keys}
        item["note"] = {"S": "not written by the plugin"}
        client.put_item(TableName=name, Item=item)


def items(client: Any, name: str = TABLE) -> List[Dict[str, Any]]:
    return list(client.scan(TableName=name, ConsistentRead=True)["Items"])


@pytest.fixture
def endpoint(served_engine: ServedMoto) -> Iterator[str]:
    """The suite's served engine, empty before and after the test, as a DynamoDB endpoint of the user's."""
    served_engine.reset()
    yield served_engine.endpoint_url
    served_engine.reset()


def run_inner(pytester: pytest.Pytester, endpoint: str, tests: str = ONE_TEST) -> pytest.RunResult:
    pytester.makepyfile(app_models=source("plugin_models"))
    pytester.makeconftest(source("plugin_conftest"))
    pytester.makepyfile(test_app=tests)
    return pytester.runpytest_subprocess(f"--counters-endpoint={endpoint}", "-p", "no:cacheprovider")


@pytest.mark.slow
def test_the_plugin_keeps_a_preexisting_table(pytester: pytest.Pytester, endpoint: str) -> None:
    client = client_for(endpoint)
    create_table(client)
    put_six_items(client)
    result = run_inner(pytester, endpoint)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*ExistingTableError: table PluginSocial already exists at http://127.0.0.1:*"
                                 "*only uses tables it creates*"])
    assert TABLE in client.list_tables()["TableNames"]
    stored = items(client)
    assert len(stored) == 6
    assert all(item["note"] == {"S": "not written by the plugin"} for item in stored)


@pytest.mark.slow
def test_the_plugin_deletes_the_tables_it_created_and_nothing_else(pytester: pytest.Pytester,
                                                                   endpoint: str) -> None:
    client = client_for(endpoint)
    create_table(client, "UsersOwnTable")
    put_six_items(client, "UsersOwnTable")
    result = run_inner(pytester, endpoint, ONE_TEST + ONE_TEST.replace("test_a_like", "test_again"))
    result.assert_outcomes(passed=2)  # the second test got a fresh table again
    assert client.list_tables()["TableNames"] == ["UsersOwnTable"]
    assert len(items(client, "UsersOwnTable")) == 6


def test_a_table_with_another_key_schema_is_refused(pytester: pytest.Pytester, endpoint: str) -> None:
    client = client_for(endpoint)
    create_table(client, keys=("id",))
    put_six_items(client, keys=("id",))
    result = run_inner(pytester, endpoint)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*ExistingTableError: table PluginSocial already exists*"])
    assert client.describe_table(TableName=TABLE)["Table"]["KeySchema"] == [{"AttributeName": "id",
                                                                             "KeyType": "HASH"}]
    assert len(items(client)) == 6


def test_a_table_created_by_a_concurrent_run_is_not_deleted(endpoint: str, monkeypatch: pytest.MonkeyPatch,
                                                             ) -> None:
    """Another run creates the table between this run's check and its CreateTable: refused, nothing deleted."""
    client = client_for(endpoint)
    real_exists = Album.exists

    def exists_then_lose_the_race() -> bool:
        found = real_exists()
        if not found:
            create_table(client, "BackendAlbums", keys=("pk",))
            put_six_items(client, "BackendAlbums", keys=("pk",))
        return found

    monkeypatch.setattr(Album, "exists", exists_then_lose_the_race)
    with pytest.raises(ExistingTableError, match="table BackendAlbums already exists"):
        with Backend("endpoint", [Album], endpoint):
            pytest.fail("the backend must refuse")  # pragma: no cover
    assert sorted(client.list_tables()["TableNames"]) == ["BackendAlbums"]  # BackendEntries, created first, dropped
    assert len(items(client, "BackendAlbums")) == 6


def test_in_process_mode_keeps_a_users_own_mock_tables() -> None:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, "BackendAlbums", keys=("pk",))
        put_six_items(client, "BackendAlbums", keys=("pk",))
        with pytest.raises(ExistingTableError, match="table BackendAlbums already exists"):
            with Backend("moto", [Album]):
                pytest.fail("the backend must refuse")  # pragma: no cover
        assert client.list_tables()["TableNames"] == ["BackendAlbums"]
        assert len(items(client, "BackendAlbums")) == 6


def test_in_process_mode_nested_in_a_users_mock_drops_its_own_tables_and_keeps_the_users() -> None:
    """Nested in a user's ``mock_aws``, stopping the backend's mock wipes nothing: it deletes its tables itself."""
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, "UsersOwnTable", keys=("pk",))
        put_six_items(client, "UsersOwnTable", keys=("pk",))
        with Backend("moto", [Album]) as backend:
            Album(pk="A1").save()
            assert sorted(client.list_tables()["TableNames"]) == sorted([*backend.created, "UsersOwnTable"])
        assert client.list_tables()["TableNames"] == ["UsersOwnTable"]
        assert len(items(client, "UsersOwnTable")) == 6


def test_in_process_mode_alone_leaves_no_table_behind() -> None:
    """The backend's own ``mock_aws``, the only one active, wipes moto's tables when it stops (the backend then
    sends no DeleteTable): a later mock that keeps moto's state finds none of them."""
    with Backend("moto", [Album]) as backend:
        Album(pk="A1").save()
        assert "BackendAlbums" in backend.created
    keeping = mock_aws()
    keeping.start(reset=False)  # moto's state as the backend left it
    try:
        assert boto3.client("dynamodb", region_name="us-east-1").list_tables()["TableNames"] == []
    finally:
        keeping.stop()


SERVED_WITH_USERS_MOCK = '''
import boto3
import pytest
from moto import mock_aws

from app_models import Post


@pytest.fixture
def users_mock():
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(TableName="UsersOwn", KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
                            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
                            BillingMode="PAY_PER_REQUEST")
        for n in range(6):
            client.put_item(TableName="UsersOwn", Item={"id": {"S": str(n)}})
        yield client
        assert client.scan(TableName="UsersOwn")["Count"] == 6


@pytest.mark.counters_served
def test_served_beside_a_users_mock(users_mock, counters_backend):
    Post(pk="POST#1", sk="META").save()
    assert users_mock.scan(TableName="UsersOwn")["Count"] == 6
'''


@pytest.mark.slow
def test_served_mode_keeps_a_users_own_mock_tables(pytester: pytest.Pytester) -> None:
    """moto's state is process-wide: the served engine sees a user's ``mock_aws`` tables; it must leave them."""
    pytester.makepyfile(app_models=source("plugin_models"))
    pytester.makeconftest(source("plugin_conftest"))
    pytester.makepyfile(test_app=SERVED_WITH_USERS_MOCK)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


# -- every model the backend touched is restored exactly ------------------------------------------------------------
ORIGINAL_HOST = "http://original.invalid:8000"


class SharedSettings:
    """A Meta base: ``Album.Meta`` inherits its host, so ``host`` is absent from ``Album.Meta`` itself."""

    host = ORIGINAL_HOST
    region = "us-east-1"


class Album(CounterMixin, Model):
    class Meta(SharedSettings):
        table_name = "BackendAlbums"

    pk = UnicodeAttribute(hash_key=True)
    photo_count = CounterField()
    clip_count = CounterField()


class Entry(CounterMixin, Model):
    """Polymorphic: every subclass shares this one ``Meta``."""

    class Meta:
        table_name = "BackendEntries"
        region = "us-east-1"
        host = ORIGINAL_HOST

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    kind = DiscriminatorAttribute()


class Photo(Entry, discriminator="photo"):
    album = counted_by(Album.photo_count, key=lambda photo: photo.pk, prefix="PHOTO#")


class Clip(Entry, discriminator="clip"):
    album = counted_by(Album.clip_count, key=lambda clip: clip.pk, prefix="CLIP#")
    seconds = NumberAttribute(default=0)


class Note(Entry, discriminator="note"):
    """Shares ``Entry.Meta`` but is counted nowhere: the backend never listed it."""


class Archive(Model):
    """Not counted; its ``Meta`` inherits ``Entry.Meta``'s host, so it follows wherever the backend points that."""

    class Meta(Entry.Meta):
        table_name = "BackendArchive"

    pk = UnicodeAttribute(hash_key=True)


TOUCHED_MODELS = (Album, Entry, Photo, Clip, Note, Archive)
_ABSENT = object()


def state(model: type) -> Dict[str, Any]:
    """What the backend may change on a model: its ``Meta``'s own attributes and its own cached connection."""
    meta: Any = model.Meta  # type: ignore[attr-defined]
    own = {name: meta.__dict__.get(name, _ABSENT) for name in ("host", "region", "aws_access_key_id",
                                                                "aws_secret_access_key", "aws_session_token")}
    return {"meta": meta, **own, "_connection": model.__dict__.get("_connection", _ABSENT)}


def test_the_backend_restores_models_sharing_one_meta() -> None:
    Photo._get_connection()  # Photo holds a cached connection to the original host; the others hold none
    before = {model: state(model) for model in TOUCHED_MODELS}
    assert before[Entry]["meta"] is before[Photo]["meta"] is before[Note]["meta"]
    assert before[Album]["host"] is _ABSENT and before[Archive]["host"] is _ABSENT
    assert before[Note]["_connection"] is _ABSENT
    with Backend("moto", [Album]) as backend:
        assert set(backend.models) >= {Album, Photo, Clip}
        for model in TOUCHED_MODELS:
            assert model.Meta.host is None  # type: ignore[attr-defined]
            assert model._get_connection().connection.host is None  # type: ignore[attr-defined]
        Album(pk="A1").save()
        Photo(pk="A1", sk="PHOTO#1").save()
        Note(pk="A1", sk="NOTE#1").save()  # caches a connection to the test host on Note
        assert Archive.exists() is False  # caches one on Archive too
        assert Album.get("A1").photo_count == 1
    after = {model: state(model) for model in TOUCHED_MODELS}
    assert after == before
    assert Entry.Meta.host == Album.Meta.host == Archive.Meta.host == ORIGINAL_HOST
    assert Photo._get_connection().connection.host == ORIGINAL_HOST


def test_the_backend_restores_models_when_it_refuses() -> None:
    before = {model: state(model) for model in TOUCHED_MODELS}
    with mock_aws():
        create_table(boto3.client("dynamodb", region_name="us-east-1"), "BackendEntries", keys=("pk", "sk"))
        with pytest.raises(ExistingTableError):
            Backend("moto", [Album]).__enter__()
    assert {model: state(model) for model in TOUCHED_MODELS} == before


def test_the_backend_keeps_a_models_connection_for_the_next_test_unless_the_test_replaced_it_or_its_settings(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A new connection builds a botocore client on first use (about 0.1 s a model): the moto backend keeps the one
    it gave, but never one a test made itself, nor one made from settings the test changed."""
    with Backend("moto", [Album]):
        given = Album._get_connection()
        Album(pk="A1").save()  # builds the client
    with Backend("moto", [Album]):
        assert Album._get_connection() is given
        Album._connection = None  # the test makes its own connection
        own = Album._get_connection()
    with Backend("moto", [Album]):
        fresh = Album._get_connection()
        assert fresh is not given and fresh is not own
    monkeypatch.setattr(Album.Meta, "read_timeout_seconds", 7, raising=False)
    with Backend("moto", [Album]):
        assert Album._get_connection() is not fresh  # made from other settings
        assert Album._get_connection().connection.host is None
