"""Training helpers the suite shares: tiny configs composed through Hydra, and `headlab-train` run as a
real subprocess, as a user (or SLURM) would. Fixtures built on them are in tests/conftest.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, open_dict

# A model and schedule small enough for seconds of CPU per run. No per-run figures (matplotlib took
# 3-8 s of a 5-15 s tiny run); the tests of the figures switch them on (`figures=true`).
TINY = [
    "figures=false",
    "data=synthetic",
    "data.synthetic.n=800",
    "data.probe_size=32",
    "data.batch_size=32",
    "model.d_model=32",
    "model.n_heads=2",
    "model.n_layers=2",
    "trainer.max_epochs=1",
    "trainer.limit_train_batches=6",
    "trainer.enable_progress_bar=false",
    "trainer.enable_model_summary=false",
    "callbacks.progress_bar=null",
    "callbacks.head_metrics.every_n_steps=2",
    "callbacks.head_metrics.early_steps=4",
]


def compose_train_config(run_dir: Path, overrides: list[str]) -> DictConfig:
    """The config `headlab-train` would see, with its outputs in `run_dir`, checked as headlab-train
    checks it before the run starts (a mistake is a ConfigError here)."""
    from headlab.tasks.train_config import validate_config

    GlobalHydra.instance().clear()
    with initialize_config_module("headlab.conf", version_base="1.3"):
        cfg = compose("train", overrides=overrides, return_hydra_config=True)
    HydraConfig().set_config(cfg)
    with open_dict(cfg):
        cfg.paths.output_dir = str(run_dir)
        cfg.paths.log_dir = str(run_dir.parent)
        del cfg["hydra"]
    validate_config(cfg)
    return cfg


def train_keeping_threads(cfg: DictConfig) -> dict:
    """`train(cfg)` for a module-scoped fixture: `threads=1` in cfg sets torch's process-wide count,
    which is put back afterwards."""
    import torch

    from headlab.tasks.train import train

    threads = torch.get_num_threads()
    try:
        return train(cfg)
    finally:
        torch.set_num_threads(threads)


def file_listing(path: Path) -> list[tuple[str, int]]:
    """Every file under `path` with its modification time: equal listings = nothing written. Folders are
    listed by name only: a command's write probe (headlab.store.faults) touches a folder's mtime, no file."""
    return sorted((str(p.relative_to(path)), p.stat().st_mtime_ns if p.is_file() else 0) for p in path.rglob("*"))


def gated_val_loss(net, loader, gates) -> float:
    """Mean validation cross-entropy of `net` with head gates `[layer, head]`: the reference an
    ablation row is held against, computed without the importance code."""
    import torch.nn.functional as F

    losses = [F.cross_entropy(net(b["input_ids"], b["attention_mask"], head_gates=gates).logits, b["labels"],
                              reduction="sum") for b in loader]
    return float(sum(losses)) / len(loader.dataset)


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


def compose_command(config_name: str, overrides: Sequence[str], config_module: str = "headlab.conf",
                    schema: Any = None) -> Any:
    """The config a command composes from `overrides`,
    checked as a run checks it before anything is written; a bad override is one ConfigError."""
    from headlab.config.app import compose_checked, composing, store_schema
    from headlab.config.run_check import check_composed

    store_schema(config_name, schema)
    with composing(config_module):
        cfg = compose_checked(compose, config_name, overrides)
    check_composed(cfg)
    return cfg


def train_in_process(tmp_path: Path, monkeypatch, capfd, *args: str, prog: str = "headlab-train") -> subprocess.CompletedProcess:
    """`headlab-train args...` (or any console script, `prog="headlab-distill"`) through the `main` its installed
    script calls, in this process (the path a real process takes up to its exit, without the seconds of a fresh
    interpreter's imports), as `run_cli` reports it."""
    from importlib.metadata import entry_points

    from hydra.core.global_hydra import GlobalHydra

    (script,) = entry_points(group="console_scripts", name=prog)  # the function the installed script calls
    main = script.load()
    monkeypatch.setattr(sys, "argv", [prog, *args])
    monkeypatch.setenv("HEADLAB_LOG_DIR", str(tmp_path / "logs"))
    monkeypatch.chdir(tmp_path)
    capfd.readouterr()
    code = 0
    try:
        code = int(main() or 0)  # the script exits with what main returns (or raises SystemExit with)
    except SystemExit as exited:
        code = int(exited.code or 0)
    finally:
        GlobalHydra.instance().clear()
    out, err = capfd.readouterr()
    return subprocess.CompletedProcess([prog, *args], code, out, err)
