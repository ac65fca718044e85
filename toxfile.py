"""tox's in-tree plugin: finds the interpreters pyenv keeps off PATH or a venv hides, and names the envs a run skipped.

tox (with tox-uv: uv) looks for ``python3.9`` ... ``python3.13`` on PATH. pyenv installs them under
``$(pyenv root)/versions`` and exposes only the selected ones (its shims of the others fail, and uv stops at the
first one it finds), and a virtual environment's ``python3.X`` (tox run from a venv, its ``bin`` first on PATH) is
one uv refuses: ``uv_python_preference = only-system`` takes no venv's interpreter. So for each minor version
whose first ``python3.X`` on PATH is missing, a shim or a venv's, this links a base interpreter into
``.tox/interpreters`` and puts that folder at the front of PATH: the newest pyenv patch release, else the first
base one along PATH, a venv's replaced by the interpreter it was made from (``home`` in its ``pyvenv.cfg``). uv
only ever uses the interpreters found so: it never downloads one (``UV_PYTHON_DOWNLOADS=never``, besides
``uv_python_preference`` in tox.ini).
An interpreter still missing makes tox skip its envs (``skip_missing_interpreters``, for laptops; CI refuses to
skip); the run then ends with a line that names them and says how to get the interpreter.
"""
from __future__ import annotations

import atexit
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

from tox.plugin import impl
from tox.tox_env.api import ToxEnv

MINORS = ("3.9", "3.10", "3.11", "3.12", "3.13")
_wanted: List[str] = []  # the interpreter each env of this run needs


def _venv_config(executable: Path) -> Optional[Dict[str, str]]:
    """The settings of the virtual environment ``executable`` belongs to, or ``None`` if it is no venv's: Python
    takes an interpreter for a venv's when a ``pyvenv.cfg`` is beside it or in the folder above (PEP 405), the
    path as found, symlinks not followed (a venv's ``python3.X`` is a symlink to its base)."""
    for folder in (executable.parent, executable.parent.parent):
        config = folder / "pyvenv.cfg"
        if config.is_file():
            settings: Dict[str, str] = {}
            for line in config.read_text(encoding="utf-8", errors="replace").splitlines():
                key, equals, value = line.partition("=")
                if equals:
                    settings[key.strip().lower()] = value.strip()
            return settings
    return None


def _base_interpreter(executable: Path) -> Optional[Path]:
    """``executable`` if it is a base interpreter (uv's "system" one); for a venv's, the ``python3.X`` in the
    ``home`` its ``pyvenv.cfg`` names (followed again for a venv made from a venv's interpreter); ``None`` for a
    pyenv shim, or a venv whose base is gone."""
    for _ in range(8):  # venvs of venvs, each a step; a pyvenv.cfg naming its own folder ends here too
        if executable.parent.name == "shims":
            return None
        settings = _venv_config(executable)
        if settings is None:
            return executable if os.access(executable, os.X_OK) else None
        if not settings.get("home"):
            return None
        executable = Path(settings["home"]) / executable.name
    return None


def _found(minor: str) -> Optional[Path]:
    """The first base ``python3.X`` along PATH: pyenv's shims left out (a shim exists for every installed version
    but runs only the selected ones), a venv's replaced by its base interpreter."""
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        candidate = shutil.which(f"python{minor}", path=folder) if folder else None
        base = _base_interpreter(Path(candidate)) if candidate is not None else None
        if base is not None:
            return base
    return None


def _pyenv_root() -> Optional[Path]:
    try:
        out = subprocess.run(["pyenv", "root"], capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    root = Path(out.strip() or os.environ.get("PYENV_ROOT", "") or Path.home() / ".pyenv")
    return root if (root / "versions").is_dir() else None


def _first_is_usable(minor: str) -> bool:
    """Whether the first ``python3.X`` on PATH is a base interpreter: not missing, not a pyenv shim (which runs
    only the selected versions; uv stops at the first ``python3.X`` it finds), and not a venv's (which uv refuses
    to make a venv from)."""
    first = shutil.which(f"python{minor}")
    return first is not None and _base_interpreter(Path(first)) == Path(first)


def _newest_pyenv_patch(root: Optional[Path], minor: str) -> Optional[Path]:
    if root is None:
        return None
    patches = [p for p in (root / "versions").glob(f"{minor}.*") if re.fullmatch(rf"{re.escape(minor)}\.\d+", p.name)]
    patches.sort(key=lambda p: int(p.name.split(".")[2]))
    executable = patches[-1] / "bin" / f"python{minor}" if patches else None
    return executable if executable is not None and executable.exists() else None


def _add_pyenv_interpreters() -> None:
    """Put a base ``python3.X`` at the front of PATH for each minor whose first one there is missing, a shim or a
    venv's: the newest pyenv patch release, else the first base one along PATH (a venv's base in its place);
    each a symlink in a folder of its own (pyenv's ``bin`` folders would bring their ``python`` and ``pip`` too)."""
    root = _pyenv_root()
    links = Path(__file__).resolve().parent / ".tox" / "interpreters"
    for minor in MINORS:
        if _first_is_usable(minor):
            continue
        target = _newest_pyenv_patch(root, minor) or _found(minor)
        if target is not None:
            links.mkdir(parents=True, exist_ok=True)
            link = links / f"python{minor}"
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(target)
    if links.is_dir():
        os.environ["PATH"] = os.pathsep.join([str(links), os.environ.get("PATH", "")])


@impl
def tox_env_teardown(tox_env: ToxEnv) -> None:
    match = re.match(r"py3(\d+)", tox_env.name)
    _wanted.append(f"3.{match.group(1)}" if match else "")


def _report_missing() -> None:
    missing = sorted({minor for minor in _wanted if minor and not _found(minor)},
                     key=lambda minor: int(minor.split(".")[1]))
    if missing:
        names = ", ".join(f"python{minor}" for minor in missing)
        strict = os.environ.get("TOX_SKIP_MISSING_INTERPRETERS", "").lower() in ("false", "0", "no", "off")
        sys.stderr.write(
            f"\ntox: {'FAILED' if strict else 'SKIPPED'} every env needing {names}: not on PATH nor under pyenv's "
            f"root. Install it (for example `pyenv install {missing[0]}`) and run tox again; CI (.ci/run) refuses "
            f"to skip.\n")


os.environ.setdefault("UV_PYTHON_DOWNLOADS", "never")  # tox-uv passes UV_* on to uv
_add_pyenv_interpreters()
atexit.register(_report_missing)
