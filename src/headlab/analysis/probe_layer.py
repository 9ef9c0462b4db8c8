"""Everything the probe measures on one layer, from one validation of each chunk.

`AttentionMetricAccumulator`, `HeadSimilarityAccumulator` and `MeanPatternAccumulator` each
validate their input (`check_pattern`: a masked copy of the pattern and its row sums). A probe
measurement feeds the same pattern to all three, so `ProbeLayerAccumulator` validates it once
and hands the checked pattern to each reduction; the results are the same as the three
accumulators' (tested), at less cost. Named `query_masks` add the per-head metrics over those
queries only (`attention_metrics(..., query_mask=...)`) from the same checked pattern.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from torch import Tensor

from headlab.analysis._accumulate import SumAccumulator
from headlab.analysis._checks import check_mask, check_pattern, check_same_heads
from headlab.analysis.attention_metrics import MetricSums, conditional_metric_sums_checked
from headlab.analysis.head_similarity import SimilaritySums, similarity_sums_checked
from headlab.analysis.mean_pattern import PatternSums, _check_map_len, pattern_sums_checked


@dataclass(frozen=True)
class LayerSums:
    """Per-head metric sums, head-pair sums and the mean-map sums of one layer, plus the metric
    sums over each named set of queries (`conditional`)."""

    metrics: MetricSums
    pairs: SimilaritySums
    maps: PatternSums
    conditional: dict[str, MetricSums] = field(default_factory=dict)

    def __add__(self, other: LayerSums) -> LayerSums:
        check_same_heads(self.metrics.n_heads, other.metrics.n_heads, "LayerSums")
        if self.conditional.keys() != other.conditional.keys():
            raise ValueError(f"query sets differ: {sorted(self.conditional)} vs {sorted(other.conditional)}")
        conditional = {name: sums + other.conditional[name] for name, sums in self.conditional.items()}
        return LayerSums(self.metrics + other.metrics, self.pairs + other.pairs, self.maps + other.maps, conditional)


def probe_layer_sums(
    pattern: Tensor,
    attention_mask: Tensor,
    cls_mask: Tensor | None = None,
    punct_mask: Tensor | None = None,
    map_len: int = 32,
    query_masks: Mapping[str, Tensor] | None = None,
) -> LayerSums:
    """`attention_metric_sums`, `head_similarity_sums` and `mean_pattern_sums` of one chunk;
    `query_masks {name: [batch, q]}` adds `attention_metric_sums(..., query_mask=m)` per name."""
    _check_map_len(map_len)
    attn, mask = check_pattern(pattern, attention_mask)
    shape = tuple(mask.shape)
    cls = None if cls_mask is None else check_mask(cls_mask, shape, "cls_mask")
    punct = None if punct_mask is None else check_mask(punct_mask, shape, "punct_mask")
    query_sets = {name: check_mask(queries, shape, f"query_masks[{name!r}]") for name, queries in (query_masks or {}).items()}
    metrics, conditional = conditional_metric_sums_checked(attn, mask, cls, punct, query_sets)
    return LayerSums(metrics, similarity_sums_checked(attn, mask), pattern_sums_checked(attn, mask, map_len), conditional)


class ProbeLayerAccumulator(SumAccumulator):
    """Streams probe chunks of one layer; keeps per-head and `[head, head]` sums only.

    >>> import torch
    >>> acc = ProbeLayerAccumulator(map_len=2)
    >>> acc.update(torch.eye(2).reshape(1, 1, 2, 2).repeat(1, 2, 1, 1), torch.ones(1, 2, dtype=torch.bool))
    >>> metrics, pairs, maps = acc.compute()
    >>> metrics["self_score"].tolist(), pairs["corr"].tolist(), maps.shape
    ([1.0, 1.0], [[1.0, 1.0], [1.0, 1.0]], torch.Size([2, 2, 2]))
    """

    def __init__(self, map_len: int = 32) -> None:
        _check_map_len(map_len)
        self.map_len = map_len
        super().__init__()

    def update(self, pattern: Tensor, attention_mask: Tensor, cls_mask: Tensor | None = None,
               punct_mask: Tensor | None = None, query_masks: Mapping[str, Tensor] | None = None) -> None:
        """Add one chunk `pattern [batch, head, q, k]` with its masks `[batch, k]` (the same
        `query_masks` names in every chunk)."""
        self._add(probe_layer_sums(pattern, attention_mask, cls_mask, punct_mask, self.map_len, query_masks))

    def compute(self) -> tuple[dict[str, Tensor], dict[str, Tensor], Tensor]:
        """(metrics `{name: [head]}`, pairs `{"js"|"corr": [head, head]}`, mean map `[head, map_len, map_len]`)."""
        total = self._total()
        return total.metrics.means(), total.pairs.means(), total.maps.mean()

    def compute_conditional(self) -> dict[str, dict[str, Tensor]]:
        """`{query set: {metric: [head]}}` for the `query_masks` given to `update`."""
        return {name: sums.means() for name, sums in self._total().conditional.items()}
