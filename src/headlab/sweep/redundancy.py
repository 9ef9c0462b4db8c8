"""Sweep tables of near-duplicate heads (the founding article, section 5.4: "with little data, many
heads converge to near-identical maps"), written by headlab-aggregate.

Per usable run, at its LAST head measurement, each layer's heads are clustered by the `js` rows of
`head_pairs.parquet` with the documented bar of `headlab.analysis.redundancy` (`DEFAULT_MASS`: the
maps agree up to 10% of the attention mass); `duplicate_fraction` = redundant heads / all heads.
A run without a pair table falls back to summary.json `redundant_heads` (with `final_roles` for the
head count) when it has one. Written only when some run yields a number:

| file | one row per |
|---|---|
| `sweep_redundancy_runs.csv` | run: step, n_heads, redundant_heads, duplicate_fraction, min_pair_js (the closest two heads of a layer), source (`head_pairs` or `summary`), calibrated_js_bar, calibrated_redundant_heads, calibrated_duplicate_fraction |
| `sweep_redundancy.csv` | config, with its swept factors: mean and 95% t-interval over seeds of `duplicate_fraction`, mean `redundant_heads` and `min_pair_js` |

With the data_size sweep the second table reads `data.train_fraction -> duplicate_fraction_mean`.

The fixed bar may flag no pair at all in small models (the closest pairs of the 2026-11-30 quick
sweeps sat at JS 0.32-0.40 against a bar of 0.069), and then the table cannot tell two configs
apart. So each run also gets a bar CALIBRATED on the sweep's own pair distribution:
`calibrated_js_bar`, the `CALIBRATION_QUANTILE` quantile of every off-diagonal head pair's JS at the
last measurement, pooled over all runs of the sweep (every config and seed, so the bar favours no
config), and `calibrated_duplicate_fraction`, the redundant-head share with that bar. Under "no
difference" two configs get the same share on average; a config whose heads converge to twins gets
more.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from headlab.analysis.redundancy import DEFAULT_MASS, duplicate_clusters, js_threshold, pair_table_redundancy, redundant_heads
from headlab.store import atomic_write_csv
from headlab.sweep.runs import Run
from headlab.stats import mean_ci
from headlab.sweep.stats import TextColumn, config_column, format_interval, text_table

# The calibrated bar: this share of the sweep's head pairs is at least as close as the bar.
CALIBRATION_QUANTILE = 0.1
RUNS_FILE = "sweep_redundancy_runs.csv"
CONFIG_FILE = "sweep_redundancy.csv"


def run_redundancy(run: Run, mass: float = DEFAULT_MASS) -> dict[str, Any] | None:
    """One run's redundancy at its last measurement (see the module docstring); None when it has neither source."""
    if run.head_pairs is not None and not run.head_pairs.empty:
        found = pair_table_redundancy(run.head_pairs, mass)
        if found is not None:
            return {"step": found["step"], "n_heads": found["n_heads"], "redundant_heads": found["redundant_heads"],
                    "duplicate_fraction": found["duplicate_fraction"], "min_pair_js": _min_pair_js(found["js"]),
                    "source": "head_pairs", "js": found["js"]}
    redundant, roles = run.summary.get("redundant_heads"), run.summary.get("final_roles")
    if isinstance(redundant, int) and not isinstance(redundant, bool) and isinstance(roles, list) and roles:
        n_heads = sum(len(layer) for layer in roles)
        return {"step": run.summary.get("global_step"), "n_heads": n_heads, "redundant_heads": redundant,
                "duplicate_fraction": redundant / n_heads, "min_pair_js": math.nan, "source": "summary"}
    return None


def calibrated_bar(matrices_per_run: list[list[list[list[float]]]], quantile: float = CALIBRATION_QUANTILE) -> float:
    """The `quantile` of every off-diagonal pair JS (a < b) of every layer of every run; NaN without pairs.

    >>> calibrated_bar([[[[0, 0.1, 0.4], [0.1, 0, 0.2], [0.4, 0.2, 0]]]], quantile=0.5)
    0.2
    """
    values = [np.asarray(m)[np.triu_indices(len(m), k=1)] for run in matrices_per_run for m in run if len(m) > 1]
    return float(np.quantile(np.concatenate(values), quantile)) if values else math.nan


def _calibrated(matrices: list[list[list[float]]], bar: float) -> tuple[float, float]:
    """(redundant heads, their share) of one run with the calibrated bar."""
    if not math.isfinite(bar):
        return math.nan, math.nan
    heads = sum(len(m) for m in matrices)
    redundant = sum(redundant_heads(duplicate_clusters(np.asarray(m), bar)) for m in matrices)
    return float(redundant), redundant / heads if heads else math.nan


def _min_pair_js(matrices: list[list[list[float]]]) -> float:
    """The closest two heads of one layer (JS, nats): how far a run without duplicates is from the bar."""
    off = [np.asarray(m)[~np.eye(len(m), dtype=bool)] for m in matrices if len(m) > 1]
    return float(min(v.min() for v in off)) if off else math.nan


def redundancy_tables(runs_by_config: dict[str, list[Run]], tags: pd.DataFrame,
                      mass: float = DEFAULT_MASS) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per-run rows, per-config rows); both empty when no run yields a number.

    `tags` has one row per job: `job`, `config_label` and the swept factors (as aggregate passes it).
    """
    per_run = []
    for config, runs in runs_by_config.items():
        for run in runs:
            found = run_redundancy(run, mass)
            if found is not None:
                per_run.append({"job": run.job, "config": config, "seed": run.seed, **found})
    if not per_run:
        return pd.DataFrame(), pd.DataFrame()
    bar = calibrated_bar([row["js"] for row in per_run if "js" in row])
    for row in per_run:
        matrices = row.pop("js", None)
        row["calibrated_js_bar"] = bar
        row["calibrated_redundant_heads"], row["calibrated_duplicate_fraction"] = (
            _calibrated(matrices, bar) if matrices is not None else (math.nan, math.nan))
    runs_table = tags.merge(pd.DataFrame(per_run), on="job", how="right")
    factors = [c for c in tags.columns if c not in ("job", "config_label")]
    rows = []
    for config, group in runs_table.groupby("config", sort=True):
        ci = mean_ci(group["duplicate_fraction"], bounds=(0.0, 1.0))
        first = group.iloc[0]
        rows.append({"config": config, "config_label": first.get("config_label", config),
                     **{f: first[f] for f in factors},
                     "n_seeds": ci.n, "seeds": " ".join(str(int(s)) for s in sorted(group["seed"].dropna())),
                     "n_heads": int(first["n_heads"]), "mass": mass, "js_threshold": js_threshold(mass),
                     "redundant_heads_mean": float(group["redundant_heads"].mean()),
                     **ci.columns("duplicate_fraction"), "min_pair_js_mean": float(group["min_pair_js"].mean()),
                     "calibrated_js_bar": bar,
                     **mean_ci(group["calibrated_duplicate_fraction"], bounds=(0.0, 1.0)).columns("calibrated_duplicate_fraction"),
                     "source": ",".join(sorted(group["source"].unique()))})
    return runs_table.sort_values("job", key=lambda j: j.astype(int), kind="stable"), pd.DataFrame(rows)


def write_sweep_redundancy(out_dir: Path, runs_by_config: dict[str, list[Run]], tags: pd.DataFrame) -> list[Path]:
    """Write `sweep_redundancy_runs.csv` and `sweep_redundancy.csv` into `out_dir` (atomically); none
    when no run of the sweep has a pair table or a summary `redundant_heads`."""
    per_run, per_config = redundancy_tables(runs_by_config, tags)
    if per_run.empty:
        return []
    return [atomic_write_csv(Path(out_dir) / name, frame) for name, frame in ((RUNS_FILE, per_run), (CONFIG_FILE, per_config))]


def format_redundancy(table: pd.DataFrame) -> str:
    """`sweep_redundancy.csv` as terminal lines: the duplicate-head fraction per config and how close the
    closest two heads of a layer came to the bar."""
    if table.empty:
        return "duplicate heads: no config"
    bar = float(table["js_threshold"].iloc[0])
    return text_table(f"near-duplicate heads (JS <= {bar:.3f} nats at the last measurement; mean [95% CI] over seeds)", table, [
        config_column(table), TextColumn("seeds", lambda r: str(int(r["n_seeds"])), 5),
        TextColumn("duplicate fraction", lambda r: format_interval(r, "duplicate_fraction"), 22),
        TextColumn("closest pair JS", lambda r: f"{r['min_pair_js_mean']:.3f}", 16)])
