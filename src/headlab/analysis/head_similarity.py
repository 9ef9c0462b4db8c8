"""How alike the heads of one layer attend: Jensen-Shannon divergence and Pearson correlation.

Both use real positions only: padded rows and columns are identical across heads (all zero) and
would inflate the similarity of any two heads.

- ``js[a, b]``: JS divergence (nats, in [0, ln 2]) between the rows of heads a and b, each row
  smoothed to P' = 0.001/n + 0.999 P over its n real keys (so the logs stay finite), averaged
  over the real queries of all sequences pooled (as `attention_metrics`).
- ``corr[a, b]``: Pearson correlation of the two heads' maps over the real q x real k block of
  each sequence, averaged over sequences. A sequence where either map is constant (uniform
  attention has no variance) gives no correlation and is left out of that pair's mean; the
  diagonal is 1 by definition.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from headlab.analysis._checks import check_pattern, check_same_heads, sum_dtype
from headlab.analysis._accumulate import SumAccumulator
from headlab.analysis.attention_metrics import _xlogx_sum

JS_SMOOTHING = 1e-3
# A map whose std is below this fraction of its mean (1/n) is treated as constant.
_CONSTANT_REL_STD = 1e-4


@dataclass(frozen=True)
class SimilaritySums:
    """`js_sum [h, h]` over `js_count` real queries; `corr_sum [h, h]` over `corr_count [h, h]` sequences."""

    js_sum: Tensor
    js_count: Tensor
    corr_sum: Tensor
    corr_count: Tensor

    def __add__(self, other: SimilaritySums) -> SimilaritySums:
        check_same_heads(self.js_sum.shape[0], other.js_sum.shape[0], "SimilaritySums")
        return SimilaritySums(
            self.js_sum + other.js_sum,
            self.js_count + other.js_count,
            self.corr_sum + other.corr_sum,
            self.corr_count + other.corr_count,
        )

    def means(self) -> dict[str, Tensor]:
        """`{"js": [h, h], "corr": [h, h]}`; NaN where nothing was counted."""
        corr = self.corr_sum / self.corr_count
        corr.fill_diagonal_(1.0)
        return {"js": self.js_sum / self.js_count, "corr": corr}


def head_similarity_sums(pattern: Tensor, attention_mask: Tensor) -> SimilaritySums:
    """Reduce one chunk `pattern [batch, head, q, k]`, `attention_mask [batch, k]` to sums."""
    attn, mask = check_pattern(pattern, attention_mask)
    return similarity_sums_checked(attn, mask)


def similarity_sums_checked(attn: Tensor, mask: Tensor) -> SimilaritySums:
    """`head_similarity_sums` on inputs already validated by `check_pattern`."""
    dtype = sum_dtype(attn.device)
    js_sum = _js_sums(attn, mask).to(dtype)
    corr_sum, corr_count = _corr_sums(attn, mask)
    return SimilaritySums(js_sum, mask.sum().to(dtype), corr_sum.to(dtype), corr_count.to(dtype))


def head_similarity(pattern: Tensor, attention_mask: Tensor) -> dict[str, Tensor]:
    """`{"js": [head, head], "corr": [head, head]}` for one batch (see the module docstring).

    >>> one_hot = torch.eye(2).reshape(1, 1, 2, 2)                  # head 0 attends to itself
    >>> pattern = torch.cat([one_hot, one_hot.flip(-1)], dim=1)    # head 1 to the other token
    >>> sim = head_similarity(pattern, torch.ones(1, 2, dtype=torch.bool))
    >>> sim["corr"].tolist()
    [[1.0, -1.0], [-1.0, 1.0]]
    >>> round(sim["js"][0, 1].item(), 4), round(torch.log(torch.tensor(2.0)).item(), 4)
    (0.6888, 0.6931)
    """
    return head_similarity_sums(pattern, attention_mask).means()


def _js_sums(attn: Tensor, mask: Tensor) -> Tensor:
    """`[head, head]` sum over real queries of JS(P, Q) = H(M) - (H(P) + H(Q)) / 2, M = (P + Q) / 2.

    With S = P + Q, H(M) = (log 2 * sum S - sum S log S) / 2, so each pair costs one log: the
    pairs are most of a measurement's cost. One head against all later heads at a time: memory
    stays one pattern, not head^2 patterns. `attn` is 0 on padded keys (`check_pattern`).
    """
    batch, n_heads, n_q, n_k = attn.shape
    n_keys = mask.sum(-1).to(attn.dtype)[:, None, None, None]  # [batch, 1, 1, 1]
    real_key = mask[:, None, None, :]  # [batch, 1, 1, k]
    smooth = (attn * (1 - JS_SMOOTHING)).add_(torch.where(real_key, JS_SMOOTHING / n_keys, 0.0))  # 0 on padded keys
    entropy = _xlogx_sum(smooth).neg_()  # [batch, head, q]
    total = smooth.sum(-1)  # [batch, head, q], 1 up to rounding
    # Padded keys hold 1/2 here, so a pair sums to exactly 1 there and S log S is exactly 0 without
    # a clamp; on real keys the pair sum is bit for bit P' + Q'.
    log_safe = smooth.add_(torch.where(real_key, 0.0, 0.5)) if n_heads > 1 else smooth
    pair_buffer = attn.new_empty(2, batch * (n_heads - 1) * n_q * n_k)  # reused by every head a
    query = mask[:, None, :]
    js = attn.new_zeros(n_heads, n_heads)
    for a in range(n_heads - 1):
        shape = (batch, n_heads - a - 1, n_q, n_k)
        pair_sum, s_log_s = (buf[: math.prod(shape)].view(shape) for buf in pair_buffer)
        torch.add(log_safe[:, a + 1 :], log_safe[:, a : a + 1], out=pair_sum)  # [batch, head - a - 1, q, k]
        s_log_s = torch.log(pair_sum, out=s_log_s).mul_(pair_sum).sum(-1)  # [batch, head - a - 1, q]
        mixture_entropy = 0.5 * (math.log(2.0) * (total[:, a + 1 :] + total[:, a : a + 1]) - s_log_s)
        divergence = mixture_entropy - 0.5 * (entropy[:, a + 1 :] + entropy[:, a : a + 1])
        row = torch.where(query, divergence, 0.0).sum((0, 2)).clamp_min(0.0)
        js[a, a + 1 :] = row
        js[a + 1 :, a] = row
    return js


def _corr_sums(attn: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """Per-sequence Pearson correlation of heads' real blocks: `(sum [h, h], count [h, h])`.

    `attn` is 0 on padded keys, so a map's sum over its real block is the sum of its real rows;
    centring and masking the padded query rows is one multiply by the block mask.
    """
    real = mask.to(attn.dtype)  # [batch, k]
    block = real[:, :, None] * real[:, None, :]  # [batch, q, k], 1 on the real block
    size = (real.sum(-1) ** 2)[:, None]  # [batch, 1] = n^2
    mean = (attn.sum(-1) * real[:, None, :]).sum(-1) / size.clamp_min(1)  # [batch, head]
    centred = (attn - mean[..., None, None]).mul_(block[:, None]).flatten(2)  # [batch, head, q * k]
    gram = centred @ centred.transpose(1, 2)  # [batch, head, head]; BLAS may round [a, b] and [b, a] apart
    gram = gram.triu() + gram.triu(1).transpose(1, 2)  # so mirror one triangle: corr is exactly symmetric
    cov = gram / size[..., None].clamp_min(1)
    var = torch.diagonal(cov, dim1=-2, dim2=-1)  # [batch, head]
    varies = (var.sqrt() > _CONSTANT_REL_STD * mean) & (size > 0)  # [batch, head]
    pair = varies[:, :, None] & varies[:, None, :]
    denom = (var[:, :, None] * var[:, None, :]).sqrt()
    corr = torch.where(pair, cov / denom, 0.0).clamp(-1.0, 1.0)
    return corr.sum(0), pair.sum(0)


class HeadSimilarityAccumulator(SumAccumulator):
    """Streams probe chunks of one layer; keeps `[head, head]` sums only.

    >>> acc = HeadSimilarityAccumulator()
    >>> pattern = torch.eye(3).reshape(1, 1, 3, 3).repeat(1, 2, 1, 1)   # two identical heads
    >>> acc.update(pattern, torch.ones(1, 3, dtype=torch.bool))
    >>> out = acc.compute()
    >>> out["js"].abs().max().item(), out["corr"].tolist()
    (0.0, [[1.0, 1.0], [1.0, 1.0]])
    """

    def update(self, pattern: Tensor, attention_mask: Tensor) -> None:
        """Add one chunk `pattern [batch, head, q, k]`, `attention_mask [batch, k]`."""
        sums = head_similarity_sums(pattern, attention_mask)
        self._add(sums)

    def compute(self) -> dict[str, Tensor]:
        """`{"js": [head, head], "corr": [head, head]}` over everything since the last reset."""
        return self._total().means()

