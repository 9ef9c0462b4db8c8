"""The head tables and the importance tables of a sweep meet only in `sweep.matching` (the whole
package's import rule, circles included, is tests/test_layering.py)."""

from __future__ import annotations

from tests.test_layering import GRAPH


def sweep_imports(module: str) -> set[str]:
    return {m.rsplit(".", 1)[1] for m in GRAPH[f"headlab.sweep.{module}"] if m.startswith("headlab.sweep.")}


def test_the_head_tables_and_the_importance_tables_meet_only_in_matching():
    assert "matching" in sweep_imports("heads") and "matching" in sweep_imports("importance")
    assert "importance" not in sweep_imports("heads") and "heads" not in sweep_imports("importance")
    assert sweep_imports("matching") <= {"runs", "lm_roles"}  # lm_roles: the role metric's name (it imports analysis only)
