"""A non-editable install carries the configs: the wheel holds conf/ as headlab.conf, and the
installed `headlab-train` composes them from a directory that has nothing to do with the repo."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

# Builds and installs a wheel (about a minute on 2 cores): `make test-all` runs it, the default suite does not.
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
# What a source distribution holds: enough to build the wheel away from the working tree.
SOURCES = ("pyproject.toml", "setup.py", "README.md", "src", "conf")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel built from a copy of the sources (a build in the repo would race other test runs)."""
    root = tmp_path_factory.mktemp("wheel")
    src = root / "src_copy"
    src.mkdir()
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(path, src / name)
    out = root / "dist"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(src)],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (built,) = out.glob("headlab-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """`pip install --target` of that wheel: the package and its console scripts, no editable link."""
    target = tmp_path_factory.mktemp("target")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", str(target), str(wheel)],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return target


def _run(target: Path, cwd: Path, *cmd: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(target), "HEADLAB_LOG_DIR": str(cwd / "logs")}
    env.pop("HEADLAB_CONFIG_DIR", None)
    return subprocess.run(list(cmd), capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def test_wheel_holds_every_config_under_headlab_conf(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"headlab/conf/{p.relative_to(REPO / 'conf').as_posix()}" for p in (REPO / "conf").rglob("*.yaml")}
    assert len(expected) > 20  # every group: data, model, optim, ..., sweep, experiment
    assert expected <= names, sorted(expected - names)
    shipped = {n for n in names if n.startswith("headlab/conf/") and n.endswith(".yaml")}
    assert shipped == expected  # and nothing stale from an older copy
    assert "headlab/conf/__init__.py" in names and "headlab/cli/train.py" in names
    assert not any(n.startswith(("conf/", "src/")) for n in names)  # no stray top-level packages


def test_installed_package_is_imported_from_the_target_not_the_repo(installed, tmp_path):
    probe = ("import importlib.resources as r, headlab.cli.train as t; "
             "print(r.files('headlab.conf').joinpath('train.yaml')); print(t.__file__)")
    result = _run(installed, tmp_path, sys.executable, "-c", probe)
    assert result.returncode == 0, result.stderr[-3000:]
    conf_yaml, train_py = (Path(line) for line in result.stdout.split())
    assert conf_yaml.resolve().is_relative_to(installed.resolve()) and conf_yaml.is_file()
    assert train_py.resolve().is_relative_to(installed.resolve())


def test_installed_console_script_composes_from_an_unrelated_directory(installed, tmp_path):
    script = installed / "bin" / "headlab-train"
    result = _run(installed, tmp_path, str(script), "--cfg", "job")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "source: zh_reviews" in result.stdout and "seed: 42" in result.stdout
    # a config group other than the defaults resolves from the installed package too
    result = _run(installed, tmp_path, str(script), "--cfg", "job", "experiment=demo")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "min_freq: 2" in result.stdout and "max_epochs: 5" in result.stdout
    assert list(tmp_path.iterdir()) == []  # printing the config writes nothing
