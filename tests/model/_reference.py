"""Independent references for the attention tests."""

from __future__ import annotations

import torch
from torch import nn


def torch_attention_like(attn: nn.Module) -> nn.MultiheadAttention:
    """`torch.nn.MultiheadAttention` holding the same weights as headlab's `attn` (eval mode)."""
    ref = nn.MultiheadAttention(attn.d_model, attn.n_heads, batch_first=True).eval()
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight]))
        ref.in_proj_bias.copy_(torch.cat([attn.q_proj.bias, attn.k_proj.bias, attn.v_proj.bias]))
        ref.out_proj.weight.copy_(attn.out_proj.weight)
        ref.out_proj.bias.copy_(attn.out_proj.bias)
    return ref
