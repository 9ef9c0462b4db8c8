"""Steps to a target accuracy against a reference arm: `convergence.csv`, the article's claim 3.1
read from `sweep=templates` (free vs soft vs hard template).

For each run, the reference is the run of the SAME seed (and the same other swept values) whose
`model.template_mode` is `free`. From metrics.csv's val/acc rows:

- `target = TARGET_FRACTION * (the reference run's best logged val acc)`;
- `steps_to_target`: the first logged step whose val acc reaches the target (NaN: never reached;
  `reached` says which), as metrics.csv logs it (step s: the model after s + 1 updates); its
  resolution is the val cadence (`trainer.val_check_interval`);
- `best_val_acc`: the best logged val acc, and `best_step` where it was first logged;
- `final_role_<name>`: how many heads end with each role (summary.json `final_roles`).

Per config: each as a mean with a 95 % t-interval over seeds; `steps_to_target` over the seeds
that reached the target only (`n_reached` of `n_seeds` did), so read it with `n_reached`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from headlab.analysis.roles import ROLES
from headlab.store import atomic_write_csv
from headlab.sweep.runs import Run
from headlab.stats import mean_ci
from headlab.sweep.stats import TextColumn, config_column, format_interval, job_tags, text_table

CONVERGENCE_CSV = "convergence.csv"
CONVERGENCE_RUNS_CSV = "convergence_runs.csv"
TARGET_FRACTION = 0.95
REFERENCE_FACTOR = "model.template_mode"
REFERENCE_VALUE = "free"


def curve_facts(curve: pd.DataFrame | None, target: float) -> dict[str, float]:
    """`steps_to_target`, `best_val_acc`, `best_step` of one `step, val_acc` curve (NaN where absent)."""
    out = {"steps_to_target": math.nan, "best_val_acc": math.nan, "best_step": math.nan}
    if curve is None or curve.empty:
        return out
    clean = curve.dropna(subset=["val_acc"]).sort_values("step", kind="stable")
    if clean.empty:
        return out
    best = clean.loc[clean["val_acc"].idxmax()]
    out["best_val_acc"], out["best_step"] = float(best["val_acc"]), float(best["step"])
    reached = clean[clean["val_acc"] >= target] if np.isfinite(target) else clean.iloc[:0]
    if len(reached):
        out["steps_to_target"] = float(reached["step"].iloc[0])
    return out


def role_counts(final_roles: Any) -> dict[str, int]:
    """Heads per role name in summary.json `final_roles` (a list of layers, each a list of names)."""
    counts = {name: 0 for name in ROLES}
    for layer in final_roles or []:
        for name in layer:
            if name in counts:
                counts[name] += 1
    return counts


def convergence_runs(runs_by_config: dict[str, list[Run]], tags: pd.DataFrame, factor: str = REFERENCE_FACTOR,
                     reference: str = REFERENCE_VALUE, fraction: float = TARGET_FRACTION) -> pd.DataFrame:
    """One row per run: its reference's target and its own steps to it (see the module docstring);
    empty when `factor` is not swept or no run has the `reference` value."""
    if factor not in tags.columns:
        return pd.DataFrame()
    value_of = dict(zip(tags["job"], tags[factor].astype(str)))
    others = [c for c in tags.columns if c not in ("job", "config_label", factor)]
    key_of = {job: tuple(str(v) for v in values) for job, *values in tags[["job", *others]].itertuples(index=False)}
    runs = [r for group in runs_by_config.values() for r in group]
    references = {(r.seed, key_of.get(r.job)): r for r in runs if value_of.get(r.job) == reference}
    if not references:
        return pd.DataFrame()
    rows = []
    for config in sorted(runs_by_config):
        for run in runs_by_config[config]:
            ref = references.get((run.seed, key_of.get(run.job)))
            ref_best = curve_facts(ref.val_curve, math.nan)["best_val_acc"] if ref is not None else math.nan
            row: dict[str, Any] = {"config": config, "job": run.job, "seed": run.seed, factor: value_of.get(run.job),
                                   "reference_job": ref.job if ref is not None else None,
                                   "reference_best_val_acc": ref_best, "target": fraction * ref_best}
            row.update(curve_facts(run.val_curve, row["target"]))
            row["reached"] = bool(np.isfinite(row["steps_to_target"]))
            row.update({f"final_role_{k}": v for k, v in role_counts(run.summary.get("final_roles")).items()})
            rows.append(row)
    return pd.DataFrame(rows)


def convergence_table(per_run: pd.DataFrame, tags: pd.DataFrame) -> pd.DataFrame:
    """One row per config: means and 95 % t-intervals over seeds (see the module docstring)."""
    rows = []
    role_columns = [c for c in per_run.columns if c.startswith("final_role_")]
    for config, group in per_run.groupby("config", sort=True):
        row: dict[str, Any] = {"config": config, **job_tags(tags, group["job"].iloc[0]),
                               "n_seeds": len(group), "n_reached": int(group["reached"].sum()),
                               "n_with_reference": int(group["reference_job"].notna().sum())}
        for name, bounds in (("steps_to_target", (0.0, math.inf)), ("best_val_acc", (0.0, 1.0)),
                             ("best_step", (0.0, math.inf)), ("target", (0.0, 1.0))):
            ci = mean_ci(group[name], bounds=bounds)
            row.update(ci.columns(name))
        row.update({f"{c}_mean": float(group[c].mean()) for c in role_columns})
        rows.append(row)
    return pd.DataFrame(rows)


def write_convergence(out_dir: Path, runs_by_config: dict[str, list[Run]], tags: pd.DataFrame) -> list[Path]:
    """Write `convergence.csv` (per config) and `convergence_runs.csv` (per run) into `out_dir`;
    none unless the sweep varies `model.template_mode` with a `free` arm."""
    per_run = convergence_runs(runs_by_config, tags)
    if per_run.empty:
        return []
    return [atomic_write_csv(Path(out_dir) / name, table) for name, table in ((CONVERGENCE_RUNS_CSV, per_run), (CONVERGENCE_CSV, convergence_table(per_run, tags)))]


def format_convergence(table: pd.DataFrame) -> str:
    """The per-config table as aligned lines: steps to target (seeds that reached it) and best val acc."""
    if table.empty:
        return "convergence: no template-mode sweep"
    return text_table(f"steps to {TARGET_FRACTION:.0%} of the same seed's free best val acc (mean [95% CI] over seeds)", table, [
        config_column(table), TextColumn("reached", lambda r: f"{int(r['n_reached'])}/{int(r['n_seeds'])}", 8),
        TextColumn("steps to target", lambda r: format_interval(r, "steps_to_target", 0), 26),
        TextColumn("best val acc", lambda r: format_interval(r, "best_val_acc", 3), 24)])
