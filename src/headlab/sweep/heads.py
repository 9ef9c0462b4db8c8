"""Head-level analyses of a sweep's runs: tables in, tables out (pandas around analysis/).

Per run: each head's bifurcation steps, step-0 and final role, movement, early gradient and
washout (`head_summary`; a causal LM's roles come from its pattern scores, `sweep.lm_roles`); the "winners move farther" correlations (`winner_correlations`); the layer-mean head-to-head
divergence over steps (`layer_pair_means`); the init-vs-final cosine geometry
(`cosine_geometry`). Across seeds of one config: every seed pair's head matching
(`seed_matches`, with `headlab.sweep.matching.match_layer`).
"""

from __future__ import annotations

import itertools
import math
from typing import Sequence

import numpy as np
import pandas as pd

from headlab.analysis.bifurcation import metric_bifurcation_steps, role_bifurcation_steps
from headlab.analysis.init_orthogonality import cosine_summary
from headlab.analysis.lm_heads import LM_PATTERN_SCORES, LM_ROLE_THRESHOLD
from headlab.analysis.movement_importance import movement_importance_correlation
from headlab.analysis.roles import ROLES
from headlab.errors import HeadlabError
from headlab.sweep.lm_roles import final_lm_types
from headlab.sweep.matching import DESCRIPTOR_METRICS, ROLE_METRIC, config_finals, final_values, match_layer
from headlab.sweep.runs import Run


def layer_cube(head_metrics: pd.DataFrame, layer: int, metrics: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(`steps [t]`, `values [t, head, metric]`) of one layer; unmeasured cells (or metrics) are NaN."""
    in_layer = head_metrics[head_metrics["layer"] == layer]
    steps, heads = np.sort(in_layer["step"].unique()), np.sort(in_layer["head"].unique())
    rows = in_layer[in_layer["metric"].isin(list(metrics))]
    index = pd.MultiIndex.from_product([steps, heads], names=["step", "head"])
    wide = rows.pivot_table(index=["step", "head"], columns="metric", values="value", aggfunc="last")
    wide = wide.reindex(index=index, columns=list(metrics))
    return steps, wide.to_numpy(dtype=np.float64).reshape(len(steps), len(heads), len(metrics))


# "Early" gradients (C18, the article's 5.3): the running gradient-norm sum up to this step.
EARLY_GRAD_STEPS = 100
KEPT_ROLE = "kept"  # `acquired_role` of a head whose final role is the role it had at step 0


def head_summary(run: Run, importance: pd.Series | None) -> pd.DataFrame:
    """One row per (layer, head): role / metric bifurcation step, step-0 and final role, movement,
    early gradient, specificity, ablation importance.

    `initial_role`: the role at the first measurement (step 0: the random init's preference);
    `acquired_role`: the final role when it differs from that one, else "kept", so a head that was
    sharp at init and only kept its random role does not count as having specialised in training.
    `early_grad_norm`: the head's gradient norm summed over the first `EARLY_GRAD_STEPS` steps
    (`cum_grad_norm` at the last measurement at or before that step; NaN when that is step 0).

    `washout` (a causal LM's heads): `washout`, the share of its role a head lost after its peak.
    `final_type` (a causal LM's heads): its pattern type at the last measurement (`sweep.lm_roles.lm_pattern_types`).

    `specificity = 1 - entropy_norm` at the last step: the attention-specificity importance proxy.
    `ablation_dloss`: `importance`, the measured importance (val loss increase when the head is
    zeroed) per (layer, head), as `headlab.sweep.importance.final_importance` reads it from the
    run's `head_importance.parquet`; NaN when None (the caller reads the file, so this module
    needs nothing from the importance tables that build on it).
    """
    df = run.head_metrics
    if df is None or df.empty:
        return pd.DataFrame()
    final = final_values(df)
    measured = set(df["metric"])  # once: the comprehensions below test every name against it
    frames = []
    for layer in sorted(df["layer"].unique()):
        steps, roles = layer_cube(df, layer, [ROLE_METRIC])
        _, desc = layer_cube(df, layer, [m for m in DESCRIPTOR_METRICS if m in measured])
        frame = pd.DataFrame({"layer": int(layer), "head": np.arange(roles.shape[1])})
        frame["role_bifurcation_step"] = _safe_steps(role_bifurcation_steps, steps, roles[:, :, 0], roles.shape[1])
        frame["metric_bifurcation_step"] = _safe_steps(metric_bifurcation_steps, steps, desc, roles.shape[1])
        frame["initial_role"] = [_role_name(r) for r in roles[0, :, 0]] if len(steps) else None
        _, scores = layer_cube(df, layer, [m for m in LM_PATTERN_SCORES if m in measured])
        frame["washout"] = washout(scores) if scores.size else math.nan
        frame["early_grad_norm"] = _early_grad(df, layer, roles.shape[1])
        frames.append(frame)
    heads = pd.concat(frames, ignore_index=True).set_index(["layer", "head"])
    heads["final_step"] = int(df["step"].max())
    heads["final_role"] = final.get(ROLE_METRIC, pd.Series(dtype=float)).reindex(heads.index).map(_role_name)
    kept = heads["final_role"].notna() & (heads["final_role"] == heads["initial_role"])
    heads["acquired_role"] = heads["final_role"].where(~kept, KEPT_ROLE)
    heads["final_type"] = final_lm_types(final).reindex(heads.index)  # a causal LM's pattern type (C2)
    for column in ("cum_grad_norm", "dist_from_init", "entropy_norm", "confidence"):
        heads[column] = final[column].reindex(heads.index) if column in final else math.nan
    heads["specificity"] = 1.0 - heads["entropy_norm"]
    heads["ablation_dloss"] = importance.reindex(heads.index) if importance is not None else math.nan
    return heads.reset_index()


def washout(shares: np.ndarray, threshold: float = LM_ROLE_THRESHOLD) -> np.ndarray:
    """`[head]`: how much of its role a head lost after holding it: for the pattern score that
    peaked highest (`shares [t, head, score]`, the LM pattern scores), its peak minus its last value.
    NaN for a head whose scores never reached `threshold` (it never held a role to lose). A head
    still forming at the end loses nothing (its peak is its last value), so, unlike a change from
    mid-run, a late-forming head is not counted as washed out."""
    if shares.size == 0 or shares.shape[0] == 0:
        return np.full(shares.shape[1] if shares.ndim == 3 else 0, math.nan)
    filled = np.nan_to_num(shares, nan=-np.inf)
    peak_step = filled.argmax(axis=0)                            # [head, score]
    peaks = np.take_along_axis(filled, peak_step[None], axis=0)[0]
    best = peaks.argmax(axis=1)                                   # [head]
    heads = np.arange(shares.shape[1])
    peak, last = peaks[heads, best], shares[-1, heads, best]
    return np.where(peak >= threshold, peak - last, math.nan)


def _early_grad(head_metrics: pd.DataFrame, layer: int, n_heads: int) -> np.ndarray:
    steps, cum = layer_cube(head_metrics, layer, ["cum_grad_norm"])
    early = np.flatnonzero((steps <= EARLY_GRAD_STEPS) & (steps > 0))
    if early.size == 0:
        return np.full(n_heads, math.nan)
    return cum[early[-1], :, 0]


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
    ablation importance (`rho_*_ablation`; NaN unless the run holds `head_importance.parquet`).
    `rho_early_grad_ablation`: `early_gradient_correlation`, the early gradient as a predictor."""
    out: dict[str, float] = {"rho_early_grad_ablation": early_gradient_correlation(heads)}
    for name, column in WINNER_IMPORTANCE.items():
        for movement, short in (("cum_grad_norm", "grad"), ("dist_from_init", "dist")):
            if heads.empty or column not in heads:
                out[f"rho_{short}_{name}"] = math.nan
                continue
            corr = movement_importance_correlation(heads[movement].to_numpy(float), heads[column].to_numpy(float))
            out[f"rho_{short}_{name}"] = corr.spearman
    return out


def early_gradient_correlation(heads: pd.DataFrame) -> float:
    """Spearman rho of the early gradient norm (first `EARLY_GRAD_STEPS` steps) with ablation
    importance, both ranked WITHIN each layer before pooling the layers: layers differ in gradient
    scale and in how much a head matters, so a pooled rank would mostly compare layers.
    NaN without both columns or fewer than 3 heads with both."""
    if heads.empty or not {"early_grad_norm", "ablation_dloss", "layer"} <= set(heads.columns):
        return math.nan
    ranks = heads.groupby("layer")[["early_grad_norm", "ablation_dloss"]].rank()
    corr = movement_importance_correlation(ranks["early_grad_norm"].to_numpy(float), ranks["ablation_dloss"].to_numpy(float))
    return corr.spearman


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
    """Hungarian matching (`match_layer`, on the yardstick of all these runs) of every pair of
    seeds of one config, layer by layer, at each run's last measurement.
    Columns: layer, job_a, job_b, n_heads, same_role, same_role_baseline, matched_distance,
    random_distance, error (why a pair could not be matched, else "")."""
    finals = config_finals(runs)
    if len(finals) < 2:
        return pd.DataFrame()
    layers = sorted(pd.concat(finals.values()).index.get_level_values("layer").unique())
    return pd.DataFrame([{"layer": int(layer), "job_a": job_a, "job_b": job_b, **_match_pair(finals, job_a, job_b, layer)}
                         for layer in layers for job_a, job_b in itertools.combinations(finals, 2)])


def _match_pair(finals: dict[str, pd.DataFrame], job_a: str, job_b: str, layer: int) -> dict:
    try:
        m = match_layer(finals, job_a, job_b, layer)
    except HeadlabError as err:
        return {"n_heads": math.nan, "same_role": math.nan, "same_role_baseline": math.nan,
                "matched_distance": math.nan, "random_distance": math.nan, "error": str(err)}
    return {"n_heads": int(m.permutation.numel()), "same_role": m.same_role, "same_role_baseline": m.same_role_baseline,
            "matched_distance": m.mean_distance, "random_distance": m.random_baseline, "error": ""}
