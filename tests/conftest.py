"""Suite-wide setup: caches and run folders go to a temp dir, never $HOME or the repo."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

_ROOT = Path(tempfile.gettempdir()) / f"headlab-tests-{os.getuid()}"
# Read when matplotlib / wandb are first imported: set before any test module imports them.
for _var, _sub in (("MPLCONFIGDIR", "mplconfig"), ("WANDB_DIR", "wandb"), ("WANDB_CACHE_DIR", "wandb-cache"),
                   ("WANDB_CONFIG_DIR", "wandb-config"), ("WANDB_DATA_DIR", "wandb-data")):
    os.environ.setdefault(_var, str(_ROOT / _sub))
    Path(os.environ[_var]).mkdir(parents=True, exist_ok=True)
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")

from tests._runs import RESUMABLE, TINY, compose_train_config, run_cli  # noqa: E402 - after the cache dirs are set


@pytest.fixture(autouse=True)
def _forget_hydra_config():
    """`compose_train_config` (tests/_runs.py, used across the suite) sets Hydra's global run
    config; unset it after every test, so later tests (e.g. config checks outside a Hydra run) see no
    leftover `hydra:` values whatever order the tests run in."""
    yield
    from hydra.core.hydra_config import HydraConfig

    HydraConfig.instance().cfg = None


# ---- fixtures over tests/_runs.py: tiny trainings any test directory may use ------------------------------
@pytest.fixture
def tiny_config():
    """`tiny_config(run_dir, *extra)`: the config `headlab-train` would see for TINY + extra."""
    def make(run_dir: Path, *extra: str):
        return compose_train_config(run_dir, TINY + list(extra))

    return make


@pytest.fixture(scope="session")
def compose_tiny():
    """`compose_tiny(run_dir, *extra)` for fixtures wider than one test (module-scoped runs)."""

    def make(run_dir: Path, *extra: str):
        return compose_train_config(run_dir, TINY + list(extra))

    return make


@pytest.fixture
def one_thread():
    """Tiny models on a shared machine: extra torch threads only spin."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def run_copy(trained, tmp_path):
    """A copy of the module's `trained` run directory, for a command that writes into it."""
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(trained, copy)
    return copy


# One uninterrupted run of RESUMABLE per test module: what every killed-and-resumed run must equal.
@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("reference")
    result = run_cli(tmp, *RESUMABLE, f"hydra.run.dir={tmp / 'run'}")
    assert result.returncode == 0, result.stderr[-3000:]
    return tmp / "run"
