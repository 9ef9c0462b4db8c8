"""Ablation importance: what each head, layer or top-k set of heads is worth to the task.

Single-head ablation zeroes one head's output (exactly what gate 0 does) and measures the change
in loss, accuracy and macro-F1. It is batched: a layer's H single-head ablations run in ONE
forward over H stacked copies of the batch, a forward hook on that layer's `hook_z`
`[batch, pos, head_index, d_head]` zeroing head h in copy h (no change to the attention module).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from headlab.interventions.batches import (Batch, evaluate_gated, heads_per_layer, live_mask, n_sequences, new_tally,
                                          predictions)
from headlab.interventions.scores import Scores


@dataclass(frozen=True)
class AblationResult:
    """Changes when one head is zeroed, ablated minus intact, each `[layer, head]` (NaN: no head).

    `dloss > 0` and `dacc < 0` mean the head helps.
    """

    base: Scores  # the intact network, one variant
    dloss: Tensor
    dacc: Tensor
    df1: Tensor


@torch.no_grad()
def single_head_ablation(net: nn.Module, batches: Sequence[Batch], max_rows: int = 2048) -> AblationResult:
    """Zero every head alone; `max_rows` bounds the stacked copies per forward (batch x heads)."""
    was_training = net.training
    net.eval()
    try:
        base = evaluate_gated(net, batches)
        shape = live_mask(net).shape
        out = {k: torch.full(shape, float("nan"), dtype=torch.float64) for k in ("loss", "acc", "f1")}
        for layer, n_heads in enumerate(heads_per_layer(net)):
            scores = _ablate_layer(net, batches, layer, n_heads, max_rows)
            for key in out:
                out[key][layer, :n_heads] = getattr(scores, key)
    finally:
        net.train(was_training)
    return AblationResult(base, out["loss"] - base.loss[0], out["acc"] - base.acc[0], out["f1"] - base.f1[0])


def _ablate_layer(net: nn.Module, batches: Sequence[Batch], layer: int, n_heads: int, max_rows: int) -> Scores:
    """Scores `[head]` of the network with head h of `layer` zeroed, for every h."""
    tally = new_tally(net, n_heads)
    for batch in batches:
        per_pass = max(1, max_rows // max(n_sequences(batch), 1))
        logits = [_ablated_logits(net, batch, layer, heads) for heads in _groups(n_heads, per_pass)]
        tally.update(*predictions(torch.cat(logits), batch))
    return tally.compute()


def _groups(n: int, size: int) -> list[list[int]]:
    return [list(range(start, min(n, start + size))) for start in range(0, n, size)]


def _ablated_logits(net: nn.Module, batch: Batch, layer: int, heads: list[int]) -> Tensor:
    """`[len(heads), batch, class]` (an LM: `[len(heads), batch, seq, vocab]`): copy i of the batch runs
    with head heads[i] of `layer` zeroed."""
    copies, size = len(heads), n_sequences(batch)
    keep = torch.ones(copies, net.blocks[layer].attn.n_heads, device=batch["input_ids"].device)
    keep[torch.arange(copies), torch.tensor(heads)] = 0.0
    keep = keep.repeat_interleave(size, dim=0)[:, None, :, None]  # [copies * batch, 1, head_index, 1]

    def zero_head(module: nn.Module, args: object, z: Tensor) -> Tensor:
        return z * keep.to(z.dtype)

    handle = net.blocks[layer].attn.hook_z.register_forward_hook(zero_head)
    try:
        logits = net(batch["input_ids"].repeat(copies, 1), batch["attention_mask"].repeat(copies, 1)).logits
    finally:
        handle.remove()
    return logits.view(copies, size, *logits.shape[1:])


def leave_one_layer_in(net: nn.Module, batches: Sequence[Batch]) -> Scores:
    """Scores `[layer]`: only that layer's heads kept, every head of every other layer gated to 0."""
    live = live_mask(net).to(torch.float32)
    gates = torch.zeros(len(live), *live.shape)
    for layer in range(len(live)):
        gates[layer, layer] = live[layer]
    return evaluate_gated(net, batches, gates * net.head_gates.detach().cpu())


def keep_top_k(net: nn.Module, batches: Sequence[Batch], scores: Tensor, ks: Sequence[int]) -> Scores:
    """Scores `[len(ks)]`: only the k highest-scoring heads kept (all others gated to 0), per k.

    `scores` `[layer, head]` (NaN where no head); ties keep the lower (layer, head) first.
    """
    order = rank_heads(scores)
    gates = torch.zeros(len(ks), *scores.shape)
    for i, k in enumerate(ks):
        if not 0 <= k <= len(order):
            raise ValueError(f"k must be in [0, {len(order)}]; got {k}")
        for layer, head in order[:k]:
            gates[i, layer, head] = 1.0
    return evaluate_gated(net, batches, gates * net.head_gates.detach().cpu())


def rank_heads(scores: Tensor) -> list[tuple[int, int]]:
    """Live heads `(layer, head)` from most to least important (NaN entries are not heads).

    >>> rank_heads(torch.tensor([[0.1, 0.9], [0.5, float("nan")]]))
    [(0, 1), (1, 0), (0, 0)]
    """
    flat = scores.double().flatten()
    live = (~torch.isnan(flat)).nonzero().flatten().tolist()
    live.sort(key=lambda i: (-float(flat[i]), i))  # stable: ties by (layer, head)
    width = scores.shape[1]
    return [(i // width, i % width) for i in live]
