"""The Python blocks of the "Counting from the stream" page run as pasted, each in a fresh interpreter with no AWS
settings, beside a ``myapp`` package whose ``models.py`` is the page's first block (its "Declaring" models, which
the other blocks import as a reader's app would)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import List

import pytest

PAGE = Path(__file__).resolve().parent.parent / "docs" / "stream-counting.rst"


def python_blocks() -> List[str]:
    """The page's ``.. code-block:: python`` blocks, dedented."""
    found = re.findall(r"\.\. code-block:: python\n\n((?:(?:   .*)?\n)+)", PAGE.read_text(encoding="utf-8"))
    return [textwrap.dedent(block) for block in found]


def test_the_page_declares_its_models_first() -> None:
    assert "class Like" in python_blocks()[0] and "counting=\"stream\"" in python_blocks()[0]


@pytest.mark.parametrize("block", python_blocks(), ids=lambda block: block.strip().splitlines()[0][:40])
def test_each_python_block_of_the_stream_counting_page_runs_as_pasted(block: str, tmp_path: Path) -> None:
    app = tmp_path / "myapp"
    app.mkdir()
    (app / "__init__.py").write_text("", encoding="utf-8")
    (app / "models.py").write_text(python_blocks()[0], encoding="utf-8")
    script = tmp_path / "block.py"
    script.write_text(block, encoding="utf-8")
    environment = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
    environment["PYTHONWARNINGS"] = "error::UserWarning"  # a ConfigurationWarning is a wrong block
    finished = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=environment, capture_output=True,
                              text=True, timeout=120)
    assert finished.returncode == 0, finished.stderr
