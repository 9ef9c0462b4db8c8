"""Sweep tables of `headlab-prune` results (the founding article, section 5.2: "a 12-layer model can
usually lose 20-30 % of its heads with almost no drop in the metric, and inference gets about
15-20 % faster"), written by headlab-aggregate.

Every usable job whose run dir holds `prune.json` gives one row per prune label
(`<ranking>[-valhalf]-ft<N>`, e.g. `ablation-ft0`): what was removed, the accuracy before / after, and the
measured speed-up (prune.json `speedup`; NaN when the job was pruned with `prune.speedup=false`).
`selection` says which examples chose the heads and the stop (`val`: the whole validation split, so
`val_acc_*` is read on the set that chose; `val_half`: validation half A, so `val_acc_*` is half A's
and `heldout_acc_*` is half B's, a held-out reading like `test_acc_*`; NaN under `val`; a prune.json
from before the setting existed reads as `val`).
`*_drop` = before - after (positive: the pruned network is worse). A prune.json that cannot be read
as JSON, or an entry without the fields, is left out. Written only when some job has prune.json:

| file | one row per |
|---|---|
| `sweep_prune_runs.csv` | (job, label): seed, config tags and swept factors, ranking, finetune_steps, max_drop, n_heads_before / _after, fraction_heads_pruned, fraction_params_pruned, val_acc / test_acc before, after and drop, speedup_b1, speedup_b64, selection, heldout_acc before, after and drop |
| `sweep_prune.csv` | (config, label), with the swept factors: mean and 95% t-interval over seeds of fraction_heads_pruned, test_acc_drop and speedup_b64; selection and mean heldout_acc_drop |
| `figures/prune_sweep.png` | (with figures) the three per seed, with mean and interval, beside the article's range (`headlab.plots.prune_sweep`) |
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from headlab.store import atomic_write_csv
from headlab.sweep.runs import Run
from headlab.stats import mean_ci
from headlab.sweep.stats import TextColumn, config_column, format_interval, job_tags, text_table

RUNS_FILE = "sweep_prune_runs.csv"
CONFIG_FILE = "sweep_prune.csv"
FIGURE = "prune_sweep.png"
# Per-config statistics: column -> the range it can take (the interval is clipped to it).
CONFIG_STATISTICS = {"fraction_heads_pruned": (0.0, 1.0), "test_acc_drop": (-1.0, 1.0), "speedup_b64": (0.0, math.inf)}


def prune_rows(run: Run) -> list[dict[str, Any]]:
    """One row per label of the run's prune.json ([] without a readable file)."""
    path = run.files.prune_report_path
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(report, dict):
        return []
    rows = []
    for label, entry in sorted(report.items()):
        try:
            rows.append(_row(label, entry))
        except (KeyError, TypeError, ValueError, IndexError):
            continue  # not a headlab-prune entry
    return rows


def _row(label: str, entry: dict[str, Any]) -> dict[str, Any]:
    settings, speedup = entry["settings"], entry.get("speedup") or {}
    (heads_before, heads_after), (val_before, val_after), (test_before, test_after) = (
        entry["n_heads"], entry["val_acc"], entry["test_acc"])
    return {"label": label, "ranking": settings["ranking"], "finetune_steps": int(settings["finetune_steps"]),
            "max_drop": float(settings["max_drop"]), "checkpoint_step": entry.get("step"),
            "n_heads_before": int(heads_before), "n_heads_after": int(heads_after),
            "fraction_heads_pruned": float(entry["fraction_heads_pruned"]),
            "fraction_params_pruned": float(entry["fraction_params_pruned"]),
            "val_acc_before": float(val_before), "val_acc_after": float(val_after),
            "val_acc_drop": float(val_before) - float(val_after),
            "test_acc_before": float(test_before), "test_acc_after": float(test_after),
            "test_acc_drop": float(test_before) - float(test_after),
            "speedup_b1": _number(speedup.get("batch_1")), "speedup_b64": _number(speedup.get("batch_64")),
            "selection": str(entry.get("selection", "val")), **_heldout(entry.get("heldout_acc"))}


def _heldout(pair: Any) -> dict[str, float]:
    """heldout_acc_before / _after / _drop from prune.json's `heldout_acc` ([before, after]; NaN without one)."""
    before, after = (float(pair[0]), float(pair[1])) if pair is not None else (math.nan, math.nan)
    return {"heldout_acc_before": before, "heldout_acc_after": after, "heldout_acc_drop": before - after}


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


def prune_tables(runs_by_config: dict[str, list[Run]], tags: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per-run rows, per-config rows); both empty when no usable run holds prune.json.

    `tags` has one row per job: `job`, `config_label` and the swept factors (as aggregate passes it).
    """
    per_run = []
    for config in sorted(runs_by_config):
        for run in runs_by_config[config]:
            if run.usable:
                per_run += [{"job": run.job, "seed": run.seed, "config": config, **job_tags(tags, run.job), **row}
                            for row in prune_rows(run)]
    if not per_run:
        return pd.DataFrame(), pd.DataFrame()
    runs_table = pd.DataFrame(per_run).sort_values(["label", "job"], key=_job_order, kind="stable", ignore_index=True)
    rows = []
    for (config, label), group in runs_table.groupby(["config", "label"], sort=True):
        first = group.iloc[0]
        row: dict[str, Any] = {"config": config, **job_tags(tags, first["job"]), "label": label,
                               "ranking": first["ranking"], "finetune_steps": first["finetune_steps"],
                               "max_drop": first["max_drop"], "n_seeds": len(group),
                               "seeds": " ".join(str(int(s)) for s in sorted(group["seed"].dropna())),
                               "n_heads_before": int(first["n_heads_before"])}
        for column, bounds in CONFIG_STATISTICS.items():
            row.update(mean_ci(group[column], bounds=bounds).columns(column))
        row["fraction_params_pruned_mean"] = float(group["fraction_params_pruned"].mean())
        row["speedup_b1_mean"] = float(group["speedup_b1"].mean())
        row["selection"] = first["selection"]
        row["heldout_acc_drop_mean"] = float(group["heldout_acc_drop"].mean())  # NaN under selection=val
        rows.append(row)
    return runs_table, pd.DataFrame(rows)


def _job_order(column: pd.Series) -> pd.Series:
    return column.astype(int) if column.name == "job" else column


def write_sweep_prune(out_dir: Path, runs_by_config: dict[str, list[Run]], tags: pd.DataFrame,
                      figures: bool = False) -> list[Path]:
    """Write `sweep_prune_runs.csv` and `sweep_prune.csv` into `out_dir` (atomically), and with
    `figures` `figures/prune_sweep.png`; nothing when no usable run of the sweep holds prune.json."""
    per_run, per_config = prune_tables(runs_by_config, tags)
    if per_run.empty:
        return []
    written = [atomic_write_csv(Path(out_dir) / name, frame) for name, frame in ((RUNS_FILE, per_run), (CONFIG_FILE, per_config))]
    if figures:
        from headlab.plots.prune_sweep import plot_prune_sweep  # plotting only when asked

        written.append(plot_prune_sweep(per_run, Path(out_dir) / "figures" / FIGURE))
    return written


def format_prune(table: pd.DataFrame) -> str:
    """`sweep_prune.csv` as terminal lines: per config and prune label, the share of heads pruned, the
    test accuracy it cost and the measured speed-up at batch 64."""
    if table.empty:
        return "pruning: no config"
    return text_table("head pruning (headlab-prune per job; mean [95% CI] over seeds; drop = before - after; "
                      "speed-up = unpruned / pruned ms)", table, [
                          config_column(table), TextColumn("prune", lambda r: str(r["label"]), left=True),
                          TextColumn("seeds", lambda r: str(int(r["n_seeds"])), 5),
                          TextColumn("heads pruned", lambda r: format_interval(r, "fraction_heads_pruned"), 22),
                          TextColumn("test acc drop", lambda r: format_interval(r, "test_acc_drop"), 25),
                          TextColumn("speed-up b64", lambda r: format_interval(r, "speedup_b64"), 22)])
