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
onset implies (onset tokens / sqrt(B C), as log10). Written as `induction_scaling.csv` and
`figures/induction_scaling.png` when the sweep's LM runs span more than one (B, C).
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
SCALING_FIGURE = "induction_scaling.png"
T_LOG10 = 5.7  # Aoyama et al. (2025): T ~ 10^5.7 tokens
RUN_COLUMNS = ("config", "batch_size", "context", "onset_step", "max_induction_score")


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
    return {"config": run.config, "batch_size": batch_size, "context": context,
            "onset_step": onsets["onset_step"], "max_induction_score": onsets["max_induction_score"]}


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


def write_induction_scaling(out_dir: Path, runs_by_config: dict[str, list[Run]], figures: bool = True) -> list[Path]:
    """`induction_scaling.csv` (and its figure) in `out_dir`; nothing unless LM runs span more than one (B, C)."""
    facts = [f for runs in runs_by_config.values() for f in (scaling_facts(r) for r in runs) if f is not None]
    per_run = pd.DataFrame(facts, columns=list(RUN_COLUMNS))
    if per_run.empty or len(per_run[["batch_size", "context"]].drop_duplicates()) < 2:
        return []
    table = scaling_table(per_run)
    written = [atomic_write_csv(Path(out_dir) / SCALING_CSV, table)]
    if figures:
        from headlab.plots.induction import plot_induction_scaling  # plotting only when asked

        written.append(plot_induction_scaling(table, Path(out_dir) / "figures" / SCALING_FIGURE))
    return written
