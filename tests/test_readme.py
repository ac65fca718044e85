"""The README's Python blocks run as pasted, in a fresh interpreter with no AWS settings (issue 14)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks() -> List[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.DOTALL)


def test_the_readme_has_a_quickstart() -> None:
    assert any("counted_by" in block for block in python_blocks())


@pytest.mark.parametrize("block", python_blocks(), ids=lambda block: block.splitlines()[0][:40])
def test_each_python_block_of_the_readme_runs_as_pasted(block: str, tmp_path: Path) -> None:
    script = tmp_path / "readme_block.py"
    script.write_text(block, encoding="utf-8")
    environment = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
    finished = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=environment, capture_output=True,
                              text=True, timeout=120)
    assert finished.returncode == 0, finished.stderr
