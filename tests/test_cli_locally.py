"""The "Trying the commands locally" recipe of ``docs/cli.rst`` runs as written: its ``myapp/models.py`` and
``seed.py`` blocks as files, then each line of its console block, in order, in one environment without AWS settings
but the recipe's: moto's server started by its own command (on a free port, not 5000), the exports, the seed, and
each command, whose stdout holds the lines the page shows under it and whose exit status is the one it says."""
from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest

PAGE = Path(__file__).resolve().parent.parent / "docs" / "cli.rst"
pytestmark = pytest.mark.served  # it starts a moto server of its own


def recipe() -> str:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index("Trying the commands locally\n---")
    return text[start:text.index("\n``audit`` and ``repair``\n---", start)]


def blocks(kind: str) -> List[str]:
    found = re.findall(rf"\.\. code-block:: {kind}\n\n((?:(?:   .*)?\n)+)", recipe())
    return [textwrap.dedent(block) for block in found]


def steps() -> List[Tuple[str, List[str]]]:
    """Each ``$`` command of the console block, with the lines shown after it."""
    shown: List[Tuple[str, List[str]]] = []
    for line in blocks("console")[0].strip().splitlines():
        if line.startswith("$ "):
            shown.append((line[2:], []))
        else:
            shown[-1][1].append(line)
    return shown


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    models, seed = blocks("python")
    (tmp_path / "myapp").mkdir()
    (tmp_path / "myapp" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "myapp" / "models.py").write_text(models, encoding="utf-8")
    (tmp_path / "seed.py").write_text(seed, encoding="utf-8")
    return tmp_path


@pytest.fixture
def environment() -> Iterator[Dict[str, str]]:
    yield {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}


def start_server(command: List[str], port: int, cwd: Path, env: Dict[str, str]) -> subprocess.Popen[str]:
    """Start ``moto_server`` as the recipe does and return once it listens: werkzeug says so on stderr after it has
    bound its socket."""
    server = subprocess.Popen([*command[:-1], str(port)], cwd=cwd, env=env, stderr=subprocess.PIPE,
                              stdout=subprocess.DEVNULL, text=True)
    assert server.stderr is not None
    seen: List[str] = []
    for line in server.stderr:
        seen.append(line)
        if "Running on" in line:
            return server
    raise AssertionError(f"moto_server did not start: {''.join(seen)}")


def test_the_recipe_runs_as_written(workdir: Path, environment: Dict[str, str]) -> None:
    port = free_port()
    bin_dir = str(Path(sys.executable).parent)
    environment["PATH"] = bin_dir + os.pathsep + environment.get("PATH", "")
    server = None
    statuses: List[Tuple[str, int]] = []
    try:
        for command, shown in steps():
            command = command.replace("5000", str(port))
            words = shlex.split(command)
            if words[:2] == ["pip", "install"]:
                import moto.server  # noqa: F401  (the test extra installs moto[server])
                continue
            if words[0] == "moto_server":
                assert words[-1] == "&"
                server = start_server(words[:-1], port, workdir, environment)
                continue
            if words[0] == "export":
                environment.update(word.split("=", 1) for word in words[1:])
                continue
            if words[0] == "python":
                words[0] = sys.executable
            finished = subprocess.run(words, cwd=workdir, env=environment, capture_output=True, text=True,
                                      timeout=120)
            statuses.append((words[1], finished.returncode))
            assert finished.returncode in (0, 1), f"{command}: {finished.stderr}"
            for line in shown:
                assert line in finished.stdout.splitlines(), f"{command} printed:\n{finished.stdout}"
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
    assert server is not None and set(environment) >= {"AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID"}
    said = re.search(r"The audit exits with ``(\d)`` \(drift\), the repair and the second audit with ``(\d)``",
                     recipe())
    assert said is not None
    drift, clean = int(said.group(1)), int(said.group(2))
    assert statuses == [("seed.py", 0), ("audit", drift), ("repair", clean), ("audit", clean)]
