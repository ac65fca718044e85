"""What is published (issue 37): the sdist is a tree that tests itself, the wheel holds the package alone, both
carry PEP 639 metadata, and Read the Docs builds the docs as ``tox -e docs`` does.

The sdist and the wheel are built offline, as ``python -m build`` makes them (the sdist from a copy of this tree,
the wheel from the unpacked sdist), with the setuptools of this environment (the ``test`` extra's, at the
build-system's floor), never downloading one: a copy, so that the build leaves no ``egg-info`` in this checkout.
"""
from __future__ import annotations

import configparser
import email.parser
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from email.message import Message
from pathlib import Path
from typing import Dict, Iterator, List, Set

import pytest
import yaml  # PyYAML: moto's s3 and server extras bring it
from packaging.version import Version

import pynamodb_counters

ROOT = Path(__file__).resolve().parent.parent
VERSION = pynamodb_counters.__version__
BUILD = "import sys\nfrom setuptools import build_meta\ngetattr(build_meta, sys.argv[1])(sys.argv[2])\n"
# the package as imported by the run from the unpacked sdist, then that tree's pytest run
FROM_TREE = ("import sys, pytest, pynamodb_counters\nprint('package:', pynamodb_counters.__file__, flush=True)\n"
             "sys.exit(pytest.main(sys.argv[1:]))\n")
# run from the unpacked sdist: whatever it collects must import (its support modules, conftest and data are there),
# and these run (counted writes and transactions on moto in-process with the fixtures of tests/conftest.py and
# tests/support, toxfile.py's, docs/api.rst's and the entry points in pyproject.toml): about 50 tests
FROM_TREE_TESTS = ("test_counting.py or test_transactions.py or test_toxfile.py or test_public_names or "
                   "test_the_api_reference or test_the_public_import_paths")
# the folders the sdist holds whole: the package, and what tox.ini's envs and the docs run
WHOLE = ("pynamodb_counters", "tests", "docs", "examples", "benchmarks")
# what running the tests, the examples and the docs' build leaves in the tree, which the sdist never holds: the
# copy built from leaves the tree's out, and holds one of each, planted
CACHES = {"__pycache__", ".pytest_cache", ".hypothesis", ".mypy_cache", ".ruff_cache", "_build"}
PLANTED = ("tests/__pycache__/conftest.cpython-311.pyc", "tests/.hypothesis/examples/0a/1b",
           "examples/flask_app/.pytest_cache/v/cache/nodeids", "pynamodb_counters/.mypy_cache/3.9/bulk.data.json",
           "tests/.ruff_cache/0.1/2", "docs/_build/html/index.html", "benchmarks/__pycache__/audit.cpython-39.pyc")


def built(kind: str, source: Path, out: Path) -> Path:
    """The ``sdist`` or ``wheel`` setuptools' backend builds from ``source`` into ``out``, in a fresh process."""
    floor = Version("77")
    have = Version(importlib.metadata.version("setuptools"))
    assert have >= floor, f"setuptools {have} writes no License-Expression: pip install 'setuptools>={floor}'"
    out.mkdir()
    finished = subprocess.run([sys.executable, "-c", BUILD, f"build_{kind}", str(out)], cwd=source,
                              capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stdout + finished.stderr
    (made,) = out.iterdir()
    return made


def copy_of_the_tree(destination: Path) -> Path:
    """The files a build of this checkout may read: those at its top, and the folders of the project (those the
    sdist must hold, and any other ``MANIFEST.in`` grafts), less caches and builds (a ``.tox`` or a venv is never
    copied), and the planted caches."""
    destination.mkdir()
    for entry in ROOT.iterdir():
        if entry.is_file():
            shutil.copy2(entry, destination / entry.name)
    grafted = [line.split()[1] for line in (ROOT / "MANIFEST.in").read_text().splitlines() if line.startswith("graft ")]
    for folder in dict.fromkeys([*WHOLE, *grafted]):
        if (ROOT / folder).is_dir():
            shutil.copytree(ROOT / folder, destination / folder,
                            ignore=lambda _, names: [name for name in names
                                                     if name in CACHES or name.endswith((".pyc", ".egg-info"))])
    for planted in PLANTED:
        (destination / planted).parent.mkdir(parents=True, exist_ok=True)
        (destination / planted).write_text("a cache")
    return destination


def a_cache(name: str) -> bool:
    return name.endswith((".pyc", ".pyo")) or any(part in CACHES for part in name.split("/"))


def files_under(tree: Path) -> Set[str]:
    return {path.relative_to(tree).as_posix() for path in tree.rglob("*") if path.is_file()}


@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The sdist of a copy of this tree."""
    where = tmp_path_factory.mktemp("sdist")
    yield built("sdist", copy_of_the_tree(where / "tree"), where / "dist")


def unpacked(sdist: Path, where: Path) -> Path:
    with tarfile.open(sdist) as archive:
        # only regular files and folders inside ``where`` (the default from Python 3.14 on)
        archive.extractall(where, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    (tree,) = where.iterdir()
    return tree


def metadata(text: str) -> Message:
    return email.parser.Parser().parsestr(text)


def assert_the_published_metadata(fields: Message) -> None:
    """PEP 639's license fields, no License classifier, and what the package says of itself today."""
    assert fields["Metadata-Version"] == "2.4"
    assert fields["Name"] == "pynamodb-counters" and fields["Version"] == VERSION
    assert fields["License-Expression"] == "MIT" and fields.get_all("License-File") == ["LICENSE"]
    assert fields["License"] is None
    classifiers = fields.get_all("Classifier")
    assert not [classifier for classifier in classifiers if classifier.startswith("License ::")]
    assert {"Framework :: Pytest", "Typing :: Typed", "Programming Language :: Python :: 3 :: Only"} <= set(classifiers)
    assert [c for c in classifiers if c.startswith("Programming Language :: Python :: 3.")] == [
        f"Programming Language :: Python :: 3.{minor}" for minor in range(9, 14)]
    assert "one DynamoDB transaction per write" not in fields["Summary"]
    assert "stream" in fields["Summary"] and "bulk" in fields["Summary"]
    assert fields["Author"] == "The pynamodb-counters developers"
    urls = dict(url.split(", ", 1) for url in fields.get_all("Project-URL"))
    assert set(urls) == {"Documentation", "Changelog", "Source", "Issues"}
    runtime = [requirement for requirement in fields.get_all("Requires-Dist") if "extra ==" not in requirement]
    assert sorted(requirement.split("<")[0].split(">")[0] for requirement in runtime) == ["blinker", "pynamodb"]
    assert fields["Description-Content-Type"] == "text/markdown"


@pytest.mark.slow
def test_the_sdist_holds_a_tree_whose_quick_tests_pass(sdist: Path, tmp_path: Path) -> None:
    """The sdist holds the tests with their support modules, conftest and the files they read (docs, toxfile.py,
    tox.ini, .readthedocs.yaml), no cache; from the unpacked tree, every test module imports and a part of the
    quick suite passes, against the package in that tree."""
    tree = unpacked(sdist, tmp_path / "unpacked")
    held = files_under(tree)
    copied = files_under(sdist.parent.parent / "tree")
    for folder in WHOLE:
        missing = {name for name in copied if name.startswith(f"{folder}/") and not a_cache(name)} - held
        assert not missing, f"the sdist lacks these files of {folder}/: {sorted(missing)}"
    assert {"tox.ini", "toxfile.py", ".readthedocs.yaml", "docs/requirements.txt", "tests/conftest.py",
            "tests/support/__init__.py", "LICENSE", "README.md", "pyproject.toml", "PKG-INFO"} <= held
    assert not [name for name in held if a_cache(name)]
    assert_the_published_metadata(metadata((tree / "PKG-INFO").read_text(encoding="utf-8")))

    environment: Dict[str, str] = {name: value for name, value in os.environ.items()
                                   if not name.startswith(("PYTEST_", "COV_CORE_"))}
    environment["PYTHONPATH"] = str(tree)
    command: List[str] = [sys.executable, "-c", FROM_TREE, "-p", "no:cacheprovider", "-q", "tests",
                          "-m", "not slow and not served and not spark", "-k", FROM_TREE_TESTS]
    finished = subprocess.run(command, cwd=tree, env=environment, capture_output=True, text=True, timeout=600)
    report = finished.stdout + finished.stderr
    assert finished.returncode == 0, report
    assert f"package: {tree / 'pynamodb_counters' / '__init__.py'}" in finished.stdout, report
    summary = report.strip().splitlines()[-1]
    passed = int(summary.split(" passed")[0].split()[-1])
    assert passed >= 40 and "failed" not in summary and "error" not in summary, summary


@pytest.mark.slow
def test_the_wheel_holds_the_package_alone(sdist: Path, tmp_path: Path) -> None:
    """The wheel, built from the sdist as ``python -m build`` builds it, holds the package (``py.typed`` too) and
    its metadata: no tests, docs or tooling; the command and the pytest plugin as entry points."""
    tree = unpacked(sdist, tmp_path / "unpacked")
    wheel = built("wheel", tree, tmp_path / "dist")
    assert wheel.name == f"pynamodb_counters-{VERSION}-py3-none-any.whl"
    dist_info = f"pynamodb_counters-{VERSION}.dist-info/"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        fields = metadata(archive.read(f"{dist_info}METADATA").decode("utf-8"))
        entry_points = archive.read(f"{dist_info}entry_points.txt").decode("utf-8")
    package = {name for name in names if name.startswith("pynamodb_counters/")}
    assert set(names) - package == {f"{dist_info}{name}" for name in (
        "METADATA", "WHEEL", "RECORD", "entry_points.txt", "top_level.txt", "licenses/LICENSE")}
    assert package == {name for name in files_under(tree) if name.startswith("pynamodb_counters/")}
    assert "pynamodb_counters/py.typed" in package
    assert_the_published_metadata(fields)
    assert "[console_scripts]\npynamodb-counters = pynamodb_counters.cli:main" in entry_points
    assert "[pytest11]\npynamodb_counters = pynamodb_counters.pytest_plugin" in entry_points


def test_read_the_docs_builds_the_docs_as_tox_does() -> None:
    """``.readthedocs.yaml`` and tox's ``docs`` env: the same Python, the package installed without extras, the
    same requirements file (which exists and names Sphinx), the same configuration, and warnings as errors."""
    settings = yaml.safe_load((ROOT / ".readthedocs.yaml").read_text(encoding="utf-8"))
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini", encoding="utf-8")
    docs = tox["testenv:docs"]
    assert settings["version"] == 2
    assert docs["basepython"] == f"python{settings['build']['tools']['python']}"

    installs = settings["python"]["install"]
    assert {"method": "pip", "path": "."} in installs  # no extra_requirements
    assert docs.get("skip_install", "false") == "false" and docs["extras"].strip() == ""
    (requirements,) = [entry["requirements"] for entry in installs if "requirements" in entry]
    assert docs["deps"].split() == ["-r", requirements]
    assert [line.split(">")[0].split("=")[0].split("<")[0] for line in (ROOT / requirements).read_text().splitlines()
            if line and not line.startswith("#")] == ["sphinx"]

    assert settings["sphinx"]["configuration"] == "docs/conf.py"
    assert settings["sphinx"]["fail_on_warning"] is True and settings["sphinx"].get("builder", "html") == "html"
    (command,) = docs["commands"].split("\n")[1:]  # the value starts on the line after ``commands =``
    assert command.split()[:5] == ["sphinx-build", "-W", "--keep-going", "-b", "html"]
    assert command.split()[5] == str(Path(settings["sphinx"]["configuration"]).parent)
