"""One timed training step, shared by the speed, profile and compile sections.

Every candidate takes the same batch, the same AdamW and the same loss, so a comparison is of the
models, not of the loops around them.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

Batch = dict[str, Tensor]


@dataclass
class Candidate:
    """A model under test: `loss(batch)` is its training forward and loss, `times_ms` its samples."""

    name: str
    model: nn.Module
    loss: Callable[[Batch], Tensor]
    note: str = ""
    optimizer: torch.optim.Optimizer | None = None
    scaler: Any = None
    times_ms: list[float] = field(default_factory=list)

    @property
    def params(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    @property
    def non_embedding_params(self) -> int:
        emb = sum(m.weight.numel() for m in self.model.modules() if isinstance(m, nn.Embedding))
        return self.params - emb


def logits_loss(logits: Callable[[Tensor, Tensor], Tensor]) -> Callable[[Batch], Tensor]:
    """Cross-entropy of a `logits(input_ids, attention_mask)` function on a batch."""
    return lambda batch: F.cross_entropy(logits(batch["input_ids"], batch["attention_mask"]), batch["labels"])


def prepare(c: Candidate, args: argparse.Namespace, device: torch.device) -> Candidate:
    """Move to the device in train mode, with the shared AdamW (and a GradScaler for fp16)."""
    c.model.to(device).train()
    c.optimizer = adamw(c.model.parameters(), args)
    if args.amp == "fp16":
        c.scaler = torch.amp.GradScaler("cuda")
    return c


def adamw(params: Any, args: argparse.Namespace) -> torch.optim.Optimizer:
    """The same AdamW for every candidate, so the comparison is of the models, not the optimisers."""
    return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01, **({"fused": True} if args.optimizer == "fused" else {}))


def headlab_config(args: argparse.Namespace):
    """The benchmark shape as headlab's `ModelConfig` (attention dropout 0, as headlab's default)."""
    from headlab.model import ModelConfig

    return ModelConfig(vocab_size=args.vocab, n_classes=2, max_len=args.seq, n_layers=args.layers, n_heads=args.heads,
                       d_model=args.d_model, d_ff=args.ff, dropout=args.dropout, attn_dropout=0.0)


def make_batch(args: argparse.Namespace, device: torch.device) -> Batch:
    """Random ids; [CLS]=1 first; lengths uniform in [seq/4, seq] with one full row (realistic padding)."""
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(args.seq // 4, args.seq + 1, (args.batch,), generator=g)
    lengths[0] = args.seq
    mask = torch.arange(args.seq)[None, :] < lengths[:, None]
    ids = torch.randint(3, args.vocab, (args.batch, args.seq), generator=g).masked_fill(~mask, 0)
    ids[:, 0] = 1
    labels = torch.randint(0, 2, (args.batch,), generator=g)
    return {"input_ids": ids.to(device), "attention_mask": mask.to(device), "labels": labels.to(device)}


def amp_dtype(args: argparse.Namespace) -> torch.dtype | None:
    return {"none": None, "bf16": torch.bfloat16, "fp16": torch.float16}[args.amp]


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train_step(c: Candidate, batch: Batch, args: argparse.Namespace, device: torch.device) -> float:
    """One optimiser step; returns its wall time in ms (synchronised on cuda)."""
    dtype = amp_dtype(args)
    autocast = torch.autocast(device.type, dtype=dtype) if dtype is not None else contextlib.nullcontext()
    sync(device)
    t0 = time.perf_counter()
    with autocast:
        loss = c.loss(batch)
    if c.scaler is not None:
        c.scaler.scale(loss).backward()
        c.scaler.step(c.optimizer)
        c.scaler.update()
    else:
        loss.backward()
        c.optimizer.step()
    c.optimizer.zero_grad(set_to_none=True)
    sync(device)
    return (time.perf_counter() - t0) * 1e3
