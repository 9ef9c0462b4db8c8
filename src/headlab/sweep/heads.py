"""Head-level analyses of a sweep's runs: tables in, tables out (pandas around analysis/).

Per run: each head's bifurcation steps, final role and movement (`head_summary`); the
"winners move farther" correlations (`winner_correlations`); the layer-mean head-to-head
divergence over steps (`layer_pair_means`); the init-vs-final cosine geometry
(`cosine_geometry`). Across seeds of one config: Hungarian head matching (`seed_matches`).
"""

from __future__ import annotations

import itertools
import math
from typing import Sequence

import numpy as np
import pandas as pd

from headlab.analysis.bifurcation import metric_bifurcation_steps, role_bifurcation_steps
from headlab.analysis.head_matching import match_heads
from headlab.analysis.init_orthogonality import cosine_summary
from headlab.analysis.movement_importance import movement_importance_correlation
from headlab.analysis.roles import REQUIRED_METRICS, ROLES
from headlab.errors import HeadlabError
from headlab.sweep.runs import Run

# The metrics the role rule reads: the descriptor of what a head does, for bifurcation and matching.
DESCRIPTOR_METRICS: tuple[str, ...] = REQUIRED_METRICS
ROLE_METRIC = "role"


def layer_cube(head_metrics: pd.DataFrame, layer: int, metrics: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(`steps [t]`, `values [t, head, metric]`) of one layer; unmeasured cells (or metrics) are NaN."""
    in_layer = head_metrics[head_metrics["layer"] == layer]
    steps, heads = np.sort(in_layer["step"].unique()), np.sort(in_layer["head"].unique())
    rows = in_layer[in_layer["metric"].isin(list(metrics))]
    index = pd.MultiIndex.from_product([steps, heads], names=["step", "head"])
    wide = rows.pivot_table(index=["step", "head"], columns="metric", values="value", aggfunc="last")
    wide = wide.reindex(index=index, columns=list(metrics))
    return steps, wide.to_numpy(dtype=np.float64).reshape(len(steps), len(heads), len(metrics))


def final_values(head_metrics: pd.DataFrame) -> pd.DataFrame:
    """`[layer, head] x metric` values at the run's last measured step."""
    last = head_metrics[head_metrics["step"] == head_metrics["step"].max()]
    return last.pivot_table(index=["layer", "head"], columns="metric", values="value", aggfunc="last")


def head_summary(run: Run) -> pd.DataFrame:
    """One row per (layer, head): role / metric bifurcation step, final role, movement, specificity,
    ablation importance.

    `specificity = 1 - entropy_norm` at the last step: the attention-specificity importance proxy.
    `ablation_dloss`: the measured importance (val loss increase when the head is zeroed) from the
    run's `head_importance.parquet` at its newest checkpoint (`headlab-importance`); NaN without it.
    """
    df = run.head_metrics
    if df is None or df.empty:
        return pd.DataFrame()
    final = final_values(df)
    frames = []
    for layer in sorted(df["layer"].unique()):
        steps, roles = layer_cube(df, layer, [ROLE_METRIC])
        _, desc = layer_cube(df, layer, [m for m in DESCRIPTOR_METRICS if m in set(df["metric"])])
        frame = pd.DataFrame({"layer": int(layer), "head": np.arange(roles.shape[1])})
        frame["role_bifurcation_step"] = _safe_steps(role_bifurcation_steps, steps, roles[:, :, 0], roles.shape[1])
        frame["metric_bifurcation_step"] = _safe_steps(metric_bifurcation_steps, steps, desc, roles.shape[1])
        frames.append(frame)
    heads = pd.concat(frames, ignore_index=True).set_index(["layer", "head"])
    heads["final_step"] = int(df["step"].max())
    heads["final_role"] = final.get(ROLE_METRIC, pd.Series(dtype=float)).reindex(heads.index).map(_role_name)
    for column in ("cum_grad_norm", "dist_from_init", "entropy_norm", "confidence"):
        heads[column] = final[column].reindex(heads.index) if column in final else math.nan
    heads["specificity"] = 1.0 - heads["entropy_norm"]
    from headlab.sweep.importance import final_importance  # (that module builds on this one)

    importance = final_importance(run.run_dir)
    heads["ablation_dloss"] = importance.reindex(heads.index) if importance is not None else math.nan
    return heads.reset_index()


def _safe_steps(fn, steps: np.ndarray, values: np.ndarray, n_heads: int) -> np.ndarray:
    """Bifurcation steps, or NaN for every head when the run has nothing to measure them on."""
    if values.size == 0 or len(steps) == 0:
        return np.full(n_heads, math.nan)
    return fn(steps, values).numpy()


def _role_name(role_id: float) -> str | None:
    if not np.isfinite(role_id) or not 0 <= role_id < len(ROLES) or role_id != int(role_id):
        return None
    return ROLES[int(role_id)]


WINNER_IMPORTANCE = {"specificity": "specificity", "ablation": "ablation_dloss"}  # name in the key -> column


def winner_correlations(heads: pd.DataFrame) -> dict[str, float]:
    """Spearman rho of final importance with cumulative grad norm and with distance from init,
    over all heads of one run (all layers pooled: every head competes for the same loss).

    Importance twice: the attention-specificity proxy (`rho_*_specificity`), and the measured
    ablation importance (`rho_*_ablation`; NaN unless the run holds `head_importance.parquet`)."""
    out: dict[str, float] = {}
    for name, column in WINNER_IMPORTANCE.items():
        for movement, short in (("cum_grad_norm", "grad"), ("dist_from_init", "dist")):
            if heads.empty or column not in heads:
                out[f"rho_{short}_{name}"] = math.nan
                continue
            corr = movement_importance_correlation(heads[movement].to_numpy(float), heads[column].to_numpy(float))
            out[f"rho_{short}_{name}"] = corr.spearman
    return out


def layer_pair_means(head_pairs: pd.DataFrame | None) -> pd.DataFrame:
    """Per (step, layer): mean over head pairs a < b of `js` and of `1-corr`, and the RMS of
    `q_cosine` / `qk_cosine` (their spread around 0, the random-init value). Columns
    `step, layer, metric, value`; empty for single-head layers (no pairs)."""
    columns = ["step", "layer", "metric", "value"]
    if head_pairs is None or head_pairs.empty:
        return pd.DataFrame(columns=columns)
    pairs = head_pairs[head_pairs["head_a"] < head_pairs["head_b"]]
    frames = []
    for metric, name, transform, root in _PAIR_SUMMARIES:
        rows = pairs[pairs["metric"] == metric]
        if rows.empty:
            continue
        mean = transform(rows["value"]).groupby([rows["step"], rows["layer"]]).mean()
        frames.append((np.sqrt(mean) if root else mean).rename("value").reset_index().assign(metric=name))
    return pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)


# (table metric, summary name, per-pair transform, square root of the mean)
_PAIR_SUMMARIES = (
    ("js", "js", lambda v: v, False),
    ("corr", "1-corr", lambda v: 1.0 - v, False),
    ("q_cosine", "q_cosine_rms", np.square, True),
    ("qk_cosine", "qk_cosine_rms", np.square, True),
)


def cosine_geometry(run: Run) -> dict[str, float]:
    """Off-diagonal W_Q and W_Q W_K^T cosine spread at the first and last step, all layers
    pooled, vs the random-direction std: 1/sqrt(d_model * d_head) and 1/d_model."""
    pairs = run.head_pairs
    names = [f"{w}_cos_{what}_{when}" for when in ("init", "final") for w in ("q", "qk") for what in ("std", "ratio")]
    out = dict.fromkeys(names, math.nan)
    if pairs is None or pairs.empty:
        return out
    d_model = run.summary.get("swept", {}).get("model.d_model")
    d_head = run.summary.get("head_dim")
    dims = {"q": _int_or_none(d_model, d_head), "qk": _int_or_none(d_model, d_model)}
    for when, step in (("init", pairs["step"].min()), ("final", pairs["step"].max())):
        at = pairs[(pairs["step"] == step) & (pairs["head_a"] < pairs["head_b"])]
        for w, metric in (("q", "q_cosine"), ("qk", "qk_cosine")):
            summary = cosine_summary(at.loc[at["metric"] == metric, "value"].to_numpy(float), dims[w])
            out[f"{w}_cos_std_{when}"], out[f"{w}_cos_ratio_{when}"] = summary.std, summary.std_ratio
    out["q_cos_theory_std"] = cosine_summary([], dims["q"]).theory_std
    out["qk_cos_theory_std"] = cosine_summary([], dims["qk"]).theory_std
    return out


def _int_or_none(a, b) -> int | None:
    try:
        return int(a) * int(b)
    except (TypeError, ValueError):
        return None


def seed_matches(runs: Sequence[Run]) -> pd.DataFrame:
    """Hungarian matching of every pair of seeds of one config, layer by layer, at each run's
    last measurement. Descriptors are standardised by each metric's std over all heads of all
    these runs (the same yardstick for every pair); metrics NaN for some head are left out.
    Columns: layer, job_a, job_b, n_heads, same_role, same_role_baseline, matched_distance,
    random_distance, error (why a pair could not be matched, else "")."""
    finals = {r.job: final_values(r.head_metrics) for r in runs if r.head_metrics is not None and not r.head_metrics.empty}
    if len(finals) < 2:
        return pd.DataFrame()
    pooled = pd.concat(finals.values())
    rows = []
    for layer in sorted(pooled.index.get_level_values("layer").unique()):
        at = pooled.xs(layer, level="layer")
        metrics = [m for m in DESCRIPTOR_METRICS if m in at.columns and at[m].notna().all()]
        scale = at[metrics].std(ddof=0).to_numpy(float)
        for job_a, job_b in itertools.combinations(finals, 2):
            rows.append({"layer": int(layer), "job_a": job_a, "job_b": job_b,
                         **_match_pair(finals[job_a], finals[job_b], layer, metrics, scale)})
    return pd.DataFrame(rows)


def _match_pair(final_a: pd.DataFrame, final_b: pd.DataFrame, layer: int, metrics: list[str], scale: np.ndarray) -> dict:
    try:
        a, b = final_a.xs(layer, level="layer"), final_b.xs(layer, level="layer")
        roles = (a[ROLE_METRIC].to_numpy(), b[ROLE_METRIC].to_numpy()) if ROLE_METRIC in a and ROLE_METRIC in b else (None, None)
        m = match_heads(a[metrics].to_numpy(float), b[metrics].to_numpy(float), *roles, scale=scale)
    except (HeadlabError, KeyError) as err:
        return {"n_heads": math.nan, "same_role": math.nan, "same_role_baseline": math.nan,
                "matched_distance": math.nan, "random_distance": math.nan, "error": str(err)}
    return {"n_heads": int(m.permutation.numel()), "same_role": m.same_role, "same_role_baseline": m.same_role_baseline,
            "matched_distance": m.mean_distance, "random_distance": m.random_baseline, "error": ""}
