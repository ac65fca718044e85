"""The package's map: six layers (foundations, declarations, the write path, I/O, operations, entry points), each
module importing only from its own layer or below, no import cycle, and no import inside a function to dodge one
(but the demo's)."""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Optional, Set

import pynamodb_counters

PACKAGE = Path(pynamodb_counters.__file__).parent

LAYERS: Dict[str, int] = {
    # 0: foundations every layer may use
    "exceptions": 0, "signals": 0, "_results": 0, "_context": 0, "_costs": 0, "_compat": 0,
    "_cancellations": 0,
    # 1: declarations
    "_base": 1, "attributes": 1, "_shards": 1, "_recorder": 1, "_relation_rules": 1, "relations": 1, "_spec": 1,
    "_expiry_rules": 1,
    # 2: the write path, no I/O: a caller's write, what a child is stored as, its deltas, the actions of a plan
    "_items": 2, "_stored": 2, "_writes": 2, "_deltas": 2, "_conditions": 2, "_actions": 2,
    "_parent_update": 2, "_other_actions": 2, "_plan": 2,
    "_chunks": 2, "_audit_rules": 2, "_export_counts": 2, "_export_conditions": 2, "_expiries": 2,
    # 3: I/O: sending, reading (the live table, and table exports), and what a refusal teaches (some recoveries
    # write); the engines a computation over an export's data files runs on
    "_send": 3, "_reads": 3, "_shard_items": 3, "_set_counter": 3, "_refusals": 3, "_recoveries": 3, "_commit": 3,
    "_exports": 3, "_export_sources": 3, "_engines": 3,
    # 4: operations
    "_reports": 4, "transactions": 4, "models": 4, "bulk": 4, "reconcile": 4, "resharding": 4, "feeders": 4,
    "_export_audit": 4, "streams": 4, "_auditor": 4,
    # 5: entry points
    "__init__": 5, "cli": 5, "demo": 5, "pytest_plugin": 5, "__main__": 5, "testing": 5,
    "_cli_output": 5, "_cli_targets": 5,  # the command's printing, and what its arguments name
}
NO_IO = {name for name, layer in LAYERS.items() if layer <= 2}


def _imports(path: Path, tree: Optional[ast.Module] = None) -> Dict[str, List[ast.ImportFrom]]:
    """The package modules ``path`` imports (relative imports, by their first name under the package), each with
    its import statements."""
    found: Dict[str, List[ast.ImportFrom]] = {}
    for node in ast.walk(tree or ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            inside = path.parent != PACKAGE and node.level == 1  # testing/x.py: ``from .y`` stays in testing
            names = [node.module] if node.module else [alias.name for alias in node.names]
            for name in names:
                first = "testing" if inside else name.split(".")[0]
                if (PACKAGE / f"{first}.py").exists() or (PACKAGE / first).is_dir():
                    found.setdefault(first, []).append(node)
    return found


def _module(path: Path) -> str:
    relative = path.relative_to(PACKAGE)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def _graph() -> Dict[str, Set[str]]:
    graph: Dict[str, Set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        graph.setdefault(_module(path), set()).update(name for name in _imports(path) if name != _module(path))
    return graph


def test_every_module_has_a_layer() -> None:
    assert set(_graph()) == set(LAYERS)


def test_each_module_imports_only_from_its_layer_or_below() -> None:
    upward = [(module, name) for module, names in _graph().items() for name in names
              if LAYERS[name] > LAYERS[module]]
    assert upward == []


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
        for name, nodes in _imports(path, tree).items():
            for node in nodes:
                if id(node) not in top_level and id(node) not in guarded:
                    hidden.append(f"{path.relative_to(PACKAGE)}: {name}")
    assert hidden == ["cli.py: demo"]  # the demo (and its models) load only when the command runs


def test_the_layers_without_io_import_no_sender() -> None:
    graph = _graph()
    assert {module: graph[module] & {"_send", "_reads", "_commit"} for module in NO_IO
            if graph[module] & {"_send", "_reads", "_commit"}} == {}


def test_no_module_is_over_400_lines() -> None:
    """Small modules, one concept each: a module past 400 lines holds more than one."""
    long = {str(path.relative_to(PACKAGE)): lines for path in PACKAGE.rglob("*.py")
            if (lines := len(path.read_text().splitlines())) > 400}
    assert long == {}
