"""Which head of one seed is which head of another: the one cross-seed head matching of a sweep.

Head indices mean nothing across seeds (head 2 of seed 0 need not do what head 2 of seed 1
does), so every table that compares or averages heads over seeds first pairs them with
`match_layer`: `sweep_matches.csv` (`headlab.sweep.heads.seed_matches`) and the seed-averaged
importance (`headlab.sweep.importance`). Both read a config's runs through `config_finals`
(each run's heads at its last measurement). This module sits below both, so neither imports
the other.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import pandas as pd

from headlab.analysis.head_matching import HeadMatch, match_heads
from headlab.analysis.lm_heads import LM_PATTERN_SCORES
from headlab.analysis.roles import REQUIRED_METRICS
from headlab.errors import DataError
from headlab.sweep.lm_roles import ROLE_METRIC
from headlab.sweep.runs import Run

# The metrics the role rule reads: the descriptor of what a head does, for bifurcation and matching.
# A causal LM measures none of those but its pattern scores, which its role rule reads: a layer is
# matched on whichever set every head of every seed has.
DESCRIPTOR_METRICS: tuple[str, ...] = REQUIRED_METRICS + LM_PATTERN_SCORES


def final_values(head_metrics: pd.DataFrame) -> pd.DataFrame:
    """`[layer, head] x metric` values at the run's last measured step."""
    last = head_metrics[head_metrics["step"] == head_metrics["step"].max()]
    return last.pivot_table(index=["layer", "head"], columns="metric", values="value", aggfunc="last")


def config_finals(runs: Sequence[Run]) -> dict[str, pd.DataFrame]:
    """job -> `final_values` of every run of one config that has head metrics: the seeds whose heads
    `match_layer` measures its yardstick over (pass the same runs wherever a config is matched)."""
    return {r.job: final_values(r.head_metrics) for r in runs if r.head_metrics is not None and not r.head_metrics.empty}


def match_layer(finals: Mapping[str, pd.DataFrame], job_a: str, job_b: str, layer: int) -> HeadMatch:
    """Hungarian matching of the heads of `layer` in run `job_a` to those in run `job_b`.

    `finals`: `config_finals` of the config's runs, both jobs among them. Descriptors: the
    `DESCRIPTOR_METRICS` measured (not NaN) on every head of the layer in every one of these
    runs; roles (`ROLE_METRIC`) go along for the role agreement when both runs have them.

    Scaling: each metric is divided by its std over the heads of the layer in ALL these runs
    (ddof 0; a metric constant over them contributes 0), not over the two runs of the pair. So
    every seed pair of a config is matched on the same metrics in the same units: the matched
    and random distances of different pairs can be compared and averaged (`sweep_summary.csv`'s
    `match_matched_distance`), the seed-averaged importance combines matchings that weigh the
    metrics alike, and the spread is estimated from every seed's heads (a pair's own std of two
    2-head runs is 4 values, a noisy weighting of the metrics). The price: adding or losing a
    seed moves the yardstick, and with it possibly a pair's matching; the same `finals` give the
    same matching (`sweep_matches.csv` and `headlab.sweep.importance` pass the same runs).

    Raises DataError naming the layer when it cannot be matched: not measured in one of the two
    runs, different head counts, or no descriptor metric measured on all its heads.
    """
    try:
        a, b = finals[job_a].xs(layer, level="layer"), finals[job_b].xs(layer, level="layer")
    except KeyError:
        raise DataError(f"layer {layer}", f"not measured in both runs {job_a} and {job_b}") from None
    if len(a) != len(b):
        raise DataError(f"layer {layer}", f"run {job_a} has {len(a)} heads and run {job_b} {len(b)}: "
                                          "only equal head counts match")
    pooled = pd.concat(finals.values()).xs(layer, level="layer")
    metrics = [m for m in DESCRIPTOR_METRICS if m in pooled.columns and pooled[m].notna().all()]
    if not metrics:
        raise DataError(f"layer {layer}", f"none of the descriptor metrics {list(DESCRIPTOR_METRICS)} "
                                          "is measured on every head of every seed")
    scale = pooled[metrics].std(ddof=0).to_numpy(float)
    roles = (a[ROLE_METRIC].to_numpy(), b[ROLE_METRIC].to_numpy()) if ROLE_METRIC in a and ROLE_METRIC in b else (None, None)
    return match_heads(a[metrics].to_numpy(float), b[metrics].to_numpy(float), *roles, scale=scale)
