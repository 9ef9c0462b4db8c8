"""Position-aligned mean attention map per head, for the attention heat-map grid figure.

Sequences differ in length, so each (query, key) cell is averaged over the sequences in which
both positions are real; a cell no sequence reaches is NaN (blank in the figure), not 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from headlab.analysis._checks import check_pattern, check_same_heads, sum_dtype
from headlab.analysis._accumulate import SumAccumulator
from headlab.errors import ConfigError


@dataclass(frozen=True)
class PatternSums:
    """`total [head, map_len, map_len]` summed over `count [map_len, map_len]` sequences."""

    total: Tensor
    count: Tensor

    def __add__(self, other: PatternSums) -> PatternSums:
        check_same_heads(self.total.shape[0], other.total.shape[0], "PatternSums")
        return PatternSums(self.total + other.total, self.count + other.count)

    def mean(self) -> Tensor:
        """`[head, map_len, map_len]`, NaN where no sequence has that (q, k) pair."""
        return self.total / self.count


def mean_pattern_sums(pattern: Tensor, attention_mask: Tensor, map_len: int = 32) -> PatternSums:
    """Sum `pattern [batch, head, q, k]` over sequences on the first `map_len` real positions."""
    _check_map_len(map_len)
    attn, mask = check_pattern(pattern, attention_mask)
    return pattern_sums_checked(attn, mask, map_len)


def pattern_sums_checked(attn: Tensor, mask: Tensor, map_len: int = 32) -> PatternSums:
    """`mean_pattern_sums` on inputs already validated by `check_pattern`."""
    length = min(map_len, attn.shape[-1])
    real = mask[:, :length]
    pair = real[:, :, None] & real[:, None, :]  # [batch, length, length]
    window = torch.where(pair[:, None], attn[:, :, :length, :length], 0.0)
    dtype = sum_dtype(attn.device)
    total = attn.new_zeros(attn.shape[1], map_len, map_len, dtype=dtype)
    count = attn.new_zeros(map_len, map_len, dtype=dtype)
    total[:, :length, :length] = window.to(dtype).sum(0)
    count[:length, :length] = pair.sum(0).to(dtype)
    return PatternSums(total, count)


def mean_pattern(pattern: Tensor, attention_mask: Tensor, map_len: int = 32) -> Tensor:
    """`[head, map_len, map_len]` mean map of one batch (see the module docstring).

    >>> pattern = torch.tensor([[1., 0], [0.5, 0.5]]).reshape(1, 1, 2, 2)
    >>> mean_pattern(pattern, torch.ones(1, 2, dtype=torch.bool), map_len=3)[0].tolist()
    [[1.0, 0.0, nan], [0.5, 0.5, nan], [nan, nan, nan]]
    """
    return mean_pattern_sums(pattern, attention_mask, map_len).mean()


def _check_map_len(map_len: int) -> None:
    if isinstance(map_len, bool) or not isinstance(map_len, int) or map_len < 1:
        raise ConfigError("map_len", map_len, "a positive integer")


class MeanPatternAccumulator(SumAccumulator):
    """Streams probe chunks of one layer into a `[head, map_len, map_len]` mean map.

    >>> acc = MeanPatternAccumulator(map_len=2)
    >>> acc.update(torch.eye(2).reshape(1, 1, 2, 2), torch.ones(1, 2, dtype=torch.bool))
    >>> acc.update(torch.eye(2).flip(0).reshape(1, 1, 2, 2), torch.ones(1, 2, dtype=torch.bool))
    >>> acc.compute()[0].tolist()
    [[0.5, 0.5], [0.5, 0.5]]
    """

    def __init__(self, map_len: int = 32) -> None:
        _check_map_len(map_len)
        self.map_len = map_len
        super().__init__()

    def update(self, pattern: Tensor, attention_mask: Tensor) -> None:
        """Add one chunk `pattern [batch, head, q, k]`, `attention_mask [batch, k]`."""
        sums = mean_pattern_sums(pattern, attention_mask, self.map_len)
        self._add(sums)

    def compute(self) -> Tensor:
        """`[head, map_len, map_len]` over everything since the last reset."""
        return self._total().mean()

