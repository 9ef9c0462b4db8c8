"""What every Lightning training of a Hugging Face network shares: the optimiser, the step, the Trainer.

`HFTrainModule` trains its whole `net` with AdamW and logs `train/loss`; a subclass says only what
the loss of a batch is (`headlab.lit.hf_finetune`: cross-entropy of a classifier head,
`headlab.lit.hf_lm`: the causal or masked language-model loss of the HF head). `fit_on_cpu` runs
pre-drawn batches, one per optimiser step, through a `lightning.Trainer` on the CPU with nothing
written (no logger, no Lightning checkpoint, no progress bar, no model summary, Lightning's
"GPU available" lines held back) and leaves torch's global determinism flags as it found them
(`Trainer(deterministic=...)` sets them for the whole process).
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Sequence
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset


class HFTrainModule(L.LightningModule):
    """`net` trained end to end with AdamW (`lr`, `weight_decay`) on `self.loss(batch)`, one step per batch."""

    def __init__(self, net: torch.nn.Module, lr: float, weight_decay: float = 0.01) -> None:
        super().__init__()
        self.net = net
        self.lr, self.weight_decay = lr, weight_decay

    def on_fit_start(self) -> None:
        self.net.train()  # trained end to end, as a plain loop's model.train(): Lightning keeps the modes it finds

    def loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The scalar a step minimises (each subclass defines its objective)."""
        raise NotImplementedError(f"{type(self).__name__} defines no loss")

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = self.loss(batch)
        self.log("train/loss", loss, prog_bar=False, batch_size=len(batch["input_ids"]))
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.net.parameters(), lr=self.lr, weight_decay=self.weight_decay)


class PreparedBatches(Dataset):
    """Pre-drawn batches, one per optimiser step (a DataLoader with batch_size=None passes them through)."""

    def __init__(self, batches: Sequence[dict[str, torch.Tensor]]) -> None:
        self.batches = batches

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return self.batches[i]


def fit_on_cpu(module: L.LightningModule, batches: Sequence[dict[str, torch.Tensor]],
               callbacks: Sequence[L.Callback] = (), deterministic: bool = False) -> L.Trainer:
    """One optimiser step per batch of `batches`, in order, on the CPU; returns the finished Trainer."""
    flags = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
             torch.backends.cudnn.benchmark, os.environ.get("CUBLAS_WORKSPACE_CONFIG"))
    quiet = logging.getLogger("lightning.pytorch")
    level = quiet.level
    quiet.setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings():
            # one process, batches already in memory: a loader worker would only copy them
            warnings.filterwarnings("ignore", message=r".*does not have many workers.*")
            # Lightning calling a torch API torch has deprecated: nothing a user can change
            warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated")
            trainer = L.Trainer(max_steps=len(batches), max_epochs=1, accelerator="cpu", devices=1, logger=False,
                                enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                                num_sanity_val_steps=0, callbacks=list(callbacks), deterministic=deterministic)
            trainer.fit(module, DataLoader(PreparedBatches(batches), batch_size=None, shuffle=False))
    finally:
        quiet.setLevel(level)
        torch.use_deterministic_algorithms(flags[0], warn_only=flags[1])
        torch.backends.cudnn.benchmark = flags[2]
        if flags[3] is None:
            os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
        else:
            os.environ["CUBLAS_WORKSPACE_CONFIG"] = flags[3]
    return trainer


def trained_loss(trainer: L.Trainer) -> float:
    """The last step's `train/loss` (what the module logged), nan before any step."""
    value: Any = trainer.callback_metrics.get("train/loss")
    return float(value) if value is not None else float("nan")
