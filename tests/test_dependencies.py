"""Every third-party package the code imports is declared in pyproject.toml.

An import that only works because something else happens to pull the package in (PyYAML came
with omegaconf, Pillow with matplotlib) breaks the day that dependency drops it. The check reads
the source, not the environment: every `import` of `src/headlab` and `benchmarks/`, module-level
or inside a function, against `[project] dependencies` and the optional extras.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")

REPO = Path(__file__).resolve().parents[1]
SOURCE_ROOTS = (REPO / "src" / "headlab", REPO / "benchmarks")
FIRST_PARTY = frozenset(root.name for root in SOURCE_ROOTS)


def _normalized(distribution: str) -> str:
    """PEP 503 name: `PyYAML` and `pyyaml` are one distribution, so are `a_b`, `a.b` and `A-B`."""
    return re.sub(r"[-_.]+", "-", distribution).lower()


def declared_distributions(pyproject: Path) -> set[str]:
    """Normalised names of `[project] dependencies` and of every `[project.optional-dependencies]` extra."""
    project = tomllib.loads(pyproject.read_text())["project"]
    requirements = [*project.get("dependencies", []), *(r for extra in project.get("optional-dependencies", {}).values() for r in extra)]
    names = set()
    for requirement in requirements:
        found = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
        assert found, f"{pyproject}: cannot read a distribution name from requirement {requirement!r}"
        names.add(_normalized(found.group(1)))
    return names


def imported_top_level_names(roots) -> dict[str, list[str]]:
    """Top-level module name -> files that import it (absolute imports anywhere in the module)."""
    found: dict[str, list[str]] = {}
    for root in roots:
        for path in sorted(Path(root).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    modules = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    modules = [node.module]
                else:
                    continue
                for module in modules:
                    found.setdefault(module.split(".")[0], []).append(str(path))
    return found


def undeclared_imports(roots, pyproject: Path, first_party=FIRST_PARTY) -> dict[str, tuple[list[str], list[str]]]:
    """Third-party import name -> (its distributions, files importing it) for each name no declared
    distribution provides. A name not installed here counts as the distribution of the same name."""
    declared = declared_distributions(pyproject)
    providers = importlib.metadata.packages_distributions()
    missing = {}
    for name, files in imported_top_level_names(roots).items():
        if name in sys.stdlib_module_names or name in first_party:
            continue
        distributions = providers.get(name, [name])
        if not any(_normalized(d) in declared for d in distributions):
            missing[name] = (distributions, files)
    return missing


def test_every_imported_third_party_package_is_declared():
    missing = undeclared_imports(SOURCE_ROOTS, REPO / "pyproject.toml")
    assert not missing, "imported but not declared in pyproject.toml: " + "; ".join(
        f"{name} (distribution {'/'.join(dists)}, imported by {files[0]})" for name, (dists, files) in sorted(missing.items()))


def _package(tmp_path: Path, source: str) -> Path:
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "mod.py").write_text(source)
    return root


def _pyproject(tmp_path: Path, dependencies: list[str], extras: dict[str, list[str]] | None = None) -> Path:
    lines = ["[project]", 'name = "x"', f"dependencies = {dependencies!r}".replace("'", '"')]
    if extras:
        lines += ["[project.optional-dependencies]", *(f"{k} = {v!r}".replace("'", '"') for k, v in extras.items())]
    path = tmp_path / "pyproject.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_an_undeclared_import_inside_a_function_is_named_with_its_distribution(tmp_path):
    """The state before PyYAML was declared: `yaml` (distribution PyYAML) imported in a function."""
    root = _package(tmp_path, "import os\nimport numpy as np\n\ndef read():\n    import yaml\n    from . import sibling\n")
    missing = undeclared_imports([root], _pyproject(tmp_path, ["numpy>=1.24"]), first_party=frozenset())
    assert list(missing) == ["yaml"]
    distributions, files = missing["yaml"]
    assert [d.lower() for d in distributions] == ["pyyaml"] and files == [str(root / "mod.py")]


def test_a_distribution_counts_in_dependencies_or_any_extra_under_any_spelling(tmp_path):
    root = _package(tmp_path, "import yaml\nfrom PIL import Image\nimport not_installed_pkg.sub\n")
    pyproject = _pyproject(tmp_path, ["PyYAML"], {"img": ["Pillow>=9"], "other": ["not-installed.pkg>=1"]})
    assert undeclared_imports([root], pyproject, first_party=frozenset()) == {}
    assert set(undeclared_imports([root], _pyproject(tmp_path, ["pyyaml==6.0"]), first_party=frozenset())) == {
        "PIL", "not_installed_pkg"}
