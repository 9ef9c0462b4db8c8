"""Reading a checkpoint file safely: `torch.load(weights_only=True)`, so a checkpoint from a run
directory someone hands you never unpickles code; a damaged or foreign file is one CheckpointError.

Kept below `lit/` so `RunDir` can read a checkpoint's step without Lightning (torch is imported
only when a checkpoint is read).
"""

from __future__ import annotations

import os
from typing import Any

from headlab.errors import HeadlabError


class CheckpointError(HeadlabError):
    """A checkpoint cannot be used (unreadable, truncated, or from a different model)."""

    def __init__(self, path: Any, problem: str) -> None:
        self.path, self.problem = str(path), problem
        super().__init__(f"checkpoint {path}: {problem}")


def load_checkpoint(path: str | os.PathLike, mmap: bool = False) -> dict[str, Any]:
    """`torch.load(path, weights_only=True)` on CPU; a damaged file raises `CheckpointError`.

    `mmap=True` maps the tensors instead of reading them: for a caller that only looks at the
    metadata (hyper-parameters, step) of a checkpoint that is loaded in full later anyway."""
    import torch

    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except FileNotFoundError:
        raise CheckpointError(path, "file not found") from None
    except Exception as err:  # truncated zip, foreign pickle needing code, ...
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CheckpointError(path, f"cannot be read safely (truncated, or not a headlab checkpoint): {first}") from None
    if not isinstance(checkpoint, dict) or "state_dict" not in checkpoint:
        raise CheckpointError(path, "not a Lightning checkpoint (no 'state_dict')")
    return checkpoint


def saved_model_config(checkpoint: dict[str, Any], path: Any) -> dict[str, Any]:
    """The `ModelConfig` fields headlab stores in every checkpoint's hyper-parameters."""
    fields = (checkpoint.get("hyper_parameters") or {}).get("model_config")
    if not isinstance(fields, dict):
        raise CheckpointError(path, "has no headlab model_config: not written by headlab-train")
    return fields
