"""The public surface: names, typing marker, the command line."""
from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import pynamodb_counters
from pynamodb_counters import exceptions
from pynamodb_counters.cli.demo import run
from pynamodb_counters.testing import ServedMoto


def test_public_names_are_exactly_all() -> None:
    public = {name for name, value in vars(pynamodb_counters).items()
              if not name.startswith("_") and not isinstance(value, ModuleType)}
    assert public | {"aio", "exceptions", "signals"} == set(pynamodb_counters.__all__)
    assert pynamodb_counters.__all__ == sorted(pynamodb_counters.__all__)


def test_the_issue_s_imports_work() -> None:
    from pynamodb_counters import CounterField, CounterMixin, counted_by, signals  # noqa: F401
    from pynamodb_counters.exceptions import (  # noqa: F401
        CounterError,
        DuplicateChildError,
        MissingChildError,
        ParentNotFoundError,
    )

    for name in exceptions.__all__:  # every error derives from CounterError; the one warning from UserWarning
        assert issubclass(getattr(exceptions, name), exceptions.CounterError) or \
            name == "ConfigurationWarning" and issubclass(getattr(exceptions, name), UserWarning)


def test_the_package_is_typed() -> None:
    assert (Path(pynamodb_counters.__file__).parent / "py.typed").exists()


def test_demo_tells_the_likes_story() -> None:
    lines: list[str] = []

    assert run(out=lines.append) == 0
    text = "\n".join(lines)
    assert "refused (DuplicateChildError), nothing written" in text
    assert "like_tally = 2; like items = 2" in text
    assert 'ConditionExpression: "attribute_not_exists (#0)"' in text
    assert "published (load, change, save(): 1 change, one transaction): 1/1, 0/0" in text
    assert "(4 changes, one transaction of 3 actions): 0/0, 1/1" in text and "soft-deleted: 0/0, 0/0" in text
    assert "dee refused (LimitExceededError: players holds 3, limit 3), nothing written" in text
    assert "a week of them in one Query: [1, 2, 3, 1, 2, 3, 1]" in text
    assert re.search(r"a batch of \d+ records: 2 counted in 1 UpdateItem, .*: like_tally = 2\n", text)
    assert "the same batch again (Lambda retries it after a timeout): 0 counted, like_tally = 2" in text
    assert "audit while a third like waits: 0 drifted (stored 2: the waiting like is not drift)" in text
    assert "the next batch: 1 counted, like_tally = 3" in text
    assert max(len(line) for line in lines) <= 100  # the transaction is shown one field a line, not as wide JSON


@pytest.mark.served
def test_the_demo_runs_again_against_an_endpoint_that_keeps_its_tables(served_engine: ServedMoto) -> None:
    """Against a real endpoint the tables stay: a second run tells the same story, the first run's records in the
    stream left to that run."""
    served_engine.reset()
    try:
        for _ in range(2):
            lines: list[str] = []
            assert run(endpoint_url=served_engine.endpoint_url, out=lines.append) == 0, "\n".join(lines)
            assert "the next batch: 1 counted, like_tally = 3" in lines[-1]
    finally:
        served_engine.reset()


def test_the_command_line_runs_the_demo_and_rejects_bad_usage() -> None:
    done = subprocess.run([sys.executable, "-m", "pynamodb_counters", "demo"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "read back with one GetItem: like_tally = 2" in done.stdout
    bad = subprocess.run([sys.executable, "-m", "pynamodb_counters", "nonsense"], capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_the_api_reference_documents_exactly_the_public_names() -> None:
    """docs/api.rst documents every name of ``__all__`` under the name it is imported by, and nothing else of the
    package (the modules ``exceptions`` and ``signals`` are documented whole)."""
    text = (Path(__file__).parents[1] / "docs" / "api.rst").read_text()
    documented = set(re.findall(r"^\.\. auto(?:class|function|data|exception):: pynamodb_counters\.(\w+)$", text,
                                re.M))
    documented |= set(re.findall(r"^\.\. py:data:: (\w+)\n   :module: pynamodb_counters$", text, re.M))
    documented |= {module for module in ("aio", "exceptions", "signals")
                   if f".. automodule:: pynamodb_counters.{module}\n" in text}
    assert documented == set(pynamodb_counters.__all__)
    internal = re.findall(r"pynamodb_counters\._\w+", text)
    assert internal == []  # internal modules are not documented


def test_internal_modules_are_private_and_public_modules_list_only_public_names() -> None:
    """A module whose name starts with an underscore is internal, in whichever folder; a folder names a concept,
    and those of the library's insides (``declare``, ``write``, ``reconcile.export``) hold no public name."""
    package = Path(pynamodb_counters.__file__).parent
    public_modules = {"", "__main__", "aio", "bulk", "cli", "cli.demo", "declare", "exceptions", "feeders", "models",
                      "pytest_plugin", "reconcile", "reconcile.export", "resharding", "signals", "streams", "testing",
                      "transactions", "transport", "write"}
    found = {".".join(path.relative_to(package).with_suffix("").parts).replace("__init__", "").rstrip(".")
             for path in package.rglob("*.py")}
    assert {name for name in found if not any(part.startswith("_") and part != "__main__"
                                              for part in name.split("."))
            and not name.startswith("testing.")} == public_modules  # testing's modules: docs/testing.rst
    for name in public_modules & {"declare", "write", "reconcile.export"}:
        module = importlib.import_module(f"pynamodb_counters.{name}")
        assert [n for n, v in vars(module).items() if not n.startswith("_") and not isinstance(v, ModuleType)] \
            == [], f"{name} is a folder of internal modules"
    # streams is imported as a module of its own (a Lambda's handler imports count_expiries from it), as is
    # transport (its seam, for tests)
    for name in public_modules - {"", "__main__", "cli", "declare", "write", "reconcile.export", "cli.demo",
                                  "pytest_plugin", "exceptions", "signals", "streams", "testing", "transport", "aio"}:
        module = importlib.import_module(f"pynamodb_counters.{name}")
        for exported in module.__all__:
            assert exported in pynamodb_counters.__all__, f"{name}.{exported} is exported but not public"


def test_the_public_import_paths_work() -> None:
    """The modules users import, the plugin pytest loads and the command's entry point keep their paths."""
    for name in ("exceptions", "signals", "bulk", "transactions", "resharding", "reconcile", "streams", "feeders",
                 "testing", "testing.server", "testing.exports", "testing.backups", "pytest_plugin"):
        importlib.import_module(f"pynamodb_counters.{name}")
    namespace: dict = {}
    exec(f"from pynamodb_counters import {', '.join(pynamodb_counters.__all__)}", namespace)
    assert set(pynamodb_counters.__all__) <= set(namespace)
    from pynamodb_counters.cli import main
    from pynamodb_counters.reconcile import audit, repair
    from pynamodb_counters.streams import count_expiries
    from pynamodb_counters.testing import Backend, ServedMoto, assert_counters_exact

    assert callable(main) and audit is pynamodb_counters.audit and repair is pynamodb_counters.repair
    assert callable(count_expiries) and Backend and ServedMoto and assert_counters_exact
    project = (Path(__file__).parents[1] / "pyproject.toml").read_text()
    assert 'pynamodb-counters = "pynamodb_counters.cli:main"' in project
    assert 'pynamodb_counters = "pynamodb_counters.pytest_plugin"' in project
