"""Induction onsets against batch size x context length: measured tokens vs N = T sqrt(B C).

Aoyama, Wilcox and Schneider (2025, arXiv:2511.16893, "Predicting the Emergence of Induction Heads
in Language Model Pretraining") fit the number of training tokens at which induction heads form as
N_pt = T * sqrt(B * C), with B the batch size (sequences), C the context size (tokens per
sequence) and T ~ 10^5.7, independent of model size. In steps that is T / sqrt(B C): a larger batch
or context forms the heads in fewer steps but more tokens.

Per run (`scaling_facts`): its onset step (the earliest head's start of the rise,
`headlab.sweep.induction.run_onsets`), B = data.batch_size and C = data.max_len from its saved
config, and the onset in tokens = onset step x B x C. Per config (`scaling_table`): the mean and
95 % t-interval over seeds of the onset step and tokens and the onset step's prediction interval
for a new seed (seeds that formed no onset are left out and counted), the prediction in tokens and steps, measured / predicted, and the T the measured
onset implies (onset tokens / sqrt(B C), as log10), and the repeat density of repeat_tokens
(`repeat_density`), so a grid that changes it with C shows it. Written as `induction_scaling.csv` and
`figures/induction_scaling.png` when the sweep's LM runs span more than one (B, C).

`scaling_fit` separates B from C: log10 onset tokens = a + b_B log10 B + b_C log10 C by OLS, with
seeds as the units in one of two ways: on the per-cell means of log10 tokens (one point per (B, C),
t-intervals on n_cells - 3 df; the default), or on every run with standard errors cluster-robust
by cell (statsmodels, t on n_cells - 1 df: few clusters make these optimistic). sqrt(B C) is
b_B = b_C = 0.5; the fit's t-tests and joint F-test are against that. In steps each slope is one
less (tokens = steps x B x C). Fitted for the onset and for the loss drop's start; written as
`induction_scaling_fit.csv` when the cells with an onset
span at least 2 values of B and of C and outnumber the 3 coefficients.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from headlab.errors import DataError
from headlab.stats import mean_ci, prediction_interval
from headlab.store import atomic_write_csv
from headlab.sweep.induction import FORMED, run_onsets
from headlab.sweep.runs import Run

SCALING_CSV = "induction_scaling.csv"
FIT_CSV = "induction_scaling_fit.csv"
FIT_METHODS = ("cell_means", "cluster")
FIT_MEASURES = ("onset_step", "loss_drop_step")  # the earliest head's start of the rise; the repeat loss's fall
SQRT_SLOPE = 0.5  # N = T sqrt(B C): onset tokens ~ B^0.5 C^0.5
SCALING_FIGURE = "induction_scaling.png"
T_LOG10 = 5.7  # Aoyama et al. (2025): T ~ 10^5.7 tokens
RUN_COLUMNS = ("config", "batch_size", "context", "onset_step", "max_induction_score")
DENSITY_COLUMN = "repeat_density"  # optional per-run column: the share of targets copying predicts


def repeat_density(min_segment: int, max_segment: int, context: int) -> float:
    """The share of a repeat_tokens sequence's C - 1 next-token targets that an induction head can
    predict: the recurring copy's tokens after its first, (E[length] - 1) / (C - 1) with the length
    uniform on [min_segment, max_segment] (its first token follows a random one, so nothing predicts it)."""
    return ((min_segment + max_segment) / 2 - 1) / (context - 1)


def predicted_onset_tokens(batch_size: float, context: float, t_log10: float = T_LOG10) -> float:
    """N = T sqrt(B C) training tokens, T = 10^t_log10."""
    return 10.0 ** t_log10 * math.sqrt(batch_size * context)


def scaling_facts(run: Run) -> dict[str, object] | None:
    """One LM run's (config, B, C, onset step, max score); None for a run that is not an LM or has no saved config."""
    onsets = run_onsets(run)
    if onsets is None:
        return None
    try:
        data = run.files.config().data
        batch_size, context = int(data.batch_size), int(data.max_len)
    except (DataError, OSError, AttributeError, TypeError, ValueError):  # no readable config: not placeable on the grid
        return None
    try:  # repeat_tokens only; a text LM has no planted repeat
        density = repeat_density(int(data.min_segment), int(data.max_segment), context)
    except (AttributeError, TypeError, ValueError, KeyError):
        density = math.nan
    return {"config": run.config, "batch_size": batch_size, "context": context,
            "onset_step": onsets["onset_step"], "max_induction_score": onsets["max_induction_score"],
            DENSITY_COLUMN: density, "loss_drop_step": onsets["loss_drop_step"]}


def scaling_table(per_run: pd.DataFrame, t_log10: float = T_LOG10) -> pd.DataFrame:
    """per_run: one row per run with `RUN_COLUMNS` -> one row per (config, B, C), sorted by B C then B."""
    missing = set(RUN_COLUMNS) - set(per_run.columns)
    if missing:
        raise ValueError(f"per-run scaling facts need columns {sorted(missing)}")
    rows = []
    for (config, batch_size, context), group in per_run.groupby(["config", "batch_size", "context"], sort=False):
        tokens_per_step = int(batch_size) * int(context)
        steps = pd.to_numeric(group["onset_step"], errors="coerce")
        predicted = predicted_onset_tokens(batch_size, context, t_log10)
        row: dict[str, object] = {"config": config, "batch_size": int(batch_size), "context": int(context),
                                  "tokens_per_step": tokens_per_step, "n_seeds": len(group),
                                  "n_with_onset": int(steps.notna().sum()),
                                  "n_formed": int((pd.to_numeric(group["max_induction_score"], errors="coerce")
                                                   .fillna(0) >= FORMED).sum())}
        if DENSITY_COLUMN in group:
            row[DENSITY_COLUMN] = float(pd.to_numeric(group[DENSITY_COLUMN], errors="coerce").mean())
        if "loss_drop_step" in group:  # the model-level date beside the earliest head's
            row.update(mean_ci(pd.to_numeric(group["loss_drop_step"], errors="coerce"), bounds=(0.0, math.inf))
                       .columns("loss_drop_step"))
        row.update(mean_ci(steps, bounds=(0.0, math.inf)).columns("onset_step"))
        new_seed = prediction_interval(steps, bounds=(0.0, math.inf))
        row.update(onset_step_pi95_low=new_seed.low, onset_step_pi95_high=new_seed.high)
        row.update(mean_ci(steps * tokens_per_step, bounds=(0.0, math.inf)).columns("onset_tokens"))
        measured = row["onset_tokens_mean"]
        row.update(predicted_tokens=predicted, predicted_step=predicted / tokens_per_step,
                   measured_over_predicted=measured / predicted,
                   log10_T_implied=math.log10(measured / math.sqrt(tokens_per_step)) if measured > 0 else math.nan)
        rows.append(row)
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    return table.sort_values(["tokens_per_step", "batch_size"], kind="stable").reset_index(drop=True)


def scaling_fit(per_run: pd.DataFrame, method: str = "cell_means", measure: str = "onset_step") -> pd.DataFrame:
    """log10 onset tokens = a + b_B log10 B + b_C log10 C (OLS, statsmodels): one row per coefficient
    (`term` intercept, log10_B, log10_C) with its estimate, standard error, 95 % interval, df, the
    t-test p against the sqrt(B C) slope 0.5 (slopes only), and, on every row, the joint F-test p of
    b_B = b_C = 0.5, the cells and runs used and the cells left out (no run with an onset).

    method "cell_means": one point per (B, C), the mean over its seeds of log10 onset tokens (runs
    without an onset left out), classical OLS intervals on n_cells - 3 df; every cell weighs the
    same. method "cluster": every run with an onset is a point, the covariance cluster-robust by
    cell (statsmodels' small-sample correction), t on n_cells - 1 df. Empty when the cells with an
    onset do not span 2 values of B and of C or are no more than 3. `measure`: the per-run step column
    dated (`onset_step`, or `loss_drop_step`: the start of the repeat loss's fall, the model-level date)."""
    import numpy as np
    import statsmodels.api as sm

    if method not in FIT_METHODS:
        raise ValueError(f"method {method!r}: one of {list(FIT_METHODS)}")
    if measure not in FIT_MEASURES:
        raise ValueError(f"measure {measure!r}: one of {list(FIT_MEASURES)}")
    missing = ({*RUN_COLUMNS, measure} - {"onset_step"}) - set(per_run.columns)
    if missing:
        raise ValueError(f"per-run scaling facts need columns {sorted(missing)}")
    runs = per_run.assign(onset_step=pd.to_numeric(per_run[measure], errors="coerce"))
    cells = runs[["batch_size", "context"]].drop_duplicates()
    runs = runs[runs["onset_step"] > 0].copy()
    runs["log10_tokens"] = np.log10(runs["onset_step"] * runs["batch_size"] * runs["context"])
    runs["cell"] = runs["batch_size"].astype(str) + "x" + runs["context"].astype(str)
    means = runs.groupby(["batch_size", "context"], as_index=False)["log10_tokens"].mean()
    n_cells = len(means)
    if n_cells <= 3 or means["batch_size"].nunique() < 2 or means["context"].nunique() < 2:
        return pd.DataFrame()
    points = means if method == "cell_means" else runs
    exog = pd.DataFrame({"intercept": 1.0, "log10_B": np.log10(points["batch_size"].to_numpy(float)),
                         "log10_C": np.log10(points["context"].to_numpy(float))})
    model = sm.OLS(points["log10_tokens"].to_numpy(float), exog)
    if method == "cell_means":
        result = model.fit()
    else:
        groups = pd.factorize(runs["cell"])[0]
        result = model.fit(cov_type="cluster", cov_kwds={"groups": groups}, use_t=True)
    df = float(result.df_resid) if method == "cell_means" else float(n_cells - 1)
    ci = result.conf_int(alpha=0.05)
    joint = result.f_test(f"log10_B = {SQRT_SLOPE}, log10_C = {SQRT_SLOPE}")
    rows = []
    for term in exog.columns:
        estimate, se = float(result.params[term]), float(result.bse[term])
        p_half = math.nan
        if term != "intercept":
            p_half = float(result.t_test(f"{term} = {SQRT_SLOPE}").pvalue)
        rows.append({"measure": measure, "method": method, "term": term, "estimate": estimate, "se": se,
                     "ci95_low": float(ci.loc[term, 0]), "ci95_high": float(ci.loc[term, 1]), "df": df,
                     "p_slope_is_half": p_half, "p_joint_sqrt_bc": float(joint.pvalue), "n_cells": n_cells,
                     "n_runs": int(len(runs)), "n_cells_without_onset": int(len(cells) - n_cells)})
    return pd.DataFrame(rows)


def write_induction_scaling(out_dir: Path, runs_by_config: dict[str, list[Run]], figures: bool = True) -> list[Path]:
    """`induction_scaling.csv` (and its figure) in `out_dir`; nothing unless LM runs span more than one (B, C)."""
    facts = [f for runs in runs_by_config.values() for f in (scaling_facts(r) for r in runs) if f is not None]
    per_run = pd.DataFrame(facts, columns=[*RUN_COLUMNS, DENSITY_COLUMN, "loss_drop_step"])
    if per_run.empty or len(per_run[["batch_size", "context"]].drop_duplicates()) < 2:
        return []
    table = scaling_table(per_run)
    written = [atomic_write_csv(Path(out_dir) / SCALING_CSV, table)]
    fit = pd.concat([scaling_fit(per_run, method, measure) for measure in FIT_MEASURES if measure in per_run
                     for method in FIT_METHODS], ignore_index=True)
    if not fit.empty:
        written.append(atomic_write_csv(Path(out_dir) / FIT_CSV, fit))
    if figures:
        from headlab.plots.induction import plot_induction_scaling  # plotting only when asked

        written.append(plot_induction_scaling(table, Path(out_dir) / "figures" / SCALING_FIGURE))
    return written
