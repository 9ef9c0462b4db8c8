"""A "division of labour" score per sweep config: how differently, how variously and how
reproducibly the heads of a layer end up working. Written as `division_of_labour.csv`.

Three numbers, each at a run's LAST measurement, each summarised over the config's seeds with
a mean and a 95 % t-interval (`headlab.sweep.stats.mean_ci`):

- `js_within_layer`: mean Jensen-Shannon divergence between the attention of every pair of
  heads of one layer (`head_pairs` metric `js`, nats, at most ln 2 = 0.693), averaged over
  layers. 0: every head of the layer attends alike; high: heads look at different tokens.
- `role_entropy_bits`: Shannon entropy, in BITS, of the roles (`role` rows of `head_metrics`)
  across the heads of one layer, averaged over layers. 0: one role for every head; at most
  log2(min(heads per layer, number of roles)) (`role_entropy_max_bits`): every head its own role.
  Heads without a role (NaN) are left out. The same for each conditional role the runs
  measured (`role@y`: the role read from the `y` queries only): `role_entropy_bits@y`.
- `same_role`: cross-seed role reproducibility: the share of heads whose role is the same in two
  seeds after the Hungarian matching of `headlab.sweep.heads.seed_matches` (the rows of
  `sweep_matches.csv`), averaged over layers, one value per seed PAIR; the interval is over
  seed pairs, which share seeds (3 seeds -> 3 pairs), so it is narrower than an interval over
  independent samples would be. `same_role_baseline`: the same share under random matchings.

A high JS with a high role entropy and a high `same_role` is a division of labour that is
distinct, varied and repeatable; a low `same_role` (near its baseline) with a high JS means
the heads differ but differently in every seed: a chaotic division.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from headlab.analysis.roles import ROLES
from headlab.store import atomic_write_csv
from headlab.sweep.heads import layer_pair_means
from headlab.sweep.matching import ROLE_METRIC
from headlab.sweep.runs import Run
from headlab.stats import mean_ci
from headlab.sweep.seed_pairs import pair_means
from headlab.sweep.stats import TextColumn, config_column, format_interval, job_tags, text_table

DIVISION_CSV = "division_of_labour.csv"
JS_MAX = math.log(2.0)
SCORES = ("js_within_layer", "role_entropy_bits", "same_role")


def role_entropy_bits(role_ids: Sequence[float]) -> float:
    """Shannon entropy (bits) of the role counts among `role_ids`; NaN ids are left out, NaN if none remain.

    >>> role_entropy_bits([0, 1, 2, 3]), role_entropy_bits([5, 5, 5]), role_entropy_bits([0, 0, 1, 1])
    (2.0, 0.0, 1.0)
    """
    ids = np.asarray(role_ids, dtype=np.float64)
    ids = ids[np.isfinite(ids)]
    if ids.size == 0:
        return math.nan
    _, counts = np.unique(ids, return_counts=True)
    p = counts / counts.sum()
    return float(-(p * np.log2(p)).sum()) + 0.0  # + 0.0: -0.0 -> 0.0


def layer_role_entropy(head_metrics: pd.DataFrame | None, metric: str = ROLE_METRIC) -> float:
    """Mean over layers of the role entropy across the layer's heads, at the last measured step
    (of `metric`: `role`, or a conditional role such as `role@y`)."""
    if head_metrics is None or head_metrics.empty:
        return math.nan
    rows = head_metrics[head_metrics["metric"] == metric]
    if rows.empty:
        return math.nan
    last = rows[rows["step"] == rows["step"].max()]
    per_layer = [role_entropy_bits(group["value"]) for _, group in last.groupby("layer")]
    per_layer = [h for h in per_layer if np.isfinite(h)]
    return float(np.mean(per_layer)) if per_layer else math.nan


def layer_mean_js(head_pairs: pd.DataFrame | None) -> float:
    """Mean over layers of the mean pairwise JS (nats) within the layer, at the last measured step.
    NaN when there are no pairs (single-head layers, or no `head_pairs`)."""
    means = layer_pair_means(head_pairs)
    js = means[means["metric"] == "js"]
    if js.empty:
        return math.nan
    return float(js.loc[js["step"] == js["step"].max(), "value"].mean())


def heads_per_layer(head_metrics: pd.DataFrame | None) -> float:
    """Largest number of heads in one layer (NaN without head metrics)."""
    if head_metrics is None or head_metrics.empty:
        return math.nan
    return float(head_metrics.groupby("layer")["head"].nunique().max())


def conditional_roles(runs: Sequence[Run]) -> list[str]:
    """The conditional role metrics (`role@<token>`) that any of `runs` measured, sorted."""
    names = set()
    for r in runs:
        if r.head_metrics is not None and not r.head_metrics.empty:
            names.update(m for m in r.head_metrics["metric"].unique() if str(m).startswith(f"{ROLE_METRIC}@"))
    return sorted(names)


def run_division(run: Run, conditional: Sequence[str] = ()) -> dict[str, float]:
    """The per-run scores: `js_within_layer`, `role_entropy_bits`, `heads_per_layer`, and
    `role_entropy_bits@<token>` for each conditional role metric in `conditional`."""
    out = {"js_within_layer": layer_mean_js(run.head_pairs), "role_entropy_bits": layer_role_entropy(run.head_metrics),
           "heads_per_layer": heads_per_layer(run.head_metrics)}
    out.update({_entropy_column(m): layer_role_entropy(run.head_metrics, m) for m in conditional})
    return out


def _entropy_column(role_metric: str) -> str:
    return "role_entropy_bits" + role_metric[len(ROLE_METRIC):]


def seed_pair_same_role(matches: pd.DataFrame) -> pd.DataFrame:
    """One row per seed pair (job_a, job_b): `same_role` and `same_role_baseline` averaged over
    layers, from the rows of `seed_matches` that matched (empty `error`)."""
    return pair_means(matches)[["job_a", "job_b", "same_role", "same_role_baseline"]]


def division_table(runs_by_config: dict[str, list[Run]], matches: pd.DataFrame, tags: pd.DataFrame) -> pd.DataFrame:
    """One row per config: the three scores' means and 95 % intervals (see the module docstring).

    `matches`: `seed_matches` rows with a `config` column; `tags`: one row per job with `job`,
    `config_label` and the swept factors to show (copied from the config's first run).
    """
    rows = []
    conditional = conditional_roles([r for runs in runs_by_config.values() for r in runs])
    for config in sorted(runs_by_config):
        runs = runs_by_config[config]
        per_run = pd.DataFrame([run_division(r, conditional) for r in runs])
        # seeds with head tables: a usable run without them (accuracy only) adds no value here
        row = {"config": config, **job_tags(tags, runs[0].job), "n_seeds": int(per_run["heads_per_layer"].notna().sum())}
        n_heads = per_run["heads_per_layer"].max()
        row["heads_per_layer"] = n_heads
        row["role_entropy_max_bits"] = math.log2(min(n_heads, len(ROLES))) if np.isfinite(n_heads) else math.nan
        row.update(_ci("js_within_layer", per_run["js_within_layer"], (0.0, JS_MAX)))
        for column in ("role_entropy_bits", *map(_entropy_column, conditional)):
            row.update(_ci(column, per_run[column], (0.0, row["role_entropy_max_bits"])))
        config_matches = matches[matches["config"] == config] if len(matches) else matches
        pairs = seed_pair_same_role(config_matches)
        row.update(_ci("same_role", pairs["same_role"], (0.0, 1.0)))
        row["same_role_baseline_mean"] = float(pairs["same_role_baseline"].mean()) if len(pairs) else math.nan
        row["n_seed_pairs"] = len(pairs)
        rows.append(row)
    return pd.DataFrame(rows)


def _ci(name: str, values: pd.Series, bounds: tuple[float, float]) -> dict[str, float]:
    bounds = (bounds[0], bounds[1] if np.isfinite(bounds[1]) else math.inf)
    return mean_ci(values, bounds=bounds).columns(name)


def write_division(out_dir: Path, runs_by_config: dict[str, list[Run]], matches: pd.DataFrame,
                   tags: pd.DataFrame) -> list[Path]:
    """Write `division_of_labour.csv` into `out_dir` (atomically); the list of files written."""
    table = division_table(runs_by_config, matches, tags)
    return [atomic_write_csv(Path(out_dir) / DIVISION_CSV, table)]


def format_division(table: pd.DataFrame) -> str:
    """The table as a few aligned lines for the terminal: each score as `mean [low, high]`."""
    if table.empty:
        return "division of labour: no config"
    def same(r: pd.Series) -> str:
        chance = r["same_role_baseline_mean"]
        return f"{format_interval(r, 'same_role', 2)} ({chance:.2f})" if np.isfinite(chance) else "-"

    return text_table("division of labour (last measurement; mean [95% CI] over seeds; JS in nats, entropy in bits)", table, [
        config_column(table), TextColumn("seeds", lambda r: str(int(r["n_seeds"])), 5),
        TextColumn("JS within layer", lambda r: format_interval(r, "js_within_layer", 3), 22),
        TextColumn("role entropy (max)", lambda r: f"{format_interval(r, 'role_entropy_bits', 2)} ({r['role_entropy_max_bits']:.2f})", 26),
        TextColumn("same role (chance)", same, 28)])
