"""
The pytest plugin (entry point ``pytest11``): DynamoDB for your own tests of counted models.

Two lines of ``conftest.py`` give every test the fixtures below, with your models' tables created for the test and
dropped after it (only tables it created are ever dropped: an existing table is refused, and left as it is)::

    from myapp.models import Like, Post
    counters_models = pytest.fixture(lambda: [Post, Like])

(or list them in ``pytest.ini``: ``counters_models = myapp.models:Post myapp.models:Like``).

Fixtures:

* ``counters_backend``: a fresh DynamoDB for one test. moto in-process by default; the served, serialised moto
  engine (a moto server on 127.0.0.1 answering one request at a time) for tests marked
  ``@pytest.mark.counters_served``, for ``async def`` tests (the async twins send through aiobotocore, which
  moto in-process does not serve), or for every test run with ``--counters-backend=served``, which is what tests
  that write from several threads need; or a real endpoint with ``--counters-endpoint=URL``.
* ``counters_signals``: records every signal the library sends during the test.
* ``assert_counters_exact``: :func:`pynamodb_counters.testing.assert_counters_exact`, which audits every counter
  of the given models and fails with the drifts it finds.
* ``counters_stream``: :class:`pynamodb_counters.testing.StreamReader`, on the test's DynamoDB: ``stream =
  counters_stream(Like)``, then ``count_stream(stream.pending(), models=[Like])`` delivers the records written since
  the last delivery, as a Lambda on the table's stream receives them.
"""
from __future__ import annotations

import importlib
import inspect
from typing import Any, Callable, Iterator, List, Optional

import pytest

from .testing import Backend, SignalCapture, StreamReader, assert_counters_exact, served_engine

__all__ = ["pytest_addoption", "pytest_configure"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pynamodb-counters")
    group.addoption("--counters-backend", choices=("moto", "served"), default=None,
                    help="DynamoDB for counters_backend: moto in-process (default) or the served moto engine")
    group.addoption("--counters-endpoint", default=None, metavar="URL",
                    help="use this DynamoDB endpoint for counters_backend (each test's tables are created, then "
                         "deleted; a table that already exists is refused, never deleted)")
    parser.addini("counters_models", type="args", default=[],
                  help="MODULE:Model for every model whose table counters_backend creates")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "counters_served: give counters_backend the served, serialised moto engine "
                                       "(for tests that write from several threads)")


@pytest.fixture
def counters_models(request: pytest.FixtureRequest) -> List[type]:
    """The models whose tables ``counters_backend`` creates: override this fixture, or set the
    ``counters_models`` ini option."""
    models = []
    for spec in request.config.getini("counters_models"):
        module, _, name = str(spec).partition(":")
        models.append(getattr(importlib.import_module(module), name))
    return models


@pytest.fixture
def counters_backend(request: pytest.FixtureRequest, counters_models: List[type]) -> Iterator[Backend]:
    """A DynamoDB with the tables of ``counters_models``, created for this test and deleted after it; fails with
    :class:`~pynamodb_counters.testing.ExistingTableError` if one of them already exists (which it leaves as is)."""
    endpoint: Optional[str] = request.config.getoption("--counters-endpoint")
    kind = "endpoint" if endpoint else request.config.getoption("--counters-backend") or "moto"
    served = request.node.get_closest_marker("counters_served") is not None \
        or inspect.iscoroutinefunction(getattr(request, "function", None))  # aiobotocore needs a server
    if served and not endpoint:
        kind = "served"
    if kind == "served":
        endpoint = request.getfixturevalue("_counters_served_engine").endpoint_url
    with Backend(kind, counters_models, endpoint) as backend:
        yield backend


@pytest.fixture(scope="session")
def _counters_served_engine() -> Iterator[Any]:
    with served_engine() as engine:
        yield engine


@pytest.fixture
def counters_signals() -> Iterator[SignalCapture]:
    """Every pynamodb-counters signal sent during the test, by name: ``counters_signals.child_added`` is a list
    of the keyword arguments of each send, with the sender under ``"sender"``."""
    with SignalCapture() as capture:
        yield capture


@pytest.fixture(name="assert_counters_exact")
def _assert_counters_exact() -> Any:
    """:func:`pynamodb_counters.testing.assert_counters_exact`."""
    return assert_counters_exact


@pytest.fixture
def counters_stream(counters_backend: Backend) -> Callable[[type], StreamReader]:
    """:class:`~pynamodb_counters.testing.StreamReader` of a model's table on ``counters_backend``: each
    ``pending()`` is the Lambda event of the records written since the last one (the first, from the table's
    start)."""
    return StreamReader
