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


def padding_mask(lengths: list[int], seq: int) -> torch.Tensor:
    """[batch, seq] bool, True on the first `length` positions (padding on the right)."""
    return torch.arange(seq)[None, :] < torch.tensor(lengths)[:, None]


def seeded_attention(d_model: int, n_heads: int, **kwargs) -> nn.Module:
    """headlab's attention, seeded, Xavier-initialised, with non-zero biases so tests see them too (eval mode)."""
    from headlab.model import MultiHeadSelfAttention
    from headlab.model.init import init_weights

    torch.manual_seed(0)
    attn = MultiHeadSelfAttention(d_model, n_heads, **kwargs)
    init_weights(attn, 1.0)
    with torch.no_grad():
        for proj in (attn.q_proj, attn.k_proj, attn.v_proj, attn.out_proj):
            proj.bias.normal_(0.0, 0.1)
    return attn.eval()
