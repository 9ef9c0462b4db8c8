"""Position encodings, in two separate families.

Additive (embedding level): added once to the token embeddings, before the first block.
  - ``none``: no position information (the encoder is then permutation-equivariant).
  - ``sinusoidal``: the fixed table of Vaswani et al. 2017,
    ``PE[pos, 2i] = sin(pos / 10000^(2i/d))``, ``PE[pos, 2i+1] = cos(pos / 10000^(2i/d))``.
  - ``learned``: a trainable ``nn.Embedding(max_len, d_model)`` table.

Attention level: applied inside every attention layer, nothing is added to the embeddings.
  - ``rope`` (Su et al. 2021): rotates q and k of each head by position-dependent angles
    (base 10000), so ``q_i . k_j`` depends on ``i - j`` only. We use the *rotate-half*
    convention (GPT-NeoX, HF LLaMA): feature ``f`` is paired with ``f + d_head/2``, not with its
    neighbour as in the original interleaved form. The two differ only by a fixed permutation
    of a head's features, so the relative-position property is identical.
  - ``alibi`` (Press et al. 2022): adds ``-slope_h * |i - j|`` to head h's scores. Symmetric
    (not causal-only as in the paper) because the encoder is bidirectional.
"""

from __future__ import annotations

import math
from typing import Literal, get_args

import torch
from torch import Tensor, nn

PosEncoding = Literal["none", "sinusoidal", "learned", "rope", "alibi"]  # the config's type: its choices, once
POS_ENCODINGS: tuple[str, ...] = get_args(PosEncoding)
ADDITIVE_ENCODINGS, ATTENTION_ENCODINGS = POS_ENCODINGS[:3], POS_ENCODINGS[3:]


# --- additive (embedding level) ---------------------------------------------------------------


def sinusoidal_table(max_len: int, d_model: int) -> Tensor:
    """The fixed table `[max_len, d_model]`; built in float64 so long positions stay exact."""
    position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)  # [pos, 1]
    inv_freq = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # [ceil(d/2)]
    angles = position * inv_freq  # [pos, ceil(d/2)]
    table = torch.zeros(max_len, d_model, dtype=torch.float64)
    table[:, 0::2] = angles.sin()
    table[:, 1::2] = angles.cos()[:, : d_model // 2]  # odd d_model: one cosine column fewer
    return table.float()


class SinusoidalEncoding(nn.Module):
    """Adds the fixed sinusoidal table; a non-persistent buffer, so checkpoints do not carry it."""

    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.register_buffer("table", sinusoidal_table(max_len, d_model), persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        """x: [batch, seq, d_model] -> [batch, seq, d_model]."""
        return x + self.table[: x.size(1)].to(x.dtype)


class LearnedEncoding(nn.Module):
    """Adds a trainable table `embedding.weight: [max_len, d_model]`."""

    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(max_len, d_model)

    def forward(self, x: Tensor) -> Tensor:
        """x: [batch, seq, d_model] -> [batch, seq, d_model]."""
        return x + self.embedding.weight[: x.size(1)]


def build_additive_encoding(name: str, max_len: int, d_model: int) -> nn.Module:
    """The embedding-level module for `name`; identity for `none` and the attention-level ones."""
    if name == "sinusoidal":
        return SinusoidalEncoding(max_len, d_model)
    if name == "learned":
        return LearnedEncoding(max_len, d_model)
    if name in ("none",) + ATTENTION_ENCODINGS:
        return nn.Identity()
    raise ValueError(f"unknown position encoding {name!r}; expected one of {POS_ENCODINGS}")


# --- attention level ----------------------------------------------------------------------------


class RotaryEmbedding(nn.Module):
    """RoPE, rotate-half convention, applied to q or k of shape `[batch, head, seq, d_head]`."""

    def __init__(self, d_head: int, base: float = 10000.0) -> None:
        super().__init__()
        if d_head % 2:
            raise ValueError(f"rope needs an even d_head; got d_head={d_head}")
        inv_freq = base ** (-torch.arange(0, d_head, 2, dtype=torch.float32) / d_head)  # [d_head/2]
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        """x: [batch, head, seq, d_head] -> same shape, position p rotated by p * inv_freq."""
        position = torch.arange(x.size(-2), device=x.device, dtype=self.inv_freq.dtype)
        angles = torch.outer(position, self.inv_freq)  # [seq, d_head/2]
        angles = torch.cat((angles, angles), dim=-1)  # [seq, d_head]
        return x * angles.cos().to(x.dtype) + _rotate_half(x) * angles.sin().to(x.dtype)


def _rotate_half(x: Tensor) -> Tensor:
    """[x1, x2] -> [-x2, x1] on the last axis (a 90-degree turn of each feature pair)."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def _power_of_two_slopes(n: int) -> list[float]:
    start = 2.0 ** (-8.0 / n)
    return [start ** (h + 1) for h in range(n)]


def alibi_slopes(n_heads: int) -> Tensor:
    """Per-head slopes `[head]`: 2^(-8(h+1)/n) for n a power of two.

    Otherwise (as in Press et al.'s reference code) take the slopes of the closest smaller power
    of two, then every other slope of twice that power, so slopes still interleave geometrically.
    """
    closest = 2 ** math.floor(math.log2(n_heads))
    slopes = _power_of_two_slopes(closest)
    if closest < n_heads:
        slopes += _power_of_two_slopes(2 * closest)[0::2][: n_heads - closest]
    return torch.tensor(slopes, dtype=torch.float32)


def alibi_bias(slopes: Tensor, seq_len: int) -> Tensor:
    """slopes: [head] -> additive score bias `[head, q, k]` = -slope_h * |i - j|."""
    position = torch.arange(seq_len, device=slopes.device, dtype=slopes.dtype)
    distance = (position[:, None] - position[None, :]).abs()  # [q, k]
    return -slopes[:, None, None] * distance
