"""Docstring examples are tests: pytest collects them from every module under src/headlab
(pyproject's testpaths and --doctest-modules), and collecting them, which imports every module,
writes nothing to the working directory or the home directory."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "src" / "headlab"


def _modules_with_examples() -> set[str]:
    return {path.relative_to(REPO).as_posix() for path in PACKAGE.rglob("*.py")
            if re.search(r"^\s*>>> ", path.read_text(encoding="utf-8"), flags=re.MULTILINE)}


def test_the_default_run_collects_every_modules_examples_and_importing_them_writes_nothing(tmp_path):
    cwd, home = tmp_path / "cwd", tmp_path / "home"
    cwd.mkdir()
    home.mkdir()
    # a bare `pytest` in the repo searches testpaths; run here, away from the repo, on that path
    testpaths = re.search(r"^testpaths = \[(.*)\]$", (REPO / "pyproject.toml").read_text(), flags=re.MULTILINE)
    assert '"src/headlab"' in testpaths.group(1)
    args = ["-c", str(REPO / "pyproject.toml"), "--rootdir", str(REPO), str(PACKAGE)]
    result = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                            capture_output=True, text=True, cwd=cwd, env={**os.environ, "HOME": str(home)}, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:]
    collected = {line.split("::")[0] for line in result.stdout.splitlines() if line.startswith("src/headlab/")}
    expected = _modules_with_examples()
    assert len(expected) >= 10  # the analysis metrics, roles, stats, schedules ... each carry examples
    assert expected <= collected, sorted(expected - collected)
    assert list(cwd.iterdir()) == [] and list(home.iterdir()) == []
