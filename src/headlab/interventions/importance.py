"""Every importance measure of one network in one call, and its long-format table rows.

`measure_importance` runs single-head ablation, gradient importance, the random control and
(optionally) the keep-top-k and leave-one-layer-in curves on the same evaluation batches;
`importance_rows` / `curve_rows` turn the result into the run's long format.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from torch import Tensor, nn

from headlab.interventions.ablation import AblationResult, keep_top_k, leave_one_layer_in, single_head_ablation
from headlab.interventions.batches import Batch, live_mask
from headlab.interventions.gradient import gradient_importance, normalize_layers
from headlab.interventions.ranking import heads_for_share, random_scores
from headlab.interventions.scores import Scores
from headlab.store import HEAD_IMPORTANCE, IMPORTANCE_CURVES, head_metric_rows  # names: re-exported for the tools

RANKINGS = ("ablation", "gradient", "random")
CURVE_COLUMNS = ("run_id", "step", "epoch", "curve", "ranking", "k", "metric", "value")


@dataclass
class HeadImportance:
    """Per-head importance `[layer, head]` (NaN where a pruned layer has no head) and the curves.

    `curves[ranking]` = (ks, scores `[len(ks)]`) keeping only the top-k heads of that ranking;
    `layers` = scores `[layer]` keeping only that layer's heads.
    """

    ablation: AblationResult
    gradient: Tensor
    gradient_normalized: Tensor
    random: Tensor
    normalize_layers: bool = False
    curves: dict[str, tuple[list[int], Scores]] = field(default_factory=dict)
    layers: Scores | None = None

    @property
    def base(self) -> Scores:
        return self.ablation.base

    def scores(self, ranking: str) -> Tensor:
        """Higher = more important, for ranking `ablation` (loss increase), `gradient` or `random`."""
        if ranking == "ablation":
            return self.ablation.dloss
        if ranking == "gradient":
            return self.gradient_normalized if self.normalize_layers else self.gradient
        if ranking == "random":
            return self.random
        raise ValueError(f"ranking must be one of {RANKINGS}; got {ranking!r}")

    def per_layer(self) -> list[dict[str, np.ndarray]]:
        """`[layer]{metric: [head]}` for `headlab.store.head_metric_rows` (metric names in docs/importance.md)."""
        named = {"ablation_dloss": self.ablation.dloss, "ablation_dacc": self.ablation.dacc,
                 "ablation_df1": self.ablation.df1, "grad_importance": self.gradient,
                 "grad_importance_l2": self.gradient_normalized, "random_score": self.random}
        return [{name: values[layer].numpy() for name, values in named.items()} for layer in range(len(self.random))]

    def heads_for_half_effect(self) -> int:
        """Fewest heads carrying 50% of the total (positive) ablation loss increase."""
        return heads_for_share(self.ablation.dloss, 0.5)


def measure_importance(net: nn.Module, batches: Sequence[Batch], *, normalize: bool = False, random_seed: int = 0,
                       curves: bool = True, max_rows: int = 4096) -> HeadImportance:
    ablation = single_head_ablation(net, batches, max_rows=max_rows)
    gradient = gradient_importance(net, batches)
    result = HeadImportance(ablation, gradient, normalize_layers(gradient), random_scores(live_mask(net), random_seed),
                            normalize_layers=normalize)
    if curves:
        ks = curve_ks(int(live_mask(net).sum()))
        result.curves = {r: (ks, keep_top_k(net, batches, result.scores(r), ks)) for r in RANKINGS}
        result.layers = leave_one_layer_in(net, batches)
    return result


def curve_ks(n_heads: int, max_points: int = 65) -> list[int]:
    """Every k in 0..n_heads, or `max_points` evenly spaced ones (ends included) for big models.

    >>> curve_ks(4), curve_ks(100, max_points=5)
    ([0, 1, 2, 3, 4], [0, 25, 50, 75, 100])
    """
    if n_heads + 1 <= max_points:
        return list(range(n_heads + 1))
    return sorted({int(round(x)) for x in np.linspace(0, n_heads, max_points)})


def importance_rows(run_id: str, step: int, epoch: int, result: HeadImportance) -> pd.DataFrame:
    """Long-format rows (`run_id, step, epoch, layer, head, metric, value`), pruned slots dropped."""
    rows = head_metric_rows(run_id, step, epoch, result.per_layer())
    return rows[rows["value"].notna()].reset_index(drop=True)


def curve_rows(run_id: str, step: int, epoch: int, result: HeadImportance) -> pd.DataFrame:
    """`run_id, step, epoch, curve, ranking, k, metric, value`: keep_top_k (k = heads kept, per
    ranking) and leave_one_layer_in (k = the layer kept, ranking empty)."""
    records = []
    for ranking, (ks, scores) in result.curves.items():
        records += _score_records("keep_top_k", ranking, ks, scores)
    if result.layers is not None:
        records += _score_records("leave_one_layer_in", "", list(range(len(result.layers.acc))), result.layers)
    df = pd.DataFrame(records, columns=list(CURVE_COLUMNS[3:]))
    df.insert(0, "epoch", int(epoch))
    df.insert(0, "step", int(step))
    df.insert(0, "run_id", str(run_id))
    return df.astype({"step": "int64", "epoch": "int64", "k": "int64", "value": "float64"})


def _score_records(curve: str, ranking: str, ks: list[int], scores: Scores) -> list[tuple]:
    return [(curve, ranking, k, metric, float(getattr(scores, metric)[i]))
            for i, k in enumerate(ks) for metric in ("loss", "acc", "f1")]
