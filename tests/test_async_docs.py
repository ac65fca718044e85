"""docs/async.rst runs as written: its three blocks are an app's files (``myapp/models.py``, ``myapp/api.py``) and
that app's test module (``tests/test_likes.py``), run by pytest in a subprocess with the library's pytest plugin,
which gives the test the served engine; the FastAPI app's lifespan closes its clients as the test client stops."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_docs_blocks import python_blocks

pytestmark = [pytest.mark.served, pytest.mark.slow]  # pytest in a subprocess, on a served engine of its own


def test_the_async_page_s_app_and_its_test_run_as_written(tmp_path: Path) -> None:
    models, api, test = (block.code for block in python_blocks("async"))
    (tmp_path / "myapp").mkdir()
    (tmp_path / "myapp" / "__init__.py").write_text("")
    (tmp_path / "myapp" / "models.py").write_text(models)
    (tmp_path / "myapp" / "api.py").write_text(api)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_likes.py").write_text(test)
    environment = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
    environment["PYTHONPATH"] = str(tmp_path)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-W", "error::ResourceWarning", "tests/test_likes.py"],
                          cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    assert "Unclosed" not in done.stdout + done.stderr
