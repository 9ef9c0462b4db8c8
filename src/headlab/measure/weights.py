"""Weight-space inputs of a measurement: per-head weight snapshots and per-head gradient norms.

Both need `block.attn.head_weights()` (and `head_weight_grads()` for the gradient), so they are
optional for models that do not expose them (a pretrained model has no initial weights either).
"""

from __future__ import annotations

import torch

from headlab.analysis import per_head_grad_norm

WEIGHT_NAMES = ("W_Q", "W_K", "W_V", "W_O")  # W_Q/K/V [head, d_model, d_head], W_O [head, d_head, d_model]


def head_weight_snapshot(attn: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Detached CPU copies of one layer's per-head W_Q, W_K, W_V, W_O (they do not move with training)."""
    w = attn.head_weights()
    return {k: getattr(w, k).detach().cpu().clone() for k in WEIGHT_NAMES}


def snapshot_weights(net: torch.nn.Module) -> list[dict[str, torch.Tensor]]:
    """`head_weight_snapshot` of every layer of `net.blocks` (e.g. the initial weights)."""
    return [head_weight_snapshot(block.attn) for block in net.blocks]


def head_grad_norm(attn: torch.nn.Module) -> torch.Tensor:
    """`[head]` L2 norm of this step's gradient on each head's slices of Q, K, V and O (0 without any)."""
    grads = attn.head_weight_grads()
    if all(g is None for g in grads):
        return torch.zeros(attn.n_heads)
    return per_head_grad_norm(*grads)


def grad_norms(net: torch.nn.Module) -> torch.Tensor:
    """`[layer, head]` (CPU) per-head gradient norms of every layer; call it after backward()."""
    return torch.stack([head_grad_norm(block.attn) for block in net.blocks]).cpu()
