"""A user's own config groups live outside the package: `my_conf/experiment/foo.yaml` becomes
`experiment=foo` through HEADLAB_CONFIG_DIR, a `hydra.searchpath` override or `--config-dir`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf

from tests._runs import train_in_process

# A user's experiment: values no shipped config uses, so seeing them proves the file was read.
USER_EXPERIMENT = """\
# @package _global_
defaults:
  - override /data: synthetic
data:
  synthetic:
    n: 300
  probe_size: 16
model:
  n_layers: 1
  n_heads: 3
  d_model: 24
seed: 7
"""

# The three documented ways to point headlab-train at my_conf/ (relative to the working directory).
WAYS = {
    "env": ({"HEADLAB_CONFIG_DIR": "my_conf"}, []),
    "searchpath": ({}, ["hydra.searchpath=[file://my_conf]"]),
    "config_dir": ({}, ["--config-dir", "my_conf"]),
}


@pytest.fixture
def user_dir(tmp_path) -> Path:
    experiment = tmp_path / "my_conf" / "experiment"
    experiment.mkdir(parents=True)
    (experiment / "mine.yaml").write_text(USER_EXPERIMENT)
    return tmp_path


def _train(cwd: Path, env_extra: dict, *args: str) -> subprocess.CompletedProcess:
    """The real process: the environment variable read where a user sets it."""
    env = {**os.environ, "HEADLAB_LOG_DIR": str(cwd / "logs"), **env_extra}
    if "HEADLAB_CONFIG_DIR" not in env_extra:
        env.pop("HEADLAB_CONFIG_DIR", None)
    return subprocess.run([sys.executable, "-m", "headlab.cli.train", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)


@pytest.fixture
def train_here(user_dir, monkeypatch, capfd):
    """`headlab-train` through its main in this process, from `user_dir`, with the given environment."""
    def run(env_extra: dict, *args: str) -> subprocess.CompletedProcess:
        monkeypatch.delenv("HEADLAB_CONFIG_DIR", raising=False)
        for key, value in env_extra.items():
            monkeypatch.setenv(key, value)
        return train_in_process(user_dir, monkeypatch, capfd, *args)

    return run


@pytest.mark.parametrize("way", sorted(WAYS))
def test_user_experiment_composes_over_the_package_defaults(train_here, way):
    env, args = WAYS[way]
    result = train_here(env, "--cfg", "job", *args, "experiment=mine")
    assert result.returncode == 0, result.stderr[-3000:]
    cfg = OmegaConf.create(result.stdout)
    assert (cfg.seed, cfg.model.n_heads, cfg.model.d_model, cfg.data.source) == (7, 3, 24, "synthetic")
    assert cfg.model.pos_encoding == "sinusoidal"  # keys the user left alone keep the package's defaults


def test_without_the_user_dir_the_experiment_is_a_one_line_error(train_here):
    result = train_here({}, "--cfg", "job", "experiment=mine")
    assert result.returncode == 2
    assert "invalid config experiment='mine'" in result.stderr and "demo" in result.stderr


def test_a_misspelt_user_experiment_lists_the_users_options_too(train_here):
    result = train_here(WAYS["env"][0], "--cfg", "job", "experiment=mnie")
    assert result.returncode == 2
    assert "invalid config experiment='mnie'" in result.stderr and "mine" in result.stderr


def test_a_run_from_a_user_experiment_trains_the_users_model(user_dir):
    result = _train(user_dir, WAYS["env"][0], "experiment=mine", "debug=fast", "test=false")
    assert result.returncode == 0, result.stderr[-3000:]
    (run_dir,) = (user_dir / "logs" / "runs").iterdir()
    saved = OmegaConf.load(run_dir / ".hydra" / "config.yaml")
    assert (saved.seed, saved.model.n_heads, saved.data.synthetic.n) == (7, 3, 300)
    heads = pd.read_parquet(run_dir / "head_metrics.parquet")
    assert sorted(heads["head"].unique()) == [0, 1, 2] and sorted(heads["layer"].unique()) == [0]
