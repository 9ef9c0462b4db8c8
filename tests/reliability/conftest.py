"""Helpers for reliability tests: run `headlab-train` as a real subprocess, as a user (or SLURM) would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# Tiny and deterministic: 2 epochs x 10 steps, checkpoint every 3 steps, heads measured every 3 steps up to 9.
RESUMABLE = [
    "data=synthetic", "data.synthetic.n=800", "data.probe_size=32", "data.batch_size=32",
    "model.d_model=32", "model.n_heads=2", "model.n_layers=2",
    "trainer.max_epochs=2", "trainer.limit_train_batches=10", "trainer.deterministic=true", "trainer.log_every_n_steps=2",
    "trainer.enable_progress_bar=false", "trainer.enable_model_summary=false", "callbacks.progress_bar=null",
    "callbacks.head_metrics.every_n_steps=3", "callbacks.head_metrics.early_steps=9", "callbacks.head_metrics.early_spacing=linear", "callbacks.head_metrics.figures=false",
    "callbacks.checkpoint.every_n_train_steps=3",
]


def cli_command(*overrides: str) -> list[str]:
    return [sys.executable, "-m", "headlab.cli.train", *overrides]


def cli_env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "HEADLAB_LOG_DIR": str(tmp_path / "logs"), "PYTHONUNBUFFERED": "1"}


def run_cli(tmp_path: Path, *overrides: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(cli_command(*overrides), capture_output=True, text=True, env=cli_env(tmp_path),
                          timeout=timeout, cwd=tmp_path)


def summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


import pytest  # noqa: E402

from tests.cli.conftest import TINY, compose_train_config  # noqa: E402


@pytest.fixture
def tiny_config():
    def make(run_dir: Path, *extra: str):
        return compose_train_config(run_dir, TINY + list(extra))

    return make


@pytest.fixture(scope="session")
def compose_tiny():
    def make(run_dir: Path, *extra: str):
        return compose_train_config(run_dir, TINY + list(extra))

    return make


@pytest.fixture(autouse=True)
def _forget_hydra_config():
    """See tests/cli/conftest.py: no test inherits Hydra's global run config from another."""
    yield
    from hydra.core.hydra_config import HydraConfig

    HydraConfig.instance().cfg = None


# One uninterrupted run of RESUMABLE per test module: what every killed-and-resumed run must equal.
@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("reference")
    result = run_cli(tmp, *RESUMABLE, f"hydra.run.dir={tmp / 'run'}")
    assert result.returncode == 0, result.stderr[-3000:]
    return tmp / "run"
