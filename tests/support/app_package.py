"""An app's own model modules, for the tests that import them as the app would, run the command on them, or run
them in a subprocess: each module is declared once, as a real file in ``tests/support/apps/`` (never collected, never
imported from there), and :func:`source` gives its text to write into a package in ``tmp_path``.

The ``app`` fixture (``conftest.py``) is such a package on ``sys.path``; :func:`run` runs the command in this
process, as the console script would.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Tuple

import pytest

from pynamodb_counters.cli import main

APPS = Path(__file__).parent / "apps"


def source(name: str) -> str:
    """The source of ``tests/support/apps/<name>.py``."""
    return (APPS / f"{name}.py").read_text()


def write_package(root: Path, package: str, **modules: str) -> Path:
    """A package ``package`` in ``root`` (created when absent) holding ``modules``: the module's name, its source.
    Returns the package's directory."""
    directory = root / package
    directory.mkdir(exist_ok=True)
    (directory / "__init__.py").touch()
    write_app(directory, **modules)
    return directory


def write_app(app: Path, **modules: str) -> None:
    """Write ``modules`` (the module's name, its source) into the package directory ``app``."""
    for name, text in modules.items():
        (app / f"{name}.py").write_text(text)


def forget_app(package: str = "app") -> None:
    """Forget every module of ``package``, as a new process would not have imported them."""
    for name in [name for name in sys.modules if name == package or name.startswith(f"{package}.")]:
        del sys.modules[name]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> Tuple[int, str, str]:
    """The command run with ``argv`` in this process: its exit code, stdout and stderr."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err

