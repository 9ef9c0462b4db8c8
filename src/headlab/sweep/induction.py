"""Induction-head onsets of a sweep of `task=lm` runs: per config, over seeds, with 95 % CIs and
prediction intervals for a new seed.

From each run's `summary.json` `lm` block (written by `headlab.lit.callbacks.lm_metrics`): the
run's onset step = the earliest start of a rise of any head's induction score (None: no head
formed one), the earliest change-point midpoint beside it, its loss-drop and ICL-jump steps, its
highest induction score, and whether the onsets coincided with the loss drop (the old tolerance).
Per config: the mean and t-interval over seeds (`headlab.stats.mean_ci`) of each, the interval a
new seed's onset should fall in (`headlab.stats.prediction_interval`), how many seeds formed a head
(max score >= `FORMED`), how many coincided, and whether each seed's onset sits nearer its own loss
drop than to the other seeds' (`headlab.analysis.coincidence.seed_coincidence`, a permutation p).
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from headlab.analysis.coincidence import seed_coincidence
from headlab.stats import mean_ci, prediction_interval
from headlab.store import atomic_write_csv
from headlab.sweep.runs import Run

INDUCTION_CSV = "induction_onsets.csv"
FORMED = 0.5  # the bar: an induction head has score >= 0.5 on the probe


def run_onsets(run: Run) -> dict[str, float | None] | None:
    """One run's onset facts; None when the run has no `lm` summary (not a language model)."""
    lm = run.summary.get("lm")
    if not isinstance(lm, dict) or "induction_onset_steps" not in lm:
        return None
    onsets = [s for s in lm["induction_onset_steps"].values() if s is not None]
    midpoints = [s for s in (lm.get("induction_midpoint_steps") or {}).values() if s is not None]
    coincide = lm.get("onsets_coincide_with_loss_drop")
    return {"onset_step": min(onsets) if onsets else None, "midpoint_step": min(midpoints) if midpoints else None,
            "loss_drop_step": lm.get("loss_drop_step"),
            "icl_jump_step": lm.get("icl_jump_step"), "max_induction_score": lm.get("max_induction_score_overall"),
            "coincide": None if coincide is None else float(bool(coincide))}


def induction_table(runs_by_config: dict[str, list[Run]], tags: pd.DataFrame) -> pd.DataFrame:
    """One row per config of LM runs: seeds, seeds that formed a head, mean [95 % CI] of each fact."""
    rows = []
    for config, runs in runs_by_config.items():
        facts = [f for f in (run_onsets(r) for r in runs) if f is not None]
        if not facts:
            continue
        frame = pd.DataFrame(facts)
        row: dict[str, object] = {"config": config, "n_seeds": len(frame),
                                  "n_formed": int((frame["max_induction_score"].fillna(0) >= FORMED).sum()),
                                  "n_coincide": int(frame["coincide"].fillna(0).sum())}
        for name in ("onset_step", "midpoint_step", "loss_drop_step", "icl_jump_step"):
            row.update(mean_ci(frame[name], bounds=(0.0, math.inf)).columns(name))  # steps: never below 0
            new_seed = prediction_interval(frame[name], bounds=(0.0, math.inf))
            row.update({f"{name}_pi95_low": new_seed.low, f"{name}_pi95_high": new_seed.high})
        row.update(_seed_coincidence(frame))
        row.update(mean_ci(frame["max_induction_score"], bounds=(0.0, 1.0)).columns("max_induction_score"))
        rows.append(row)
    table = pd.DataFrame(rows)
    if table.empty or not {"config", "config_label"} <= set(tags.columns):
        return table
    return table.merge(tags[["config", "config_label"]].drop_duplicates("config"), on="config", how="left")


def _seed_coincidence(frame: pd.DataFrame) -> dict[str, float]:
    """Mean |onset - loss drop| over seeds and its permutation p (drops shuffled across seeds); NaN with < 2 pairs."""
    onsets = pd.to_numeric(frame["onset_step"], errors="coerce").tolist()
    drops = pd.to_numeric(frame["loss_drop_step"], errors="coerce").tolist()
    if sum(pd.notna(o) and pd.notna(d) for o, d in zip(onsets, drops)) < 2:
        return {"onset_loss_drop_gap": math.nan, "onset_loss_drop_null_gap": math.nan, "onset_loss_drop_p": math.nan}
    test = seed_coincidence(onsets, drops)
    return {"onset_loss_drop_gap": test.gap, "onset_loss_drop_null_gap": test.null_gap, "onset_loss_drop_p": test.p_value}


def write_induction_onsets(out_dir: Path, runs_by_config: dict[str, list[Run]], tags: pd.DataFrame) -> list[Path]:
    """Write `induction_onsets.csv` into `out_dir`; nothing when the sweep has no LM run."""
    table = induction_table(runs_by_config, tags)
    return [atomic_write_csv(Path(out_dir) / INDUCTION_CSV, table)] if not table.empty else []
