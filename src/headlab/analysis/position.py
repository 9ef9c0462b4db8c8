"""Where a head's attention lands in position terms: one offset, one position from either end.

The role rule calls a head `long_range` only if its attention depends on position, so it needs,
per head, the largest mean mass the average query puts on

- one relative offset d = j - i with |d| >= `min_offset` (3: self, the neighbours and +-2 are
  the previous/next/local rules' business; a partial next-token head is not long-range),
- one absolute position j from the start (j >= 1; [CLS] at 0 is the `sink` rule's), or
- one position e = n - 1 - j from the end (e >= 1; the last token is the `sink` rule's),

each averaged over the real queries that have such a key, for |d|, j, e < `max_position`. A bin
counts only when at least `min_share` of all real queries have it, so a rare bin (an offset only
the longest sequences reach) cannot decide. Sums stream chunk by chunk like every probe metric.
A content head's targets move with the text and spread over many bins (a few % each).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from headlab.analysis._accumulate import SumAccumulator


@dataclass(frozen=True)
class PositionSums:
    """Per-head mass sums `[head, bins]` and per-bin query counts `[bins]` for offsets, starts, ends."""

    offset: Tensor  # bins d = -(P-1) .. P-1
    start: Tensor  # bins j = 0 .. P-1
    end: Tensor  # bins e = 0 .. P-1 (e = n - 1 - j)
    offset_count: Tensor
    start_count: Tensor
    end_count: Tensor
    n_queries: Tensor

    def __add__(self, other: PositionSums) -> PositionSums:
        return PositionSums(*(a + b for a, b in zip(self._parts(), other._parts())))

    def _parts(self) -> tuple[Tensor, ...]:
        return (self.offset, self.start, self.end, self.offset_count, self.start_count, self.end_count, self.n_queries)

    def position_mass(self, min_share: float = 0.25, min_offset: int = 3) -> dict[str, Tensor]:
        """`{offset_mass, start_mass, end_mass, position_mass}` `[head]` (float64)."""
        p = self.start.shape[1]
        near = slice(max(0, p - min_offset), p - 1 + min_offset)  # offsets |d| < min_offset
        out = {}
        for name, sums, count, skip in (("offset_mass", self.offset, self.offset_count, near),
                                        ("start_mass", self.start, self.start_count, 0),
                                        ("end_mass", self.end, self.end_count, 0)):
            means = sums / count.clamp(min=1)
            usable = count >= min_share * self.n_queries
            usable[skip] = False
            out[name] = torch.where(usable, means, 0.0).max(1).values
        out["position_mass"] = torch.maximum(torch.maximum(out["offset_mass"], out["start_mass"]), out["end_mass"])
        return out


def position_sums(pattern: Tensor, attention_mask: Tensor, max_position: int = 32,
                  query_mask: Tensor | None = None) -> PositionSums:
    """Reduce one chunk `pattern [batch, head, q, k]` (real queries and keys per `attention_mask`);
    `query_mask [batch, q]`: only these real queries count (the decision's queries of `task_roles`)."""
    mask = attention_mask.bool()
    queries = mask if query_mask is None else mask & query_mask.bool()
    attn = torch.where(mask[:, None, None, :] & queries[:, None, :, None], pattern, 0.0).double()
    batch, n_heads, seq, _ = attn.shape
    p = max_position
    lengths = mask.sum(1)  # [batch]
    n_queries = queries.sum(1).double()  # [batch]
    real_queries = n_queries.sum()
    per_key = attn.sum(2)  # [batch, head, k]: mass summed over queries
    start, start_count = attn.new_zeros(n_heads, p), attn.new_zeros(p)
    width = min(p, seq)
    j = torch.arange(width, device=attn.device)
    before_last = (j[None] < lengths[:, None] - 1).double()  # start bins never reach the last token (the sink's)
    start[:, :width] = (per_key[:, :, :width] * before_last[:, None]).sum(0)
    start_count[:width] = (before_last * n_queries[:, None]).sum(0)
    e = torch.arange(p, device=attn.device)
    index = (lengths[:, None] - 1 - e[None]).clamp(min=0)  # [batch, p]
    valid = (e[None] < lengths[:, None] - 1).double()  # end bins never reach [CLS] (the sink's)
    end = (per_key.gather(2, index[:, None, :].expand(batch, n_heads, p)) * valid[:, None]).sum(0)
    end_count = (valid * n_queries[:, None]).sum(0)
    offset, offset_count = attn.new_zeros(n_heads, 2 * p - 1), attn.new_zeros(2 * p - 1)
    pair = queries[:, :, None] & mask[:, None, :]
    for d in range(-(p - 1), p):
        if abs(d) >= seq:
            continue
        offset[:, d + p - 1] = torch.diagonal(attn, offset=d, dim1=2, dim2=3).sum((0, 2))
        offset_count[d + p - 1] = torch.diagonal(pair, offset=d, dim1=1, dim2=2).sum()
    return PositionSums(offset, start, end, offset_count, start_count, end_count, real_queries)


class PositionAccumulator(SumAccumulator):
    """Streams probe chunks of one layer into `PositionSums`; `compute()` gives the masses `[head]`.

    >>> acc = PositionAccumulator(max_position=8)
    >>> back = torch.diag(torch.ones(9), -3).reshape(1, 1, 12, 12)  # query i -> i - 3
    >>> back[0, 0, :3, 0] = 1.0  # queries 0-2 have no such token: [CLS]
    >>> acc.update(back, torch.ones(1, 12, dtype=torch.bool))
    >>> round(acc.compute()["offset_mass"].item(), 3)
    1.0
    """

    def __init__(self, max_position: int = 32, min_share: float = 0.25, min_offset: int = 3) -> None:
        super().__init__()
        self.max_position, self.min_share, self.min_offset = max_position, min_share, min_offset

    def update(self, pattern: Tensor, attention_mask: Tensor, query_mask: Tensor | None = None) -> None:
        self._add(position_sums(pattern, attention_mask, self.max_position, query_mask))

    def compute(self) -> dict[str, Tensor]:
        return self._total().position_mass(self.min_share, self.min_offset)
