"""Engines for the suite, on the shipped test backend (:class:`pynamodb_counters.testing.Backend`, what the
``counters_backend`` fixture of the pytest plugin gives users): moto in-process (``dynamodb``) and the served,
serialised moto engine (``served``, ``proxy``); and one Spark session for the tests marked ``spark``. Also what
several test modules start from: a bookmarked post (``bookmarked``), and an app's package on ``sys.path``
(``app``)."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any, Iterator, List, Optional

import pytest

# Dummy credentials before anything creates a botocore client: no test may reach AWS.
os.environ["AWS_ACCESS_KEY_ID"] = "testing"
os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"
os.environ["AWS_DEFAULT_REGION"] = "us-east-1"
os.environ.pop("AWS_PROFILE", None)
# botocore 1.44.4 and later send DynamoDB Streams calls to an account-based endpoint that moto 5.2.5 and earlier do
# not route: for the suite's own raw streams clients (the library's use the region's endpoint)
os.environ["AWS_ACCOUNT_ID_ENDPOINT_MODE"] = "disabled"

from pynamodb_counters.testing import Backend, ServedMoto  # noqa: E402
from tests.support.app_package import forget_app, write_package  # noqa: E402
from tests.support.factories import bookmarked_post  # noqa: E402
from tests.support.faults import FaultProxy  # noqa: E402
from tests.support.models import ALL_MODELS, TABLE_MODELS  # noqa: E402


def pytest_collection_modifyitems(items: List[pytest.Item]) -> None:
    """The tests marked slow first, each group in its own order: spread over cores (``-n``), the longest runs start
    at once rather than last, when one core would run them alone."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture
def counters_models() -> List[type]:
    """The plugin's two lines of ``conftest.py``: every test table's model (their children come with them)."""
    return list(TABLE_MODELS)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--driver", choices=("sync", "async"), default="sync",
                     help="async: the tests using the dynamodb fixture make their writes and reads through the async "
                          "twins (asave()...) on the served engine (tests/support/drivers.py)")


@pytest.fixture
def dynamodb(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """moto in-process, fresh for each test, with every test table created: the plugin's ``counters_backend``.
    With ``--driver=async``: the served engine instead (aiobotocore cannot reach moto in-process), every model
    and the suite's raw clients pointed at it, and the sync API made through its async twins."""
    if request.config.getoption("--driver") == "sync":
        yield request.getfixturevalue("counters_backend")
        return
    driver = request.getfixturevalue("async_driver")
    engine = request.getfixturevalue("served_engine")
    engine.reset()
    try:
        with pytest.MonkeyPatch.context() as environment:
            environment.setenv("AWS_ENDPOINT_URL_DYNAMODB", engine.endpoint_url)  # the raw clients of the tests
            with Backend("served", TABLE_MODELS, engine.endpoint_url) as backend, driver.driving():
                yield backend
    finally:
        engine.reset()


@pytest.fixture(scope="session")
def async_driver() -> Iterator[Any]:
    """The async driver's event loop (``--driver=async``), closed with its clients at the end of the session."""
    from tests.support.drivers import AsyncDriver

    driver = AsyncDriver()
    try:
        yield driver
    finally:
        driver.close()


@pytest.fixture
def bookmarked(dynamodb: Backend) -> None:
    """On moto in-process: a post bookmarked by U1 and by U2 (:func:`tests.support.factories.bookmarked_post`)."""
    bookmarked_post()


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A package ``app`` on ``sys.path`` (files written by each test: :mod:`tests.support.app_package`), forgotten again
    afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))
    yield write_package(tmp_path, "app")
    forget_app()


@pytest.fixture(scope="session")
def served_engine() -> Iterator[ServedMoto]:
    """One moto server on 127.0.0.1 for the session, serving one request at a time, its transactions backing up
    the items they name rather than every table (``item_backups=True``: the same outcome, in time that does not
    grow with the tables). Fails, never skips, when it cannot start."""
    with ServedMoto(item_backups=True) as engine:
        yield engine


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One SparkSession for the run (``local[2]``, no UI, small shuffles), its Python workers on this interpreter.
    Fails, never skips, when pyspark or Java is missing."""
    try:
        from pyspark.sql import SparkSession
    except ImportError as error:
        pytest.fail(f"the tests marked spark need pyspark ({error}): pip install -e '.[spark]', or run tox -e spark",
                    pytrace=False)
    java_home = os.environ.get("JAVA_HOME")
    if shutil.which("java") is None and not (java_home and (Path(java_home) / "bin" / "java").exists()):
        pytest.fail("the tests marked spark need Java 17 or later: java on PATH, or JAVA_HOME", pytrace=False)
    scratch = tmp_path_factory.mktemp("spark")
    with pytest.MonkeyPatch.context() as environment:
        environment.setenv("PYSPARK_PYTHON", sys.executable)
        environment.setenv("PYSPARK_DRIVER_PYTHON", sys.executable)
        session = (SparkSession.builder.master("local[2]").appName("pynamodb-counters tests")
                   .config("spark.ui.enabled", "false")
                   .config("spark.ui.showConsoleProgress", "false")
                   .config("spark.sql.shuffle.partitions", "4")
                   .config("spark.default.parallelism", "2")
                   .config("spark.local.dir", str(scratch))
                   .config("spark.sql.warehouse.dir", str(scratch / "warehouse"))
                   .getOrCreate())
        session.sparkContext.setLogLevel("ERROR")
        try:
            yield session
        finally:
            session.stop()


@pytest.fixture
def served(served_engine: ServedMoto, counters_models: List[type]) -> Iterator[ServedMoto]:
    """The served engine, reset, with every test table created and every model pointed at it."""
    served_engine.reset()
    try:
        with Backend("served", counters_models, served_engine.endpoint_url):
            yield served_engine
    finally:
        served_engine.reset()


@pytest.fixture
def proxy(served: ServedMoto) -> Iterator[FaultProxy]:
    """A fault proxy in front of the served engine, with every model pointed at the proxy."""
    with FaultProxy(served.endpoint_url) as fault_proxy:
        point_models_at(fault_proxy.endpoint_url)
        try:
            yield fault_proxy
        finally:
            point_models_at(served.endpoint_url)


def point_models_at(host: Optional[str]) -> None:
    """Send every test model to ``host``, each with a new connection (PynamoDB caches one per model class). The
    engine fixtures put back what each model had."""
    for model in ALL_MODELS:
        model.Meta.host = host
        model._connection = None


@pytest.fixture(autouse=True)
def held_shapes_are_fresh() -> Iterator[None]:
    """After every test: each shape of a parent's counter Update the test left held (the memo that copies a
    request with the next key) is the request built afresh for it, while the declarations still give it that
    shape. Every shape the suite writes is checked so."""
    from pynamodb_counters.write._actions import stale_shapes

    yield
    stale = [(model.__name__, held, fresh) for model, held, fresh in stale_shapes()]
    assert stale == [], stale


@pytest.fixture
def transactions() -> Iterator[Any]:
    """The TransactWriteItems the test's writes send, seen through the transport seam: ``watch({n: other})``
    counts afresh and runs ``other`` just before the n-th (``tests.support.client_hooks.BeforeTransactions``)."""
    from pynamodb_counters.transport import intercepting
    from tests.support.client_hooks import BeforeTransactions

    seen = BeforeTransactions({})
    with intercepting(seen):
        yield seen
