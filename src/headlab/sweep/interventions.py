"""Did the other heads take over? `intervention_effects.csv`: per config of a `knockout` /
`freeze_pattern` sweep, the accuracy dip and recovery after the intervention and the role changes
of the surviving heads, each against the un-intervened control run of the SAME seed.

Each run says what was done to it in `summary.json` `intervention` (`kind`, `step`, `heads`,
`applied_step`; `headlab.lit.callbacks.interventions`). A run whose `step` is null (or that has no
`intervention` block) is a control; an intervened run is paired with the control of the same seed
whose other swept values (all but `intervention.*`) are equal. t = `applied_step`: the intervention
acts after t optimiser updates. metrics.csv logs at step s the val accuracy of the model after s + 1
updates (Lightning's convention), so rows at s < t are the intact model's and rows at s >= t come after.

Per intervened run (`intervention_runs.csv`), from metrics.csv's val/acc rows:

- `acc_before`: the last val acc logged at a step < t; `acc_after`: the first at a step >= t
  (`step_after`), and `control_acc_after` the control's at that step. `dip = acc_before - acc_after`
  (> 0: accuracy fell), `dip_vs_control = control_acc_after - acc_after`.
- `best_after` / `control_best_after`: the best val acc at steps >= t, of the run and of its control.
  `recovered_frac = best_after / control_best_after`: 1 = as good as never intervened.
- `final_gap`: control minus run val acc at the last step both logged.
- Roles (head_metrics `role` rows) of the SURVIVING heads (every head but the intervened ones), in
  the window [t0, t + window] with t0 the last measured step <= t (head_metrics' step s is the
  model after s updates, so t0's roles are the intact model's): `role_changes` counts a head's
  role differing between consecutive measurements; `heads_role_changed` counts heads whose role at
  the window's end differs from that at t0. `control_role_changes` / `control_heads_role_changed`:
  the same heads and window in the control. More changes than the control's = the survivors
  reorganised after the intervention.

Per config: each of those numbers as a mean with a 95 % t-interval over seeds (`mean_ci`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from headlab.store import atomic_write_csv
from headlab.sweep.matching import ROLE_METRIC
from headlab.sweep.runs import Run
from headlab.stats import mean_ci
from headlab.sweep.stats import TextColumn, format_interval, job_tags, text_table

EFFECTS_CSV = "intervention_effects.csv"
EFFECT_RUNS_CSV = "intervention_runs.csv"
ROLE_WINDOW = 200  # steps after t in which role changes are counted (sweep=knockout measures every 50)
# Per-run numbers summarised over seeds, with the range each can take (the interval is clipped to it).
EFFECT_STATISTICS: dict[str, tuple[float, float]] = {
    "acc_before": (0.0, 1.0), "acc_after": (0.0, 1.0), "control_acc_after": (0.0, 1.0),
    "dip": (-1.0, 1.0), "dip_vs_control": (-1.0, 1.0), "best_after": (0.0, 1.0),
    "control_best_after": (0.0, 1.0), "recovered_frac": (0.0, math.inf), "final_gap": (-1.0, 1.0),
    "role_changes": (0.0, math.inf), "control_role_changes": (0.0, math.inf),
    "heads_role_changed": (0.0, math.inf), "control_heads_role_changed": (0.0, math.inf),
}


def intervention_info(run: Run) -> dict[str, Any] | None:
    """The run's `intervention` block from summary.json (None when it has none). Where the summary
    says `applied_step: null` but the run wrote `interventions.json` at t, the file's record wins:
    earlier runs lost the step from the summary when their best checkpoint, from before t, was
    evaluated after fit (fixed in the callback since; the sweeps of 2026-11-30 have such runs)."""
    info = run.summary.get("intervention")
    if not isinstance(info, dict):
        return None
    if info.get("applied_step") is None and info.get("step") is not None:
        path = run.files.interventions_path  # written by the run at t (headlab.lit.callbacks.interventions)
        try:
            written = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else []
        except (OSError, ValueError):
            written = []
        applied = [w for w in written if isinstance(w, dict) and w.get("applied_step") is not None]
        if applied:
            return {**info, **applied[-1]}
    return info


def is_control(run: Run) -> bool:
    """No intervention configured (`step: null`, or no intervention block at all)."""
    info = intervention_info(run)
    return info is None or info.get("step") is None


def acc_effects(curve: pd.DataFrame | None, control: pd.DataFrame | None, t: int) -> dict[str, float]:
    """The accuracy numbers of the module docstring from two `step, val_acc` curves."""
    out = {k: math.nan for k in ("acc_before", "acc_after", "step_after", "control_acc_after", "dip", "dip_vs_control",
                                 "best_after", "control_best_after", "recovered_frac", "final_gap")}
    run_acc, ctl_acc = _series(curve), _series(control)
    before, after = run_acc[run_acc.index < t], run_acc[run_acc.index >= t]  # logged step s: after s + 1 updates
    if len(before):
        out["acc_before"] = float(before.iloc[-1])
    if len(after):
        out["step_after"], out["acc_after"] = float(after.index[0]), float(after.iloc[0])
        out["best_after"] = float(after.max())
        out["dip"] = out["acc_before"] - out["acc_after"]
        if after.index[0] in ctl_acc.index:
            out["control_acc_after"] = float(ctl_acc.loc[after.index[0]])
            out["dip_vs_control"] = out["control_acc_after"] - out["acc_after"]
    ctl_after = ctl_acc[ctl_acc.index >= t]
    if len(ctl_after):
        out["control_best_after"] = float(ctl_after.max())
        if out["control_best_after"] > 0:
            out["recovered_frac"] = out["best_after"] / out["control_best_after"]
    common = run_acc.index.intersection(ctl_acc.index)
    if len(common):
        last = common.max()
        out["final_gap"] = float(ctl_acc.loc[last] - run_acc.loc[last])
    return out


def _series(curve: pd.DataFrame | None) -> pd.Series:
    if curve is None or curve.empty:
        return pd.Series(dtype=np.float64)
    clean = curve.dropna(subset=["val_acc"]).sort_values("step", kind="stable")
    return clean.groupby("step")["val_acc"].last()


def role_changes(head_metrics: pd.DataFrame | None, t: int, window: int,
                 excluded: set[tuple[int, int]]) -> tuple[float, float]:
    """(role changes between consecutive measurements, heads whose role differs at the window's end
    from t0) over the heads not in `excluded`, in [t0, t + window], t0 = the last measured step <= t.
    NaN, NaN without role rows in that window."""
    if head_metrics is None or head_metrics.empty:
        return math.nan, math.nan
    roles = head_metrics[head_metrics["metric"] == ROLE_METRIC]
    measured = np.sort(roles["step"].unique())
    starts = measured[measured <= t]
    if len(starts) == 0:
        return math.nan, math.nan
    steps = measured[(measured >= starts[-1]) & (measured <= t + window)]
    if len(steps) < 2:
        return math.nan, math.nan
    wide = roles[roles["step"].isin(steps)].pivot_table(index="step", columns=["layer", "head"], values="value",
                                                       aggfunc="last")
    keep = [c for c in wide.columns if (int(c[0]), int(c[1])) not in excluded]
    values = wide[keep].sort_index().to_numpy(dtype=np.float64)  # [step, head]
    both = np.isfinite(values[1:]) & np.isfinite(values[:-1])
    changes = int(((values[1:] != values[:-1]) & both).sum())
    ends = np.isfinite(values[0]) & np.isfinite(values[-1])
    return float(changes), float(((values[0] != values[-1]) & ends).sum())


def effects_runs(runs_by_config: dict[str, list[Run]], tags: pd.DataFrame, window: int = ROLE_WINDOW) -> pd.DataFrame:
    """One row per intervened run (see the module docstring); empty when no run intervened."""
    runs = [r for group in runs_by_config.values() for r in group]
    controls = {_control_key(r, tags): r for r in runs if is_control(r)}
    rows = []
    for config in sorted(runs_by_config):
        for run in runs_by_config[config]:
            info = intervention_info(run)
            if info is None or is_control(run):
                continue
            heads = [tuple(int(v) for v in h) for h in info.get("heads") or []]
            row: dict[str, Any] = {"config": config, "job": run.job, "seed": run.seed, "kind": info.get("kind"),
                                   "step": info.get("step"), "applied_step": info.get("applied_step"),
                                   "heads": " ".join(f"L{layer}H{head}" for layer, head in heads)}
            control = controls.get(_control_key(run, tags))
            row["control_job"] = control.job if control is not None else None
            t = info.get("applied_step")
            if t is None:  # configured but never reached (training ended before step t)
                rows.append(row)
                continue
            row.update(acc_effects(run.val_curve, control.val_curve if control else None, int(t)))
            changed = role_changes(run.head_metrics, int(t), window, set(heads))
            row["role_changes"], row["heads_role_changed"] = changed
            ctl_changed = role_changes(control.head_metrics if control else None, int(t), window, set(heads))
            row["control_role_changes"], row["control_heads_role_changed"] = ctl_changed
            rows.append(row)
    return pd.DataFrame(rows)


def _control_key(run: Run, tags: pd.DataFrame) -> tuple:
    """(seed, the run's swept values other than the intervention's) as strings."""
    row = tags[tags["job"] == run.job]
    others = [c for c in tags.columns if c not in ("job", "config_label") and not str(c).startswith("intervention.")]
    values = tuple(str(row[c].iloc[0]) for c in others) if len(row) else ()
    return (run.seed, values)


def effects_table(per_run: pd.DataFrame, tags: pd.DataFrame) -> pd.DataFrame:
    """One row per intervened config: the per-run numbers as mean and 95 % t-interval over seeds."""
    rows = []
    for config, group in per_run.groupby("config", sort=True):
        row: dict[str, Any] = {"config": config, **job_tags(tags, group["job"].iloc[0]),
                               "kind": group["kind"].iloc[0], "step": group["step"].iloc[0],
                               "heads": " / ".join(sorted(set(group["heads"]))), "n_seeds": len(group),
                               "n_applied": int(group["applied_step"].notna().sum()),
                               "n_with_control": int(group["control_job"].notna().sum())}
        for name, bounds in EFFECT_STATISTICS.items():
            ci = mean_ci(group[name] if name in group else [], bounds=bounds)
            row.update(ci.columns(name))
        rows.append(row)
    table = pd.DataFrame(rows)
    return table.sort_values("step", kind="stable").reset_index(drop=True) if len(table) else table


def write_intervention_effects(out_dir: Path, runs_by_config: dict[str, list[Run]], tags: pd.DataFrame) -> list[Path]:
    """Write `intervention_effects.csv` (per config) and `intervention_runs.csv` (per run) into `out_dir`;
    none when no run of the sweep intervened."""
    per_run = effects_runs(runs_by_config, tags)
    if per_run.empty:
        return []
    return [atomic_write_csv(Path(out_dir) / name, table) for name, table in ((EFFECT_RUNS_CSV, per_run), (EFFECTS_CSV, effects_table(per_run, tags)))]


def format_effects(table: pd.DataFrame) -> str:
    """The per-config table as a few aligned lines: mean [95% CI] of recovery and role changes."""
    if table.empty:
        return "intervention effects: no intervened config"
    return text_table("intervention effects (val acc; mean [95% CI] over seeds; vs the un-intervened run of the same seed)", table, [
        TextColumn("kind", lambda r: str(r["kind"]), 15, left=True), TextColumn("step", lambda r: str(r["step"]), 5),
        TextColumn("heads", lambda r: str(r["heads"]), left=True),  # as wide as needed: auto picks can name several heads
        TextColumn("seeds", lambda r: str(int(r["n_seeds"])), 5),
        TextColumn("dip vs control", lambda r: format_interval(r, "dip_vs_control", 3), 22),
        TextColumn("recovered", lambda r: format_interval(r, "recovered_frac", 3), 22),
        TextColumn("role changes (control)",
                   lambda r: f"{format_interval(r, 'role_changes', 1)} ({format_interval(r, 'control_role_changes', 1)})", 30)])
