"""`aggregate_sweep`: one multirun folder -> tidy tables, per-config statistics, figures.

Writes into `out_dir` (default `<sweep_dir>/aggregate/`), every file atomically:

| file | one row per |
|---|---|
| `sweep_runs.csv` | job: status, why skipped, final metrics, steps to converge, per-run head statistics |
| `sweep.parquet` | (run, step, layer, head, metric) of every usable run, tagged with its swept values |
| `sweep_heads.csv` | (run, layer, head): bifurcation steps, step-0 / final / acquired role, movement, early gradient, specificity |
| `sweep_layer_pairs.parquet` | (run, step, layer, metric): mean JS, 1 - corr, W_Q / W_Q W_K^T cosine RMS |
| `sweep_matches.csv` | (config, layer, seed pair): Hungarian head matching vs random |
| `sweep_seed_pairs.csv` | (config, disjoint seed pair): same-role share, its chance level and Cohen's kappa over layers (`headlab.sweep.seed_pairs`) |
| `sweep_summary.csv` | config (overrides without `seed`): means and 95% t-intervals over seeds |
| `division_of_labour.csv` | config: within-layer JS, role entropy, cross-seed same role (`headlab.sweep.division`) |
| `intervention_effects.csv`, `convergence.csv` | config of a knockout / freeze_pattern sweep, of a template-mode sweep: `headlab.sweep.interventions`, `headlab.sweep.convergence` |
| `domain_accuracy.csv`, `domain_roles.csv` | (config, domain) of runs with domain ids; (config, domain, layer, role) of split runs: `headlab.sweep.domains` |
| `sweep_importance.csv`, `sweep_importance_tau.csv` | only when runs hold `head_importance.parquet`: see `headlab.sweep.importance` |
| `sweep_redundancy.csv`, `sweep_redundancy_runs.csv` | config (and run): near-duplicate head fraction at the last measurement, mean and 95% t-interval over seeds: see `headlab.sweep.redundancy` |
| `sweep_prune.csv`, `sweep_prune_runs.csv` | (config, prune label) and (run, prune label): share of heads pruned, accuracy drop and measured speed-up of each job's `headlab-prune` (only when jobs hold prune.json): see `headlab.sweep.pruning` |
| `induction_onsets.csv`, `induction_scaling.csv` (+ `figures/induction_scaling.png`) | config of LM runs: onsets (start of the rise) with seed CIs and new-seed prediction intervals, the loss-drop coincidence against shuffled seeds (`headlab.sweep.induction`); onset tokens vs N = T sqrt(B C) when the runs span several (B, C) (`headlab.sweep.induction_scaling`) |
| `figures/*.png` | see `headlab.plots.sweep` |

With the figures, the commands that aggregate (`headlab-aggregate`, `headlab-importance SWEEP_DIR`) also
write `<sweep_dir>/view.html`, headlab-view's page of the sweep (`headlab.view`, docs/view.md).

Only usable runs (completed, every file readable) enter the statistics; the others are listed
in `sweep_runs.csv` with the reason.

Which model each number describes (`SOURCES`): val/test accuracy and F1 are each run's BEST
checkpoint (by val/acc; summary.json `best`, also its top-level `val_acc`, ...); roles, bifurcation
steps and every head metric are the LAST measurement (summary.json `last`, head_metrics.parquet).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pandas as pd
from omegaconf import MISSING

from headlab.analysis.roles import ROLES
from headlab.store import SweepDir, atomic_write_csv, atomic_write_with
from headlab.sweep import heads as head_stats
from headlab.sweep.convergence import write_convergence
from headlab.sweep.division import write_division
from headlab.sweep.domains import write_domain_accuracy
from headlab.sweep.importance import final_importance, write_sweep_importance
from headlab.sweep.induction import write_induction_onsets
from headlab.sweep.induction_scaling import write_induction_scaling
from headlab.sweep.interventions import write_intervention_effects
from headlab.sweep.pruning import write_sweep_prune
from headlab.sweep.redundancy import write_sweep_redundancy
from headlab.sweep.runs import Run, discover_runs
from headlab.sweep.seed_pairs import SEED_PAIRS_CSV, seed_pair_table
from headlab.stats import mean_ci
from headlab.sweep.stats import TextColumn, config_column, format_interval, steps_to_converge, text_table

SOURCES = "accuracy and F1: each run's best checkpoint (by val/acc); roles and head metrics: its last measurement"
RESULT_METRICS = ("val_acc", "val_f1", "test_acc", "test_f1")
# Per-run numbers summarised over seeds with a mean and a 95% t-interval.
SEED_STATISTICS = (*RESULT_METRICS, "steps_to_converge", "rho_grad_specificity", "rho_dist_specificity",
                   "rho_grad_ablation", "rho_dist_ablation")
# The range each seed statistic can take: its interval is clipped to it (see `mean_ci`).
_BOUNDS = {**{m: (0.0, 1.0) for m in RESULT_METRICS}, "steps_to_converge": (0.0, math.inf),
           "rho_grad_specificity": (-1.0, 1.0), "rho_dist_specificity": (-1.0, 1.0),
           "rho_grad_ablation": (-1.0, 1.0), "rho_dist_ablation": (-1.0, 1.0)}
# a distilled student's teacher scored on the student's test batches (headlab.distill.module)
TEACHER_METRICS = ("test_teacher_acc", "test_teacher_f1")
_RUN_FACTS = ("best_step", "global_step", "wall_s", "measure_s", "n_params", "head_dim")


@dataclass
class AggregateCommand:
    """`headlab-aggregate sweep_dir=SWEEP [out=DIR] [figures=false]` (types are checked by OmegaConf: no
    ranges here)."""

    sweep_dir: str = MISSING  # a Hydra multirun folder (holds multirun.yaml and <job_num>/ dirs)
    out: Optional[str] = None  # output folder (null: SWEEP_DIR/aggregate)
    figures: bool = True  # false: write the tables only


@dataclass
class AggregateResult:
    """What `aggregate_sweep` read and wrote. `runs` holds every job, usable or not."""

    sweep: SweepDir
    out_dir: Path
    runs: list[Run]
    written: list[Path] = field(default_factory=list)

    @property
    def usable(self) -> list[Run]:
        return [r for r in self.runs if r.usable]

    @property
    def skipped(self) -> list[Run]:
        return [r for r in self.runs if not r.usable]


def aggregate_sweep(sweep: SweepDir, out_dir: str | os.PathLike | None = None, figures: bool = True) -> AggregateResult:
    """Read every job of the sweep and write the tables (and figures) listed in the module docstring
    (into `out_dir`, default the sweep's `aggregate/`).

    Raises DataError only when the folder is not a multirun folder; bad runs are skipped and listed.
    """
    runs = discover_runs(sweep)
    result = AggregateResult(sweep, Path(out_dir) if out_dir is not None else sweep.aggregate_dir, runs)
    tags = run_tags(runs)
    usable = result.usable
    heads = _concat([head_stats.head_summary(r, final_importance(r.files)).assign(job=r.job) for r in usable])
    per_run = run_table(runs, tags, heads)
    result.written.append(atomic_write_csv(result.out_dir / "sweep_runs.csv", per_run))
    if not usable:
        return result
    heads = _with_run_accuracy(heads, per_run)
    pairs = _concat([head_stats.layer_pair_means(r.head_pairs).assign(job=r.job) for r in usable])
    matches = _concat([head_stats.seed_matches(group).assign(config=config) for config, group in _by_config(usable).items()])
    summary = config_summary(per_run, heads, pairs, matches, tags)
    tidy = _tagged(_concat([_metric_rows(r) for r in usable]), tags)
    heads, pairs, out = _tagged(heads, tags), _tagged(pairs, tags), result.out_dir
    result.written += [
        _write_parquet(out / "sweep.parquet", tidy),
        atomic_write_csv(out / "sweep_heads.csv", heads),
        _write_parquet(out / "sweep_layer_pairs.parquet", pairs),
        atomic_write_csv(out / "sweep_matches.csv", matches),
        atomic_write_csv(out / SEED_PAIRS_CSV, seed_pair_table(matches, per_run, tags)),
        atomic_write_csv(out / "sweep_summary.csv", summary),
    ]
    result.written += write_sweep_importance(out, _by_config(usable))
    result.written += write_division(out, _by_config(usable), matches, tags[["job", "config_label", *swept_factors(tags)]])
    factor_tags = tags[["job", "config_label", *swept_factors(tags)]]
    result.written += write_intervention_effects(out, _by_config(usable), factor_tags)
    result.written += write_convergence(out, _by_config(usable), factor_tags)
    result.written += write_domain_accuracy(out, _by_config(usable), factor_tags)
    result.written += write_sweep_redundancy(out, _by_config(usable), factor_tags)
    result.written += write_sweep_prune(out, _by_config(usable), factor_tags, figures)
    result.written += write_induction_onsets(out, _by_config(usable), tags)
    result.written += write_induction_scaling(out, _by_config(usable), figures)
    if figures:
        from headlab.plots.sweep import write_sweep_figures  # plotting only when asked

        result.written += write_sweep_figures(out / "figures", tidy, heads, pairs, summary, swept_factors(tags))
    return result


def format_results(summary: pd.DataFrame) -> str:
    """`sweep_summary.csv` as terminal lines: each config's best-checkpoint val accuracy and test macro-F1."""
    if summary.empty:
        return "results: no config"
    return text_table("results (best checkpoint by val/acc; mean [95% CI] over seeds)", summary, [
        config_column(summary), TextColumn("seeds", lambda r: str(int(r["n_seeds"])), 5),
        TextColumn("val acc", lambda r: format_interval(r, "val_acc"), 22),
        TextColumn("test F1", lambda r: format_interval(r, "test_f1"), 22)])


# ---------------------------------------------------------------- tags
def _with_run_accuracy(heads: pd.DataFrame, per_run: pd.DataFrame) -> pd.DataFrame:
    """Each head row gets its run's `test_acc`, so a per-head statistic can be read beside (or
    guarded by) how well its run learned without joining two tables."""
    if heads.empty or "test_acc" not in per_run.columns:
        return heads
    return heads.merge(per_run[["job", "test_acc"]], on="job", how="left")


def run_tags(runs: list[Run]) -> pd.DataFrame:
    """One row per job: job, run_id, config, config_label, seed, status, and the swept values.

    Swept values come from summary.json `swept` (typed), then from the overrides for keys it
    lacks (strings). `config_label` names only the overrides that differ between configs.
    """
    rows = []
    for r in runs:
        row: dict[str, Any] = {"job": r.job, "run_id": str(r.summary.get("run_id", r.job)), "config": r.config,
                               "seed": r.seed, "status": r.status}
        row.update({k: v for k, v in r.summary.get("swept", {}).items() if k != "seed"})
        row.update({k: v for k, v in r.override_values().items() if k != "seed" and k not in row})
        rows.append(row)
    tags = pd.DataFrame(rows)
    tags["config_label"] = _config_labels(runs)
    return tags


# Overrides that say how a job ran, not what it trained: left out of the label of a one-config sweep.
_HOW_IT_RAN = frozenset({"figures", "resume", "sweep", "sweep_name", "threads"})


def _config_labels(runs: list[Run]) -> list[str]:
    """The overrides that differ between configs; in a sweep of one config (every job but the seed
    alike) its own overrides less `_HOW_IT_RAN`, so a legend or tick names what was trained."""
    values = pd.DataFrame([{k: v for k, v in r.override_values().items() if k != "seed"} for r in runs])
    varying = [c for c in values.columns if values[c].astype(str).nunique() > 1]
    if not varying:
        return [",".join(f"{k}={v}" for k, v in r.override_values().items() if k != "seed" and k not in _HOW_IT_RAN)
                or r.config for r in runs]
    return [",".join(f"{k}={row[k]}" for k in varying if isinstance(row[k], str)) or r.config
            for r, (_, row) in zip(runs, values.iterrows())]


def swept_factors(tags: pd.DataFrame) -> list[str]:
    """Swept keys (not the seed) that take more than one value over the usable runs."""
    used = tags[tags["status"] == "completed"]
    skip = {"job", "run_id", "config", "config_label", "seed", "status"}
    return [c for c in tags.columns if c not in skip and used[c].astype(str).nunique() > 1]


def _tagged(df: pd.DataFrame, tags: pd.DataFrame) -> pd.DataFrame:
    if df.empty:
        return df
    tag_columns = [c for c in tags.columns if c not in df.columns or c == "job"]
    return tags[tag_columns].merge(df, on="job", how="right")


def _metric_rows(run: Run) -> pd.DataFrame:
    if run.head_metrics is None:
        return pd.DataFrame()
    return run.head_metrics.drop(columns=["run_id"], errors="ignore").assign(job=run.job)


# ---------------------------------------------------------------- per run / per config
def run_table(runs: list[Run], tags: pd.DataFrame, heads: pd.DataFrame) -> pd.DataFrame:
    """`sweep_runs.csv`: tags, usable / reason / notes, final metrics and per-run head statistics."""
    rows = []
    for r in runs:
        row: dict[str, Any] = {"job": r.job, "usable": r.usable, "reason": r.reason, "notes": "; ".join(r.notes)}
        row.update({k: _number(r.summary.get(k)) for k in (*RESULT_METRICS, *_RUN_FACTS)})
        row.update({k: _number(r.summary[k]) for k in TEACHER_METRICS if k in r.summary})  # distilled students only
        if r.usable:
            row["steps_to_converge"] = steps_to_converge(r.val_curve)
            run_heads = heads[heads["job"] == r.job] if not heads.empty else pd.DataFrame()
            row.update(head_stats.winner_correlations(run_heads))
            row.update(head_stats.cosine_geometry(r))
        rows.append(row)
    return tags.merge(pd.DataFrame(rows), on="job")


def config_summary(per_run: pd.DataFrame, heads: pd.DataFrame, pairs: pd.DataFrame, matches: pd.DataFrame,
                   tags: pd.DataFrame) -> pd.DataFrame:
    """`sweep_summary.csv`: one row per config over its usable seeds (see `_config_row`)."""
    rows = []
    for config, jobs in per_run.groupby("config", sort=True):
        used = jobs[jobs["usable"]]
        if used.empty:
            continue
        row = {"config": config, "config_label": used["config_label"].iloc[0], "n_jobs": len(jobs),
               "n_seeds": len(used), "seeds": " ".join(str(int(s)) for s in sorted(used["seed"].dropna())),
               "n_skipped": int((~jobs["usable"]).sum())}
        row.update({c: used[c].iloc[0] for c in swept_factors(tags) if c in used})
        row.update(_seed_statistics(used))
        row.update(_head_statistics(heads[heads["job"].isin(used["job"])] if not heads.empty else heads))
        row.update(_pair_statistics(pairs[pairs["job"].isin(used["job"])] if not pairs.empty else pairs))
        row.update(_match_statistics(matches[matches["config"] == config] if not matches.empty else matches))
        row.update({f"{c}_mean": used[c].mean() for c in ("q_cos_ratio_init", "qk_cos_ratio_init", "q_cos_ratio_final",
                                                          "qk_cos_ratio_final") if c in used})
        rows.append(row)
    return pd.DataFrame(rows)


def _seed_statistics(used: pd.DataFrame) -> dict[str, float]:
    out: dict[str, float] = {}
    for column in SEED_STATISTICS:
        ci = mean_ci(used[column] if column in used else [], bounds=_BOUNDS[column])
        out.update(ci.columns(column))
    return out


def _head_statistics(heads: pd.DataFrame) -> dict[str, float]:
    """Bifurcation steps over all heads of all seeds (median of the settled ones, fraction
    never settled), final role fractions and mean distance from init."""
    out: dict[str, float] = {}
    for kind in ("role", "metric"):
        steps = heads[f"{kind}_bifurcation_step"] if not heads.empty else pd.Series(dtype=float)
        out[f"{kind}_bifurcation_median"] = float(steps.median()) if steps.notna().any() else math.nan
        out[f"{kind}_bifurcation_mean"] = float(steps.mean()) if steps.notna().any() else math.nan
        out[f"{kind}_unsettled_frac"] = float(steps.isna().mean()) if len(steps) else math.nan
    roles = heads["final_role"] if not heads.empty else pd.Series(dtype=object)
    out.update({f"role_frac_{name}": float((roles == name).mean()) if len(roles) else math.nan for name in ROLES})
    out["dist_from_init_mean"] = float(heads["dist_from_init"].mean()) if not heads.empty else math.nan
    return out


def _pair_statistics(pairs: pd.DataFrame) -> dict[str, float]:
    """Mean over seeds and layers of the layer-mean JS and 1 - corr at each run's last step."""
    out = {"final_js_mean": math.nan, "final_1-corr_mean": math.nan}
    if pairs.empty:
        return out
    last = pairs[pairs["step"] == pairs.groupby("job")["step"].transform("max")]
    for metric in ("js", "1-corr"):
        values = last.loc[last["metric"] == metric, "value"]
        out[f"final_{metric}_mean"] = float(values.mean()) if len(values) else math.nan
    return out


def _match_statistics(matches: pd.DataFrame) -> dict[str, float]:
    """Cross-seed reproducibility: means over seed pairs and layers of the matching results."""
    columns = ("same_role", "same_role_baseline", "matched_distance", "random_distance")
    ok = matches[matches["error"] == ""] if not matches.empty else matches
    out = {f"match_{c}": float(ok[c].mean()) if len(ok) else math.nan for c in columns}
    out["n_seed_pairs"] = int(ok[["job_a", "job_b"]].drop_duplicates().shape[0]) if len(ok) else 0
    return out


def _by_config(runs: list[Run]) -> dict[str, list[Run]]:
    groups: dict[str, list[Run]] = {}
    for r in runs:
        groups.setdefault(r.config, []).append(r)
    return groups


# ---------------------------------------------------------------- writing
def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _number(value: Any) -> float:
    try:
        return float(value) if value is not None else math.nan
    except (TypeError, ValueError):
        return math.nan


def _write_parquet(path: Path, df: pd.DataFrame) -> Path:
    safe = _arrow_safe(df)
    atomic_write_with(path, lambda tmp: safe.to_parquet(tmp, index=False))
    return path


def _arrow_safe(df: pd.DataFrame) -> pd.DataFrame:
    """Object columns holding several Python types (e.g. a swept value that is 16 in one run and
    "auto" in another) become strings, so parquet gets one type per column; None stays null."""
    out = df.copy()
    for column in out.select_dtypes(include="object").columns:
        kinds = {type(v) for v in out[column] if v is not None and not (isinstance(v, float) and np.isnan(v))}
        if len(kinds) > 1:
            out[column] = out[column].map(lambda v: None if v is None else str(v))
    return out
