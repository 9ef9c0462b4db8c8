"""A trained network from a checkpoint, and the pruned checkpoint that reads back the same way.

Both files hold tensors, numbers and strings only: `load_checkpoint` is `torch.load(weights_only=True)`,
so a checkpoint from someone's run directory never unpickles code.
"""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from headlab.model import HeadlabClassifier, ModelConfig
from headlab.store import atomic_path
from headlab.store.checkpoint_file import load_checkpoint, saved_model_config


def save_pruned(path: Path, net: torch.nn.Module, removed: list[Any], *, step: int, epoch: int,
                pruned_from: str | os.PathLike, settings: dict[str, Any]) -> Path:
    """A checkpoint `load_network` reads back: the ModelConfig as trained plus the heads removed per
    layer (tensors, numbers and strings only, so loading it unpickles no code)."""
    checkpoint = {"state_dict": {f"net.{k}": v.detach().cpu() for k, v in net.state_dict().items()},
                  "hyper_parameters": {"model_config": asdict(net.config), "pruned_heads": [sorted(h) for h in removed]},
                  "global_step": step, "epoch": epoch, "pruned_from": str(pruned_from), "prune_settings": settings}
    with atomic_path(path) as tmp:
        torch.save(checkpoint, tmp)
    return path


def load_network(path: str | os.PathLike) -> torch.nn.Module:
    """The trained `HeadlabClassifier` of a checkpoint, in eval mode: for analysis after a run
    (the checkpoint stores its `ModelConfig`, and `pruned_heads` when headlab-prune removed heads)."""
    checkpoint = load_checkpoint(path)
    net = HeadlabClassifier(ModelConfig(**saved_model_config(checkpoint, path)))
    pruned = (checkpoint.get("hyper_parameters") or {}).get("pruned_heads")
    if pruned:  # a headlab-prune checkpoint: per layer, the original heads it removed
        net.prune_heads({layer: heads for layer, heads in enumerate(pruned) if heads})
    prefix = "net."
    state = {k[len(prefix):]: v for k, v in checkpoint["state_dict"].items() if k.startswith(prefix)}
    net.load_state_dict(state)
    return net.eval()
