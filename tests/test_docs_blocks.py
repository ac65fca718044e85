"""The how-to pages' Python blocks run as pasted (issue 37), each page in a fresh interpreter with no AWS settings,
beside a ``myapp`` package: the app a reader has built by then, whose ``models.py`` is the quickstart's models.

How a page is run follows how its reader pastes it (``PAGES``):

* ``session``: the page is one story, told in one Python session (it says so). Its blocks run in order, in one
  interpreter whose ``__main__`` has no file, as a pasted session's (no ``if __name__ == "__main__":`` needed for
  the export audit's workers): the code is the page itself with every line outside a Python block blanked, so a
  traceback names the page's own line. The first block that needs a backend starts moto, as the quickstart does.
  The quickstart, modelling, children, limits, rollups, sharding, reconciliation, auditing-at-scale, signals,
  errors, cost and how-it-works pages.
* ``apart``: the page's first block is the app's ``myapp/models.py`` (it says so), and each other block is a
  file of that app (a Lambda handler, a test script): each runs alone, in a fresh interpreter. The
  stream-counting and expiring pages.
* ``pytest``: the page shows test code. Its first block is the ``conftest.py``; each block defining ``test_``
  functions is a test module, run by ``python -m pytest`` in a subprocess (marked ``slow``, as every test that
  runs pytest in a subprocess); the other blocks run alone, as scripts. The testing page.

A block preceded by an ``.. fragment: <why>`` comment is not run; the comment, in the page's source, says why.
There are three: backfill's one block (a Spark job over the reader's Parquet files in S3;
``tests/test_backfill.py`` runs a copy of the recipe, marked ``spark``), auditing-at-scale's Spark audit (PySpark,
Java, and S3 for its executors, which moto in-process does not serve; ``tests/test_export_spark.py`` runs the
engine), and expiring's ``GetRecords`` loop (the reading of the stream, the reader's own, is elided). The cli
page's blocks (the files of its "Trying the commands locally" recipe) run in ``tests/test_cli_locally.py``, beside
moto's server started as the recipe starts it, and the async page's app and its test in ``tests/test_async_docs.py``,
on the served engine aiobotocore needs (``ELSEWHERE``). The benchmarks, changelog, api, guarantees and index pages
have no Python block.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES: Dict[str, str] = {
    "quickstart": "session",
    "modelling": "session",
    "children": "session",
    "limits": "session",
    "rollups": "session",
    "sharding": "session",
    "reconciliation": "session",
    "auditing-at-scale": "session",
    "signals": "session",
    "errors": "session",
    "cost": "session",
    "how-it-works": "session",
    "testing": "pytest",
    "stream-counting": "apart",
    "expiring": "apart",
}
ELSEWHERE: Dict[str, str] = {"cli": "tests/test_cli_locally.py", "async": "tests/test_async_docs.py"}
DIRECTIVE = re.compile(r"^( *)\.\. code-block:: python\s*$")
FRAGMENT = re.compile(r"^ *\.\. fragment: \S")


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # the page's line of the block's first line of code (1-based)
    code: str  # dedented
    fragment: bool

    def padded(self) -> str:
        """The block at its own line: a traceback names the page's line."""
        return "\n" * (self.line - 1) + self.code


def python_blocks(page: str) -> List[Block]:
    """The page's ``.. code-block:: python`` blocks, in order."""
    lines = (DOCS / f"{page}.rst").read_text(encoding="utf-8").splitlines()
    blocks = []
    for at, line in enumerate(lines):
        directive = DIRECTIVE.match(line)
        if directive is None:
            continue
        indent = len(directive.group(1))
        before = next((earlier for earlier in reversed(lines[:at]) if earlier.strip()), "")
        end = at + 1
        while end < len(lines) and (not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > indent):
            end += 1
        body = lines[at + 1:end]
        first = next(number for number, text in enumerate(body) if text.strip())
        code = textwrap.dedent("\n".join(body[first:])).rstrip() + "\n"
        blocks.append(Block(page, at + 2 + first, code, bool(FRAGMENT.match(before))))
    return blocks


def runnable(page: str) -> List[Block]:
    return [block for block in python_blocks(page) if not block.fragment]


def cases() -> List[object]:
    """A ``session`` page is one case; an ``apart`` or ``pytest`` page, one a block (its models block aside)."""
    found: List[object] = []
    for page, mode in PAGES.items():
        blocks = runnable(page)
        if mode == "session":
            found.append(pytest.param(page, None, id=page))
        else:
            found.extend(pytest.param(page, block, id=f"{page}:{block.line}",
                                      marks=[pytest.mark.slow] if mode == "pytest" and "def test_" in block.code
                                      else []) for block in blocks[1:])
    return found


SESSION = "import sys; exec(compile(open(sys.argv[1]).read(), sys.argv[1], 'exec'))"  # as typed in a session


def run(command: List[str], cwd: Path) -> None:
    """Run ``command`` in ``cwd``, without AWS settings."""
    environment = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
    environment["PYTHONWARNINGS"] = "error::UserWarning"  # a ConfigurationWarning is a wrong block
    environment.pop("PYTEST_XDIST_WORKER", None)
    environment["PYTHONPATH"] = str(cwd)
    finished = subprocess.run(command, cwd=cwd, env=environment, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stdout[-4000:] + finished.stderr


def app(tmp_path: Path, models: str) -> None:
    package = tmp_path / "myapp"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "models.py").write_text(models, encoding="utf-8")


def test_every_page_with_a_python_block_not_marked_a_fragment_is_run() -> None:
    assert {path.stem for path in DOCS.glob("*.rst") if runnable(path.stem)} == set(PAGES) | set(ELSEWHERE)
    assert all((DOCS.parent / test).exists() for test in ELSEWHERE.values())


@pytest.mark.parametrize("page", ["quickstart"] + [page for page, mode in PAGES.items() if mode == "apart"])
def test_the_app_models_come_first(page: str) -> None:
    assert "(CounterMixin, Model)" in runnable(page)[0].code


@pytest.mark.parametrize(("page", "block"), cases())
def test_the_python_blocks_of_each_page_run_as_pasted(page: str, block: Optional[Block], tmp_path: Path) -> None:
    mode = PAGES[page]
    blocks = runnable(page)
    app(tmp_path, blocks[0].code if mode == "apart" else runnable("quickstart")[0].code)
    script = tmp_path / f"{page}.rst.py"
    if block is None:
        lines = [""] * max(each.line + each.code.count("\n") for each in blocks)
        for each in blocks:
            lines[each.line - 1:each.line - 1 + each.code.count("\n")] = each.code.splitlines()
        script.write_text("\n".join(lines) + "\n", encoding="utf-8")
        # one session, as pasted: a __main__ without a file (python -c), which the export audit's workers do not
        # run again (a script would need its guard: the page says so), the code compiled under the page's name
        run([sys.executable, "-c", SESSION, str(script)], tmp_path)
    elif mode == "pytest" and "def test_" in block.code:
        (tmp_path / "conftest.py").write_text(blocks[0].code, encoding="utf-8")
        module = tmp_path / f"test_{page}_{block.line}.py"
        module.write_text(block.padded(), encoding="utf-8")
        run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(module)], tmp_path)
    else:
        script.write_text(block.padded(), encoding="utf-8")
        run([sys.executable, str(script)], tmp_path)
