"""The package's map: folders that name the architecture (``declare/``, ``write/``, ``reconcile/``, ``streams/``,
``cli/``, ``testing/``) and at most 15 top-level modules, the foundations and the entry points. The rules between
them: the foundations import only each other; ``declare/`` imports no ``write/``, and neither imports the entry
points or the folders built on them; ``write/`` and ``streams/`` import no ``reconcile/`` (``reconcile/`` reads
what a stream record counts from ``streams/``, to audit counters fed from the stream); the declarations and the
plan import no sender; no import cycle between modules; no import inside a function to dodge one (but the demo's).

Past about 800 lines a module is a question for review, not a failing test."""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

import pynamodb_counters

PACKAGE = Path(pynamodb_counters.__file__).parent

FOUNDATIONS = {"exceptions", "signals", "_cancellations", "_keys", "_costs", "_write_results"}
"""Top-level modules every folder may use; they import only each other."""

ENTRY_POINTS = {"models", "bulk", "transactions", "resharding", "feeders"}
"""Top-level modules that write, read or reconcile on behalf of a caller: nothing below them imports them."""

NEVER_IMPORTS: Dict[str, Set[str]] = {
    "declare": {"write", "reconcile", "streams", "cli", "testing"} | ENTRY_POINTS,
    "write": {"reconcile", "streams", "cli", "testing"} | ENTRY_POINTS,
    "streams": {"reconcile", "cli", "testing"} | ENTRY_POINTS,
    "reconcile": {"cli", "testing", "feeders"},
}
"""What the modules of a folder never import: folders, and top-level modules, by name."""

SENDERS = {"transport._sync", "transport._async", "write._send", "write._fetches", "write._commit"}
"""The modules that send a request or read the table: the port's two drivers, and what runs its decision loops on
the sync one."""


def _module(path: Path) -> str:
    """A module's dotted name inside the package (``__init__`` for the package itself)."""
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def _exists(name: str) -> bool:
    path = PACKAGE.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _imports(path: Path, tree: Optional[ast.Module] = None) -> List[Tuple[str, ast.ImportFrom]]:
    """The package modules ``path`` imports (relative imports), each with its import statement."""
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)[:-1]  # the package the module is in
    found: List[Tuple[str, ast.ImportFrom]] = []
    for node in ast.walk(tree or ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = parts[:len(parts) - node.level + 1]
            target = ".".join(base + ([node.module] if node.module else []))
            names = [f"{target}.{alias.name}".lstrip(".") for alias in node.names]
            modules = [name for name in names if _exists(name)]  # ``from . import signals``: a module
            for name in modules or [target or "__init__"]:
                found.append((name, node))
    return found


def _graph() -> Dict[str, Set[str]]:
    """Each module's imports, and the packages each import runs first (``import a.b.c`` from outside ``a``
    runs ``a/__init__.py``, then ``a/b/__init__.py``)."""
    graph: Dict[str, Set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        module = _module(path)
        edges = graph.setdefault(module, set())
        for name, _ in _imports(path):
            parts = name.split(".")
            edges.update(ancestor for i in range(1, len(parts))
                         if not (module + ".").startswith((ancestor := ".".join(parts[:i])) + "."))
            edges.add(name)
        edges.discard(module)
        edges.discard("__init__")  # the package itself: it runs first, whatever is imported
    return graph


def _area(module: str) -> str:
    """A module's folder, or the module itself at the top level."""
    return module.split(".")[0]


def test_the_foundations_import_only_each_other() -> None:
    graph = _graph()
    assert {module: graph[module] - FOUNDATIONS for module in FOUNDATIONS if graph[module] - FOUNDATIONS} == {}


def test_each_folder_imports_none_of_what_it_must_not() -> None:
    crossings = sorted((module, name) for module, names in _graph().items() for name in names
                       if _area(name) in NEVER_IMPORTS.get(_area(module), set()))
    assert crossings == []


def test_there_is_no_import_cycle() -> None:
    graph = _graph()
    state: Dict[str, int] = {}
    cycles: List[List[str]] = []

    def visit(module: str, trail: List[str]) -> None:
        state[module] = 1
        for name in sorted(graph[module]):
            if state.get(name) == 1:
                cycles.append(trail[trail.index(name):] + [name])
            elif name not in state:
                visit(name, trail + [name])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert cycles == []


def test_no_package_import_hides_inside_a_function() -> None:
    hidden = []
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        top_level = {id(node) for node in tree.body}
        guarded = {id(inner) for node in tree.body if isinstance(node, ast.If) for inner in node.body}
        for name, node in _imports(path, tree):
            if id(node) not in top_level and id(node) not in guarded:
                hidden.append((_module(path), name))
    assert hidden == [("cli", "cli.demo")]  # the demo (and its models) load only when the command runs


def test_the_declarations_and_the_plan_import_no_sender() -> None:
    graph = _graph()
    planning = {f"write.{name}" for name in ("_items", "_stored", "_writes", "_deltas", "_conditions", "_actions",
                                             "_plan", "_chunks", "_markers", "_skipping")} \
        | {"reconcile._audit_rules", "reconcile.export._counts"}
    no_io = {module for module in graph if _area(module) == "declare"} | planning
    assert {module: graph[module] & SENDERS for module in no_io if graph[module] & SENDERS} == {}


def test_the_top_level_holds_at_most_15_modules() -> None:
    """The public face, the foundations and the entry points: everything else lives in a folder named for what it
    is."""
    top = sorted(path.stem for path in PACKAGE.glob("*.py"))
    assert len(top) <= 15, top
    assert set(top) <= FOUNDATIONS | ENTRY_POINTS | {"__init__", "__main__", "pytest_plugin"}
