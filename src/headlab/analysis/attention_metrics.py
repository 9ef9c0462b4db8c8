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

`query_mask [batch, q]` restricts the averages to chosen queries (keys stay every real token):
the conditional view of Clark et al. (2019), who score a syntactic head only on the tokens that
hold the relation. A head that reads the token before one marker letter is a previous-token head
*for those queries* even though, averaged over every query, it looks like anything else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

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
    query_mask: Tensor | None = None,
) -> MetricSums:
    """Reduce one chunk `pattern [batch, head, q, k]` to per-head sums and counts.

    `attention_mask [batch, k]`: True/1 = real token (queries are the same positions);
    `cls_mask`, `punct_mask [batch, k]`: optional special positions;
    `query_mask [batch, q]`: only these real queries count (None: all of them).
    """
    attn, mask = check_pattern(pattern, attention_mask)
    shape = tuple(mask.shape)
    cls = None if cls_mask is None else check_mask(cls_mask, shape, "cls_mask")
    punct = None if punct_mask is None else check_mask(punct_mask, shape, "punct_mask")
    queries = None if query_mask is None else check_mask(query_mask, shape, "query_mask")
    return metric_sums_checked(attn, mask, cls, punct, queries)


def metric_sums_checked(
    attn: Tensor, mask: Tensor, cls: Tensor | None = None, punct: Tensor | None = None, queries: Tensor | None = None
) -> MetricSums:
    """`attention_metric_sums` on inputs already validated by `check_pattern` / `check_mask`.

    Every metric is one pass over `attn` at most (no float64 copy, no `torch.where` over the
    full `[batch, head, q, k]` tensor): the measurement runs at every probe point of every run.
    """
    return _sum_values(_query_values(attn, mask, cls, punct), queries)


def conditional_metric_sums_checked(
    attn: Tensor, mask: Tensor, cls: Tensor | None, punct: Tensor | None, query_sets: Mapping[str, Tensor]
) -> tuple[MetricSums, dict[str, MetricSums]]:
    """The all-query sums and the sums over each named (validated) query set, from one pass over
    `attn`: the per-query values are the same, only which queries count differs."""
    values = _query_values(attn, mask, cls, punct)
    return _sum_values(values), {name: _sum_values(values, queries) for name, queries in query_sets.items()}


def _query_values(attn: Tensor, mask: Tensor, cls: Tensor | None, punct: Tensor | None) -> _QueryValues:
    return {
        **_spread_values(attn, mask),
        **_distance_values(attn, mask),
        **_neighbour_values(attn, mask),
        **_mass_values(attn, mask, cls, punct),
    }


def _sum_values(values: _QueryValues, queries: Tensor | None = None) -> MetricSums:
    """Per-head sums and counts over the valid queries, or only over those also in `queries`."""
    if queries is not None:
        values = _restricted(values, queries)
    any_values = values[METRIC_NAMES[0]][0]  # [batch, head, q]
    dtype = sum_dtype(any_values.device)
    n_heads = any_values.shape[1]
    sums, counts = {}, {}
    for valid, names in _group_by_validity(values):
        stacked = torch.stack([values[name][0] for name in names])  # [metric, batch, head, q']
        totals = torch.where(valid[None, :, None, :], stacked, 0.0).to(dtype).sum((1, 3))  # [metric, head]
        count = valid.sum().to(dtype).expand(n_heads)
        for name, total in zip(names, totals):
            sums[name], counts[name] = total, count.clone()
    return MetricSums(sums, counts)


# Which query each entry of a metric's q' axis is: A[i+1, i] for prev, A[i, i+1] for next, else i.
_QUERY_AXIS = {"prev_score": slice(1, None), "next_score": slice(None, -1)}


def _restricted(values: _QueryValues, queries: Tensor) -> _QueryValues:
    """The same values with validity `& queries` (aligned per metric); metrics that shared one
    validity still share one, so they are still summed together."""
    shared: dict[tuple[int, int | None, int | None], Tensor] = {}
    out: _QueryValues = {}
    for name, (value, valid) in values.items():
        axis = _QUERY_AXIS.get(name, slice(None))
        key = (id(valid), axis.start, axis.stop)
        if key not in shared:
            shared[key] = valid & queries[:, axis]
        out[name] = (value, shared[key])
    return out


def attention_metrics(
    pattern: Tensor,
    attention_mask: Tensor,
    cls_mask: Tensor | None = None,
    punct_mask: Tensor | None = None,
    query_mask: Tensor | None = None,
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
    return attention_metric_sums(pattern, attention_mask, cls_mask, punct_mask, query_mask).means()


def _group_by_validity(values: _QueryValues) -> list[tuple[Tensor, list[str]]]:
    """Metrics that count the same queries (same mask object), so each group is summed at once."""
    groups: dict[int, tuple[Tensor, list[str]]] = {}
    for name in METRIC_NAMES:
        valid = values[name][1]
        groups.setdefault(id(valid), (valid, []))[1].append(name)
    return list(groups.values())


def _xlogx_sum(x: Tensor) -> Tensor:
    """`sum_k x log x` over the last dim, 0 log 0 = 0 (as `xlogy(x, x).sum(-1)`, about 3x cheaper).

    `xlogy` runs a scalar loop on CPU; a clamped vectorised log gives the same value: where x = 0
    the clamped log is finite and the product is 0, and nowhere else does the clamp change x.
    """
    return x.clamp_min(torch.finfo(x.dtype).tiny).log_().mul_(x).sum(-1)


def _spread_values(attn: Tensor, mask: Tensor) -> _QueryValues:
    """Entropy (raw and over log n), confidence and argmax distance: how spread each row is."""
    n_keys = mask.sum(-1).to(attn.dtype)[:, None, None]  # [batch, 1, 1]
    entropy = _xlogx_sum(attn).neg_()  # [batch, head, q]
    entropy_norm = torch.where(n_keys > 1, entropy / n_keys.log(), 0.0)
    confidence, argmax = attn.max(-1)  # one pass for both; ties give the first maximum, as argmax
    pos = torch.arange(attn.shape[-1], device=attn.device)
    argmax_distance = (pos - argmax).abs().to(attn.dtype)
    return {
        "entropy": (entropy, mask),
        "entropy_norm": (entropy_norm, mask),
        "confidence": (confidence, mask),
        "argmax_distance": (argmax_distance, mask),
    }


def _distance_values(attn: Tensor, mask: Tensor) -> _QueryValues:
    """Expected distance |i-j|, and expected distance relative to uniform."""
    pos = torch.arange(attn.shape[-1], device=attn.device)
    dist = (pos[:, None] - pos[None, :]).abs().to(attn.dtype)  # [q, k]
    mean_distance = torch.linalg.vecdot(attn, dist)  # [batch, head, q]; no [q, batch, head, k] copy as einsum makes
    n_keys = mask.sum(-1, keepdim=True).to(attn.dtype)  # [batch, 1]
    uniform = (mask.to(attn.dtype) @ dist) / n_keys  # [batch, q] (dist is symmetric)
    uniform = uniform[:, None, :]
    distance_norm = torch.where(uniform > 0, mean_distance / uniform, 1.0)
    return {
        "mean_distance": (mean_distance, mask),
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
    """Mass on [CLS], punctuation, the last real token, and on their union (one matmul for all)."""
    pos = torch.arange(mask.shape[-1], device=mask.device)
    last_index = torch.where(mask, pos, -1).amax(-1, keepdim=True)  # [batch, 1]
    last = pos == last_index  # [batch, k]
    special = last | (cls if cls is not None else False) | (punct if punct is not None else False)
    sets = {"last_attention": last, "special_attention": special, "cls_attention": cls, "punct_attention": punct}
    given = {name: positions for name, positions in sets.items() if positions is not None}
    columns = torch.stack(list(given.values()), dim=-1).to(attn.dtype)  # [batch, k, set]
    batch, n_heads, n_q, n_k = attn.shape
    mass = (attn.reshape(batch, n_heads * n_q, n_k) @ columns).view(batch, n_heads, n_q, -1)  # [batch, head, q, set]
    values = {name: (mass[..., i], mask) for i, name in enumerate(given)}
    no_query = torch.zeros_like(mask)
    for name in sets.keys() - given.keys():
        values[name] = (attn.new_zeros(attn.shape[:-1]), no_query)
    return values


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
        query_mask: Tensor | None = None,
    ) -> None:
        """Add one chunk `pattern [batch, head, q, k]` (see `attention_metric_sums`)."""
        sums = attention_metric_sums(pattern, attention_mask, cls_mask, punct_mask, query_mask)
        self._add(sums)

    def compute(self) -> dict[str, Tensor]:
        """`{name: [head]}` over everything added since the last reset."""
        return self._total().means()

