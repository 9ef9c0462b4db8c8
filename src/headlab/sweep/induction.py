"""Induction-head onsets of a sweep of `task=lm` runs: per config, over seeds, with 95 % CIs.

From each run's `summary.json` `lm` block (written by `headlab.lit.callbacks.lm_metrics`): the
run's onset step = the earliest change-point onset of any head's induction score (None: no head
formed one), its loss-drop and ICL-jump steps, its highest induction score, and whether the onsets
coincided with the loss drop. Per config: the mean and t-interval over seeds (`headlab.stats.mean_ci`)
of each, how many seeds formed a head (max score >= `FORMED`), and how many coincided.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from headlab.stats import mean_ci
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
    coincide = lm.get("onsets_coincide_with_loss_drop")
    return {"onset_step": min(onsets) if onsets else None, "loss_drop_step": lm.get("loss_drop_step"),
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
        for name in ("onset_step", "loss_drop_step", "icl_jump_step"):
            row.update(mean_ci(frame[name]).columns(name))
        row.update(mean_ci(frame["max_induction_score"], bounds=(0.0, 1.0)).columns("max_induction_score"))
        rows.append(row)
    table = pd.DataFrame(rows)
    if table.empty or not {"config", "config_label"} <= set(tags.columns):
        return table
    return table.merge(tags[["config", "config_label"]].drop_duplicates("config"), on="config", how="left")


def write_induction_onsets(out_dir: Path, runs_by_config: dict[str, list[Run]], tags: pd.DataFrame) -> list[Path]:
    """Write `induction_onsets.csv` into `out_dir`; nothing when the sweep has no LM run."""
    table = induction_table(runs_by_config, tags)
    return [atomic_write_csv(Path(out_dir) / INDUCTION_CSV, table)] if not table.empty else []
