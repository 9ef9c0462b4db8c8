"""Per-head statistics of attention patterns, reduced to sums so probe sets can stream.

Every metric is a per-query value averaged over the **real queries of all probe sequences pooled
together** (a 40-token sequence weighs twice a 20-token one), computed over real keys only.
`attention_metric_sums` reduces one chunk to per-head sums and counts; adding the sums of chunks
and dividing once equals one big batch, so memory never grows with the probe set.

Metric definitions (A = one head's pattern of one sequence, n = #real keys, i = query):

- ``entropy``: -sum_j A_ij log A_ij (nats). ``entropy_norm``: entropy / log n (0 when n == 1).
- ``mean_distance``: sum_j A_ij |i-j|. ``argmax_distance``: |i - argmax_j A_ij| (first maximum).
- ``distance_norm``: mean_distance / the same under uniform attention over the n real keys,
  so lengths that vary still compare (1 = as far as uniform, << 1 local); 1 when n == 1.
- ``prev_score`` / ``self_score`` / ``next_score``: A[i,i-1] / A[i,i] / A[i,i+1], averaged over
  queries whose neighbour is real (own counts).
- ``cls_attention`` / ``punct_attention``: mass on `cls_mask` / `punct_mask` positions (NaN when
  the mask is not given). ``last_attention``: mass on the last real token.
- ``special_attention``: mass on the union of those sets (cls | punct | last), so a final
  punctuation mark is counted once: the "vertical" head statistic used by `roles`.
- ``confidence``: max_j A_ij.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from headlab.analysis._checks import check_mask, check_pattern, check_same_heads, sum_dtype
from headlab.analysis._accumulate import SumAccumulator

METRIC_NAMES: tuple[str, ...] = (
    "entropy",
    "entropy_norm",
    "mean_distance",
    "argmax_distance",
    "distance_norm",
    "prev_score",
    "self_score",
    "next_score",
    "cls_attention",
    "punct_attention",
    "last_attention",
    "special_attention",
    "confidence",
)

# name -> (per-query values [batch, head, q'], which of them count [batch, q'])
_QueryValues = dict[str, tuple[Tensor, Tensor]]


@dataclass(frozen=True)
class MetricSums:
    """Per-head sums and counts of every metric: `sums[name]`, `counts[name]` are `[head]`."""

    sums: dict[str, Tensor]
    counts: dict[str, Tensor]

    @property
    def n_heads(self) -> int:
        return int(self.sums[METRIC_NAMES[0]].shape[0])

    def __add__(self, other: MetricSums) -> MetricSums:
        check_same_heads(self.n_heads, other.n_heads, "MetricSums")
        return MetricSums(
            {k: self.sums[k] + other.sums[k] for k in METRIC_NAMES},
            {k: self.counts[k] + other.counts[k] for k in METRIC_NAMES},
        )

    def means(self) -> dict[str, Tensor]:
        """`{name: [head]}`; NaN where nothing was counted (e.g. no cls_mask given)."""
        return {k: self.sums[k] / self.counts[k] for k in METRIC_NAMES}


def attention_metric_sums(
    pattern: Tensor,
    attention_mask: Tensor,
    cls_mask: Tensor | None = None,
    punct_mask: Tensor | None = None,
) -> MetricSums:
    """Reduce one chunk `pattern [batch, head, q, k]` to per-head sums and counts.

    `attention_mask [batch, k]`: True/1 = real token (queries are the same positions);
    `cls_mask`, `punct_mask [batch, k]`: optional special positions.
    """
    attn, mask = check_pattern(pattern, attention_mask)
    shape = tuple(mask.shape)
    cls = None if cls_mask is None else check_mask(cls_mask, shape, "cls_mask")
    punct = None if punct_mask is None else check_mask(punct_mask, shape, "punct_mask")
    values: _QueryValues = {
        **_spread_values(attn, mask),
        **_distance_values(attn, mask),
        **_neighbour_values(attn, mask),
        **_mass_values(attn, mask, cls, punct),
    }
    dtype = sum_dtype(attn.device)
    n_heads = attn.shape[1]
    sums, counts = {}, {}
    for name in METRIC_NAMES:
        per_query, valid = values[name]
        sums[name] = torch.where(valid[:, None, :], per_query, 0.0).to(dtype).sum((0, 2))
        counts[name] = valid.sum().to(dtype).expand(n_heads).clone()
    return MetricSums(sums, counts)


def attention_metrics(
    pattern: Tensor,
    attention_mask: Tensor,
    cls_mask: Tensor | None = None,
    punct_mask: Tensor | None = None,
) -> dict[str, Tensor]:
    """Per-head metrics `{name: [head]}` of one batch (see the module docstring).

    >>> pattern = torch.full((1, 1, 4, 4), 0.25)        # uniform over 4 real keys
    >>> m = attention_metrics(pattern, torch.ones(1, 4, dtype=torch.bool))
    >>> [round(m[k].item(), 4) for k in ("entropy", "entropy_norm", "distance_norm", "confidence")]
    [1.3863, 1.0, 1.0, 0.25]
    >>> prev = torch.tensor([[1., 0, 0], [1, 0, 0], [0, 1, 0]]).reshape(1, 1, 3, 3)
    >>> m = attention_metrics(prev, torch.ones(1, 3, dtype=torch.bool))
    >>> m["prev_score"].item(), m["self_score"].item(), m["mean_distance"].item()
    (1.0, 0.3333333333333333, 0.6666666666666666)
    """
    return attention_metric_sums(pattern, attention_mask, cls_mask, punct_mask).means()


def _spread_values(attn: Tensor, mask: Tensor) -> _QueryValues:
    """Entropy (raw and over log n) and confidence: how spread each row is."""
    n_keys = mask.sum(-1).to(attn.dtype)[:, None, None]  # [batch, 1, 1]
    entropy = -torch.special.xlogy(attn, attn).sum(-1)  # [batch, head, q]
    entropy_norm = torch.where(n_keys > 1, entropy / n_keys.log(), 0.0)
    confidence = attn.amax(-1)
    return {
        "entropy": (entropy, mask),
        "entropy_norm": (entropy_norm, mask),
        "confidence": (confidence, mask),
    }


def _distance_values(attn: Tensor, mask: Tensor) -> _QueryValues:
    """Expected and argmax distance |i-j|, and expected distance relative to uniform."""
    pos = torch.arange(attn.shape[-1], device=attn.device)
    dist = (pos[:, None] - pos[None, :]).abs().to(attn.dtype)  # [q, k]
    mean_distance = torch.einsum("bhqk,qk->bhq", attn, dist)
    n_keys = mask.sum(-1, keepdim=True).to(attn.dtype)  # [batch, 1]
    uniform = torch.einsum("qk,bk->bq", dist, mask.to(attn.dtype)) / n_keys  # [batch, q]
    uniform = uniform[:, None, :]
    distance_norm = torch.where(uniform > 0, mean_distance / uniform, 1.0)
    argmax_distance = (pos - attn.argmax(-1)).abs().to(attn.dtype)
    return {
        "mean_distance": (mean_distance, mask),
        "argmax_distance": (argmax_distance, mask),
        "distance_norm": (distance_norm, mask),
    }


def _neighbour_values(attn: Tensor, mask: Tensor) -> _QueryValues:
    """A[i,i-1], A[i,i], A[i,i+1], each over queries whose neighbour is a real key."""
    prev = torch.diagonal(attn, offset=-1, dim1=-2, dim2=-1)  # [batch, head, q-1]: A[i+1, i]
    nxt = torch.diagonal(attn, offset=1, dim1=-2, dim2=-1)  # [batch, head, q-1]: A[i, i+1]
    both = mask[:, 1:] & mask[:, :-1]  # [batch, q-1]
    return {
        "prev_score": (prev, both),
        "self_score": (torch.diagonal(attn, dim1=-2, dim2=-1), mask),
        "next_score": (nxt, both),
    }


def _mass_values(attn: Tensor, mask: Tensor, cls: Tensor | None, punct: Tensor | None) -> _QueryValues:
    """Mass on [CLS], punctuation, the last real token, and on their union."""
    pos = torch.arange(mask.shape[-1], device=mask.device)
    last_index = torch.where(mask, pos, -1).amax(-1, keepdim=True)  # [batch, 1]
    last = pos == last_index  # [batch, k]
    special = last | (cls if cls is not None else False) | (punct if punct is not None else False)
    no_query = torch.zeros_like(mask)
    values = {"last_attention": (_mass(attn, last), mask), "special_attention": (_mass(attn, special), mask)}
    for name, positions in (("cls_attention", cls), ("punct_attention", punct)):
        if positions is None:
            values[name] = (attn.new_zeros(attn.shape[:-1]), no_query)
        else:
            values[name] = (_mass(attn, positions), mask)
    return values


def _mass(attn: Tensor, positions: Tensor) -> Tensor:
    """`[batch, head, q]` mass each query puts on `positions [batch, k]`."""
    return torch.einsum("bhqk,bk->bhq", attn, positions.to(attn.dtype))


class AttentionMetricAccumulator(SumAccumulator):
    """Streams probe chunks of one layer; keeps only per-head sums (memory independent of probe size).

    >>> acc = AttentionMetricAccumulator()
    >>> mask = torch.ones(1, 2, dtype=torch.bool)
    >>> acc.update(torch.eye(2).reshape(1, 1, 2, 2), mask)               # self attention
    >>> acc.update(torch.full((1, 1, 2, 2), 0.5), mask)                  # uniform
    >>> acc.compute()["self_score"].item()
    0.75
    """

    def update(
        self,
        pattern: Tensor,
        attention_mask: Tensor,
        cls_mask: Tensor | None = None,
        punct_mask: Tensor | None = None,
    ) -> None:
        """Add one chunk `pattern [batch, head, q, k]` (see `attention_metric_sums`)."""
        sums = attention_metric_sums(pattern, attention_mask, cls_mask, punct_mask)
        self._add(sums)

    def compute(self) -> dict[str, Tensor]:
        """`{name: [head]}` over everything added since the last reset."""
        return self._total().means()

