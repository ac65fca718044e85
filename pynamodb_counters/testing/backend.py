"""
:class:`Backend`: a DynamoDB for one test, with the tables of the given models created and dropped.

It only ever deletes tables it created itself: a table that already exists is refused with
:class:`ExistingTableError`, before anything is created, and left exactly as it was. Every model it points at the
test DynamoDB, and every other model sharing their ``Meta``, gets back exactly what it had.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Iterable, Iterator, List, Optional, Set, Tuple

from ..declare._spec import counters_of, feeders_of, relations_of

__all__ = ["Backend", "ExistingTableError", "related_models"]

_DUMMY_ENVIRONMENT = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                      "AWS_DEFAULT_REGION": "us-east-1"}

#: ``ResourceInUseException``: CreateTable of a table that exists (another run created it first).
_TABLE_IN_USE = "ResourceInUseException"

_ABSENT = object()

#: how the backend waits for a table to become active, or to be gone: every second, for two minutes at most
_WAITING = {"Delay": 1, "MaxAttempts": 120}

#: the ``Meta`` settings a PynamoDB connection is made from
_CONNECTION_SETTINGS = ("table_name", "region", "host", "connect_timeout_seconds", "read_timeout_seconds",
                        "max_retry_attempts", "max_pool_connections", "extra_headers", "aws_access_key_id",
                        "aws_secret_access_key", "aws_session_token")

#: connections kept between moto and served backends, by model and endpoint (``None``: moto in-process), with the
#: settings each was made from. Building a connection's botocore client costs about 0.1 s a model, which a suite
#: would otherwise pay in every test. Never kept for ``"endpoint"`` backends, whose credentials come from the
#: environment of the moment.
_KEPT_CONNECTIONS: Dict[Tuple[type, Optional[str]], Tuple[Tuple[Any, ...], Any]] = {}


def _settings(model: Any) -> Tuple[Any, ...]:
    return tuple(getattr(model.Meta, name, None) for name in _CONNECTION_SETTINGS)


class ExistingTableError(RuntimeError):
    """A table the backend would create already exists: it holds data the backend did not write, so the backend
    refuses to use it, and neither writes to it nor deletes it."""


def related_models(models: Iterable[type]) -> List[type]:
    """``models`` plus every model counted with them: the parents their relations count into and the children
    that feed their counters, transitively, in a stable order."""
    found: List[type] = []
    pending = list(models)
    while pending:
        model = pending.pop(0)
        if model in found:
            continue
        found.append(model)
        pending.extend(relation.parent_model for relation in relations_of(model))
        for counter in counters_of(model).values():
            pending.extend(relation.child_model for relation in feeders_of(counter))
    return found


def _all_models() -> Iterator[type]:
    """Every PynamoDB model class defined in the process, each once."""
    from pynamodb.models import Model

    seen: Set[type] = set()
    pending: List[type] = [Model]
    while pending:
        cls = pending.pop(0)
        for sub in cls.__subclasses__():
            if sub not in seen:
                seen.add(sub)
                pending.append(sub)
                yield sub


class _Changes:
    """Attributes set on classes, with what they were (a value, or absent), to put back in reverse order."""

    def __init__(self) -> None:
        self._saved: List[Tuple[Any, str, Any]] = []
        self._seen: Set[Tuple[int, str]] = set()

    def set(self, owner: Any, name: str, value: Any) -> None:
        """Set ``owner.name``, remembering the first value ``owner`` itself held (not one it inherits)."""
        if (id(owner), name) not in self._seen:
            self._seen.add((id(owner), name))
            self._saved.append((owner, name, owner.__dict__.get(name, _ABSENT)))
        setattr(owner, name, value)

    def undo(self) -> None:
        """Give every attribute back its first value, deleting those that were absent."""
        while self._saved:
            owner, name, value = self._saved.pop()
            if value is _ABSENT:
                if name in owner.__dict__:
                    delattr(owner, name)
            else:
                setattr(owner, name, value)
        self._seen.clear()


def _shares_meta(meta: Any, metas: List[Any]) -> bool:
    """Whether ``meta`` is one of ``metas``, or a class inheriting from one (it then sees their ``host``)."""
    return any(meta is other or (isinstance(meta, type) and isinstance(other, type) and issubclass(meta, other))
               for other in metas)


def _error_code(error: BaseException) -> Optional[str]:
    """The DynamoDB error code behind a PynamoDB exception, if any."""
    code = getattr(error, "cause_response_code", None)
    if code is None:  # PynamoDB releases without cause_response_code
        response = getattr(getattr(error, "cause", None), "response", None) or {}
        code = response.get("Error", {}).get("Code")
    return str(code) if code is not None else None


def _create_table(model: Any, wait: bool) -> None:
    """CreateTable for ``model``, on demand, then (``wait``) wait until it is active. Unlike
    ``Model.create_table()``, which quietly does nothing when the table exists, this raises ``TableError``
    (``ResourceInUseException``)."""
    schema = model._get_schema()
    kwargs: Dict[str, Any] = {name: schema[name] for name in ("attribute_definitions", "key_schema",
                                                              "global_secondary_indexes",
                                                              "local_secondary_indexes") if schema.get(name)}
    if hasattr(model.Meta, "stream_view_type"):
        kwargs["stream_specification"] = {"stream_enabled": True, "stream_view_type": model.Meta.stream_view_type}
    if hasattr(model.Meta, "tags"):
        kwargs["tags"] = model.Meta.tags
    connection = model._get_connection()
    connection.create_table(billing_mode="PAY_PER_REQUEST", **kwargs)
    if wait:
        connection.connection.client.get_waiter("table_exists").wait(TableName=model.Meta.table_name,
                                                                     WaiterConfig=_WAITING)
    model.update_ttl(ignore_update_ttl_errors=False)


class Backend:
    """Points models at a DynamoDB and gives them fresh tables; undoes both on exit.

    Each table is created by the backend and deleted on exit; a table that already exists is refused with
    :class:`ExistingTableError` (before anything is created) and never written to or deleted. On exit, the
    ``Meta.host`` of every model pointed, and the cached connection (``_connection``) of every model sharing
    their ``Meta`` classes (polymorphic subclasses included), are put back exactly as they were, including
    "absent"; so are the environment variables it set.

    A moto or served backend gives each model a connection for the test and keeps it for the next backend
    pointing that model at the same engine, unless the test replaced it or changed the ``Meta`` settings it was
    made from: a new connection builds its botocore client (about 0.1 s) on first use.

    :param kind: ``"moto"`` (moto in-process), ``"served"`` (a moto server, ``endpoint_url`` given) or
      ``"endpoint"`` (any DynamoDB endpoint).
    :param models: the models to point; every model counted with them is included.
    :param endpoint_url: the endpoint, for ``"served"`` and ``"endpoint"``.
    """

    def __init__(self, kind: str, models: Iterable[type], endpoint_url: Optional[str] = None) -> None:
        if kind not in ("moto", "served", "endpoint"):
            raise ValueError(f"unknown backend kind {kind!r}")
        if kind != "moto" and not endpoint_url:
            raise ValueError(f"a {kind} backend needs an endpoint URL")
        self.kind = kind
        self.endpoint_url = endpoint_url if kind != "moto" else None
        self.models = related_models(models)
        #: the tables this backend created, which are the only ones it deletes
        self.created: List[str] = []
        self._changes = _Changes()
        self._environment: Dict[str, Optional[str]] = {}
        self._mock: Any = None
        #: the settings and connection given to each model (moto and served backends)
        self._given: Dict[type, Tuple[Tuple[Any, ...], Any]] = {}

    def __enter__(self) -> Backend:
        try:
            self._start_engine()
            self._point_models()
            self._create_tables()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self._drop_created_tables()
        finally:
            self._keep_connections()
            self._changes.undo()
            self._stop_engine()

    def table_models(self) -> List[type]:
        """One model per distinct table, to create or delete it."""
        seen: Set[str] = set()
        chosen = []
        for model in self.models:
            table = model.Meta.table_name  # type: ignore[attr-defined]
            if table not in seen:
                seen.add(table)
                chosen.append(model)
        return chosen

    def touched_models(self) -> List[type]:
        """Every model whose settings the backend changes: those it points, and every model whose ``Meta`` is one
        of theirs (a polymorphic model's subclasses share it) or inherits from one, in a stable order."""
        metas = [model.Meta for model in self.models]  # type: ignore[attr-defined]
        sharing = [model for model in _all_models()
                   if model not in self.models and _shares_meta(getattr(model, "Meta", None), metas)]
        return self.models + sharing

    def _start_engine(self) -> None:
        if self.kind != "endpoint":  # never send dummy credentials to a real endpoint
            for name, value in _DUMMY_ENVIRONMENT.items():
                self._environment[name] = os.environ.get(name)
                os.environ.setdefault(name, value)
        if self.kind == "moto":
            try:
                from moto import mock_aws
            except ImportError as error:  # pragma: no cover - depends on the installation
                raise RuntimeError('the moto backend needs moto: pip install "pynamodb-counters[moto]"') from error
            self._mock = mock_aws()
            self._mock.start()

    def _stop_engine(self) -> None:
        if self._mock is not None:
            self._mock.stop()
            self._mock = None
        for name, value in self._environment.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._environment.clear()

    def _point_models(self) -> None:
        for model in self.touched_models():
            self._changes.set(model.Meta, "host", self.endpoint_url)  # type: ignore[attr-defined]
            self._changes.set(model, "_connection", None)  # PynamoDB caches one connection per model class
        if self.kind != "endpoint":
            self._give_kept_connections()

    def _give_kept_connections(self) -> None:
        """Give each model the connection kept for it at this endpoint if its settings are still the same, or a new
        one, and note which one it is: only that one, unreplaced, is kept for the next backend."""
        for model in self.touched_models():
            if getattr(model.Meta, "table_name", None) is None:  # type: ignore[attr-defined]
                continue  # an abstract model: PynamoDB makes no connection for it
            settings = _settings(model)
            settings_and_connection = _KEPT_CONNECTIONS.get((model, self.endpoint_url))
            if settings_and_connection is not None and settings_and_connection[0] == settings:
                self._changes.set(model, "_connection", settings_and_connection[1])
            self._given[model] = (settings, model._get_connection())  # type: ignore[attr-defined]

    def _keep_connections(self) -> None:
        """Keep the connection each model was given, unless the test replaced it or changed the settings it was
        made from."""
        for model, (settings, connection) in self._given.items():
            if model.__dict__.get("_connection") is connection and _settings(model) == settings:
                _KEPT_CONNECTIONS[(model, self.endpoint_url)] = (settings, connection)
            else:
                _KEPT_CONNECTIONS.pop((model, self.endpoint_url), None)
        self._given.clear()

    @property
    def _waits(self) -> bool:
        """Whether table creations and deletions are waited for: moto (in-process or served) creates a table
        active and deletes it at once, so only a real endpoint needs the waiters."""
        return self.kind == "endpoint"

    def _where(self) -> str:
        return self.endpoint_url or "moto in-process"

    def _refuse(self, table: str) -> ExistingTableError:
        return ExistingTableError(
            f"table {table} already exists at {self._where()}: the test backend (counters_backend) only uses "
            f"tables it creates, and deletes only those, so it leaves this one and its items as they are. "
            f"Delete it yourself if it is a leftover, or give the test other table names or another endpoint "
            f"(another test run may be using it)")

    def _create_tables(self) -> None:
        """Create every table, after checking that none exists; a table that appears meanwhile is refused."""
        from pynamodb.exceptions import TableError

        models = self.table_models()
        existing = self._existing_tables(models)
        for model in models:
            if model.Meta.table_name in existing:  # type: ignore[attr-defined]
                raise self._refuse(model.Meta.table_name)  # type: ignore[attr-defined]
        for model in models:
            table = model.Meta.table_name  # type: ignore[attr-defined]
            try:
                _create_table(model, wait=self._waits)
            except TableError as error:
                if _error_code(error) == _TABLE_IN_USE:
                    raise self._refuse(table) from error
                raise
            self.created.append(table)

    def _existing_tables(self, models: List[type]) -> Set[str]:
        """Which of the ``models``' tables exist already. An in-process moto this backend alone started has none
        (starting it wiped moto's state); moto otherwise (nested in a user's ``mock_aws``, or served) lists its
        tables in one ListTables; a real endpoint is asked with a DescribeTable per table (``Model.exists()``),
        which needs no permission to list every table of the account."""
        if self._owns_engine():
            return set()
        if self.kind == "endpoint" or not models:
            return {model.Meta.table_name for model in models if model.exists()}  # type: ignore[attr-defined]
        connection = models[0]._get_connection().connection  # type: ignore[attr-defined]
        names: Set[str] = set()
        start: Optional[str] = None
        while True:
            page = connection.list_tables(exclusive_start_table_name=start)
            names.update(page.get("TableNames", []))
            start = page.get("LastEvaluatedTableName")
            if not start:
                return names

    def _owns_engine(self) -> bool:
        """Whether the ``mock_aws`` this backend started is the only one active: stopping it then wipes every
        table moto holds, those this backend created among them. Nested in a user's own ``mock_aws`` (or on a
        moto release without the nesting count), the tables it created are dropped one by one instead."""
        return self._mock is not None and getattr(type(self._mock), "_nested_count", None) == 1

    def _drop_created_tables(self) -> None:
        """Delete the tables this backend created (and only those), waiting until each is gone. An in-process
        moto that the backend alone started needs no DeleteTable: stopping it wipes them."""
        if self._owns_engine():
            self.created.clear()
            return
        by_table = {model.Meta.table_name: model for model in self.table_models()}  # type: ignore[attr-defined]
        while self.created:
            table = self.created.pop()
            model = by_table[table]
            model.delete_table()  # type: ignore[attr-defined]
            if self._waits:
                client = model._get_connection().connection.client  # type: ignore[attr-defined]
                client.get_waiter("table_not_exists").wait(TableName=table, WaiterConfig=_WAITING)
