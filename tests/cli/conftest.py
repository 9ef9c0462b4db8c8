"""Compose real configs through Hydra's compose API and train tiny models on CPU."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, open_dict

# A model and schedule small enough for seconds of CPU per run.
TINY = [
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
    """The config `headlab-train` would see, with its outputs in `run_dir`."""
    GlobalHydra.instance().clear()
    with initialize_config_module("headlab.conf", version_base="1.3"):
        cfg = compose("train", overrides=overrides, return_hydra_config=True)
    HydraConfig().set_config(cfg)
    with open_dict(cfg):
        cfg.paths.output_dir = str(run_dir)
        cfg.paths.log_dir = str(run_dir.parent)
        del cfg["hydra"]
    return cfg


@pytest.fixture
def tiny_config():
    def make(run_dir: Path, *extra: str) -> DictConfig:
        return compose_train_config(run_dir, TINY + list(extra))

    return make


@pytest.fixture(scope="session")
def compose_tiny():
    """`compose_tiny(run_dir, *extra)` for fixtures wider than one test (module-scoped runs)."""

    def make(run_dir: Path, *extra: str) -> DictConfig:
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


@pytest.fixture
def run_copy(trained, tmp_path):
    """A copy of the module's `trained` run directory, for a command that writes into it."""
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(trained, copy)
    return copy


def file_listing(path: Path) -> list[tuple[str, int]]:
    """Every file under `path` with its modification time: equal listings = nothing written."""
    return sorted((str(p.relative_to(path)), p.stat().st_mtime_ns) for p in path.rglob("*"))


def gated_val_loss(net, loader, gates) -> float:
    """Mean validation cross-entropy of `net` with head gates `[layer, head]`: the reference an
    ablation row is held against, computed without the importance code."""
    import torch.nn.functional as F

    losses = [F.cross_entropy(net(b["input_ids"], b["attention_mask"], head_gates=gates).logits, b["labels"],
                              reduction="sum") for b in loader]
    return float(sum(losses)) / len(loader.dataset)
