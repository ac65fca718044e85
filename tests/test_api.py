"""The public surface: names, typing marker, the command line."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pynamodb_counters
from pynamodb_counters import exceptions
from pynamodb_counters.demo import run


def test_public_names_are_exactly_all() -> None:
    public = {name for name, value in vars(pynamodb_counters).items()
              if not name.startswith("_") and not isinstance(value, ModuleType)}
    assert public | {"exceptions", "signals"} == set(pynamodb_counters.__all__)
    assert pynamodb_counters.__all__ == sorted(pynamodb_counters.__all__)


def test_the_issue_s_imports_work() -> None:
    from pynamodb_counters import CounterField, CounterMixin, counted_by, signals  # noqa: F401
    from pynamodb_counters.exceptions import (  # noqa: F401
        CounterError,
        DuplicateChildError,
        MissingChildError,
        ParentNotFoundError,
    )

    for name in exceptions.__all__:
        assert issubclass(getattr(exceptions, name), exceptions.CounterError)


def test_the_package_is_typed() -> None:
    assert (Path(pynamodb_counters.__file__).parent / "py.typed").exists()


def test_demo_tells_the_likes_story() -> None:
    lines: list[str] = []

    assert run(out=lines.append) == 0
    text = "\n".join(lines)
    assert "refused (DuplicateChildError), nothing written" in text
    assert "like_tally = 2; like items = 2" in text
    assert 'ConditionExpression: "attribute_not_exists (#0)"' in text
    assert max(len(line) for line in lines) <= 100  # the transaction is shown one field a line, not as wide JSON


def test_the_command_line_runs_the_demo_and_rejects_bad_usage() -> None:
    done = subprocess.run([sys.executable, "-m", "pynamodb_counters", "demo"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "read back with one GetItem: like_tally = 2" in done.stdout
    bad = subprocess.run([sys.executable, "-m", "pynamodb_counters", "nonsense"], capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
