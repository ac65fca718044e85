"""toxfile.py, tox's in-tree plugin: every supported interpreter the machine has is found, whatever environment
tox runs from.

Each test runs a copy of ``toxfile.py`` as tox would load it, in a fresh process, beside stand-ins for the two tox
modules it imports: its links go to the copy's ``.tox/interpreters``, never to this checkout's.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, Optional

import pytest

TOXFILE = Path(__file__).resolve().parent.parent / "toxfile.py"
MINOR = f"{sys.version_info[0]}.{sys.version_info[1]}"
TOX_STAND_INS = {
    "tox/__init__.py": "",
    "tox/plugin.py": "def impl(function):\n    return function\n",
    "tox/tox_env/__init__.py": "",
    "tox/tox_env/api.py": "class ToxEnv:\n    name = ''\n",
}
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="toxfile.py links interpreters with POSIX symlinks")
IS_BASE = "import sys; print(sys.prefix == sys.base_prefix, '%d.%d' % sys.version_info[:2])"


def make_venv(where: Path) -> Path:
    """A virtual environment made by this interpreter (``python -m venv``); its ``bin`` directory, which holds a
    ``python3.X`` of this minor version."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    bin_dir = where / ("Scripts" if sys.platform == "win32" else "bin")
    assert (bin_dir / f"python{MINOR}").exists()
    return bin_dir


def load_toxfile(project: Path, python: Path, environment: Dict[str, str]) -> None:
    """Run a copy of ``toxfile.py`` in ``project`` with ``python`` and ``environment``, as tox loads it."""
    shutil.copy(TOXFILE, project / "toxfile.py")
    for name, text in TOX_STAND_INS.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    finished = subprocess.run([str(python), "-c", "import toxfile"], cwd=project, env=environment,
                              capture_output=True, text=True, timeout=60)
    assert finished.returncode == 0, finished.stderr


def linked(project: Path) -> Path:
    """The interpreter ``.tox/interpreters/python3.X`` gives for this minor version."""
    link = project / ".tox" / "interpreters" / f"python{MINOR}"
    assert link.is_symlink(), f"no link for python{MINOR}: uv refuses a virtual environment's interpreter"
    return link


def assert_a_base_interpreter(python: Path) -> None:
    """``python`` runs, is of this minor version, and is no virtual environment's (what uv's ``only-system``
    preference demands)."""
    finished = subprocess.run([str(python), "-c", IS_BASE], capture_output=True, text=True, timeout=60)
    assert finished.stdout.split() == ["True", MINOR], finished.stderr
    resolved = python.resolve()
    assert not (resolved.parent / "pyvenv.cfg").exists() and not (resolved.parent.parent / "pyvenv.cfg").exists()


def uv() -> Optional[str]:
    """uv, if this environment has it (tox-uv puts it on PATH), else ``None``."""
    return shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))


def test_a_virtual_environments_interpreter_first_on_path_is_replaced_by_a_base_one(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    bin_dir = make_venv(tmp_path / "venv")
    path = os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")])
    load_toxfile(project, bin_dir / "python", {**os.environ, "PATH": path})  # tox run from the venv, as README says
    assert_a_base_interpreter(linked(project))
    found = uv()
    if found is not None:  # what tox-uv does with that PATH: `uv venv -p 3.X --python-preference only-system`
        links = project / ".tox" / "interpreters"
        made = subprocess.run(
            [found, "venv", "-p", MINOR, "--python-preference", "only-system", "--no-python-downloads",
             str(tmp_path / "made")],
            env={**os.environ, "PATH": os.pathsep.join([str(links), path])}, capture_output=True, text=True,
            timeout=120)
        assert made.returncode == 0, made.stderr


def test_without_pyenv_the_virtual_environments_own_base_interpreter_is_linked(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    bin_dir = make_venv(tmp_path / "venv")
    environment = {name: value for name, value in os.environ.items() if not name.startswith("PYENV")}
    environment.update(PATH=str(bin_dir), HOME=str(tmp_path))  # no pyenv: neither its command nor its root
    load_toxfile(project, bin_dir / "python", environment)
    assert_a_base_interpreter(linked(project))


def test_a_base_interpreter_first_on_path_is_left_alone(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    base = Path(sys.base_prefix) / "bin" / f"python{MINOR}"  # this interpreter's own installation
    if not base.exists():
        pytest.skip(f"no python{MINOR} in {base.parent}")
    assert_a_base_interpreter(base)
    load_toxfile(project, base, {**os.environ, "PATH": str(base.parent)})
    assert not (project / ".tox" / "interpreters" / f"python{MINOR}").exists()
