"""The package's dependency rule, read from the source (every import, module level or in a function):

- nothing outside `cli/` imports `headlab.cli`, and `cli/` holds only console entry points;
- no two modules import each other, directly or round a circle;
- packages import only their own layer or the layers below (the README's Development section);
- inside layer 3, packages have an order of their own: each imports only those before it in `WORKFLOW_ORDER`.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
# Lowest first. A package may import its own layer and those below it, never one above.
LAYERS = (
    {"errors", "config", "stats", "store", "analysis", "model", "data"},  # foundations: no headlab workflow
    {"measure", "interventions", "hf", "plots", "reload", "report"},  # compute on networks and tables (reload: a finished run
    # rebuilt; report: a run's tables in plain words)
    {"lit", "distill", "tasks", "sweep", "doctor", "reproduce", "view"},  # workflows over runs and sweeps
    {"cli"},  # console entry points only
)
# Layer 3, lowest first: a package imports only those to its left (the order the imports make; a new arrow
# to the right is a knot to untie, not a reason to reorder). sweep reads a multirun folder into runs;
# view renders runs and sweeps; lit trains (its head-metrics callback writes the run's view at fit end);
# distill trains a student through lit; tasks holds the commands' work on one run directory (training,
# importance, pruning, HF analysis); doctor and reproduce read run and sweep folders through store/.
WORKFLOW_ORDER = ("sweep", "view", "lit", "distill", "tasks", "doctor", "reproduce")


def module_files() -> dict[str, Path]:
    files = {}
    for path in (SRC / "headlab").rglob("*.py"):
        parts = path.relative_to(SRC).with_suffix("").parts
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


MODULES = module_files()


def imports_of(path: Path, known: set[str]) -> set[str]:
    """The headlab modules `path` imports anywhere (`from headlab.x import y` is headlab.x.y when y is a module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("headlab")}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("headlab"):
            found |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module for a in node.names}
    return {m for m in found if m in known}


GRAPH = {name: imports_of(path, set(MODULES)) - {name} for name, path in MODULES.items()}


def package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def layer(pkg: str) -> int:
    return next(i for i, members in enumerate(LAYERS) if pkg in members)


def find_circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as [m0, m1, ..., m0], or None (depth-first search)."""
    state: dict[str, str] = {}

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (circle := visit(nxt, [*path, nxt])):
                return circle
        state[node] = "done"
        return None

    for start in sorted(graph):
        if start not in state and (circle := visit(start, [start])):
            return circle
    return None


def test_find_circle_on_hand_built_graphs():
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_circle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_imports_of_resolves_submodules_and_function_level_imports(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("import os\nfrom headlab.tasks import info\n\ndef f():\n    from headlab.cli.train import main\n")
    known = {"headlab.tasks", "headlab.tasks.info", "headlab.cli.train"}
    assert imports_of(source, known) == {"headlab.tasks.info", "headlab.cli.train"}


def test_nothing_outside_cli_imports_cli():
    upward = sorted(f"{m} -> {t}" for m, targets in GRAPH.items() if package(m) != "cli"
                    for t in targets if package(t) == "cli")
    assert not upward, "modules below cli/ import from it:\n" + "\n".join(upward)


def test_no_import_circle():
    circle = find_circle(GRAPH)
    assert circle is None, "import circle: " + " -> ".join(circle or [])


def test_every_package_has_a_layer():
    packages = {package(m) for m in MODULES} - {""}
    assert packages <= set().union(*LAYERS), f"no layer for: {sorted(packages - set().union(*LAYERS))}"


def test_packages_import_only_their_layer_or_below():
    upward = sorted(f"{m} -> {t}" for m, targets in GRAPH.items() if package(m) for t in targets
                    if package(t) and layer(package(t)) > layer(package(m)))
    assert not upward, "imports that point up a layer:\n" + "\n".join(upward)


def test_workflow_order_holds_exactly_layer_3():
    assert sorted(WORKFLOW_ORDER) == sorted(LAYERS[2])


def test_layer_3_packages_import_only_those_before_them():
    rank = {pkg: i for i, pkg in enumerate(WORKFLOW_ORDER)}
    rightward = sorted(f"{m} -> {t}" for m, targets in GRAPH.items() if package(m) in rank for t in targets
                       if package(t) in rank and rank[package(t)] > rank[package(m)])
    assert not rightward, f"layer 3 imports against its order {WORKFLOW_ORDER}:\n" + "\n".join(rightward)


@pytest.mark.parametrize("module", sorted(m for m in MODULES if package(m) == "cli" and m != "headlab.cli"))
def test_cli_holds_only_console_entry_points(module):
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    entry_modules = {target.split(":")[0] for target in scripts.values()}
    assert module in entry_modules, f"{module} is in cli/ but is no console script: move it to the package it serves"
