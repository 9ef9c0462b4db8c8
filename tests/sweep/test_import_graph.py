"""The modules of `headlab.sweep` import each other one way: no circle, not even inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

import headlab.sweep

PACKAGE = "headlab.sweep"
SWEEP_DIR = Path(headlab.sweep.__file__).parent
MODULES = sorted(p.stem for p in SWEEP_DIR.glob("*.py") if p.stem != "__init__")


def sweep_imports(module: str) -> set[str]:
    """The sibling modules `module` imports anywhere in its source (module level or in a function)."""
    imported = set()
    for node in ast.walk(ast.parse((SWEEP_DIR / f"{module}.py").read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == PACKAGE:
            names = [f"{PACKAGE}.{a.name}" for a in node.names]  # `from headlab.sweep import heads`
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        imported |= {n.split(".")[2] for n in names if n.startswith(PACKAGE + ".") and n.split(".")[2] in MODULES}
    return imported - {module}


def find_circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as [m0, m1, ..., m0], or None when the graph has none (depth-first search)."""
    state: dict[str, str] = {}  # "open" while on the path, "done" after

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = "open"
        for nxt in sorted(graph[node]):
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


def test_find_circle_finds_a_hand_built_one():
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_circle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_sweep_modules_import_each_other_one_way():
    graph = {m: sweep_imports(m) for m in MODULES}
    assert find_circle(graph) is None, f"import circle in {PACKAGE}: {' -> '.join(find_circle(graph))}"


def test_the_head_tables_and_the_importance_tables_meet_only_in_matching():
    assert "matching" in sweep_imports("heads") and "matching" in sweep_imports("importance")
    assert "importance" not in sweep_imports("heads") and "heads" not in sweep_imports("importance")
    assert sweep_imports("matching") <= {"runs"}
