"""Head importance across the seeds of a sweep config: averaged after matching, and how stable its ranking is.

Head indices mean nothing across seeds (head 2 of seed 0 need not do what head 2 of seed 1
does), so heads are first matched layer by layer with the Hungarian matching of attention
descriptors that `sweep_matches.csv` reports (`headlab.sweep.matching.match_layer`, scaled over
every seed of the config with head tables, with importance or not), at each run's last
measurement. Then, per config and layer:

- `sweep_importance.csv`: each head of the config's first seed (the reference) with the mean and
  std over seeds of `ablation_dloss` of the heads matched to it;
- `sweep_importance_tau.csv`: per seed pair, Kendall's tau between the ablation importance of
  matched heads, beside the mean tau under random matchings (the shuffled baseline: what tau
  is when the matching carries no information).

Input: `head_importance.parquet` in each run dir (from `headlab-importance RUN_DIR`), its newest
step. Runs without it are left out; nothing is written when no run has one.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
from scipy.stats import kendalltau

from headlab.errors import HeadlabError
from headlab.store import RunDir
from headlab.store import atomic_write_csv
from headlab.sweep.matching import config_finals, match_layer
from headlab.sweep.runs import Run

METRIC = "ablation_dloss"
N_SHUFFLES = 200


def final_importance(run: RunDir) -> pd.Series | None:
    """`ablation_dloss` per (layer, head) at the newest checkpoint measured; None without the file."""
    if not run.head_importance_path.is_file():
        return None
    table = run.head_importance()
    rows = table[(table["metric"] == METRIC) & (table["step"] == table["step"].max())]
    return rows.set_index(["layer", "head"])["value"] if not rows.empty else None


def config_importance(runs: Sequence[Run], seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(`sweep_importance` rows, `sweep_importance_tau` rows) of one config's runs (see module docstring)."""
    finals = config_finals(runs)  # every seed with head tables, importance or not: the matching's yardstick
    importance = {r.job: imp for r in runs if r.job in finals and (imp := final_importance(r.files)) is not None}
    if len(importance) < 2:
        return pd.DataFrame(), pd.DataFrame()
    reference = next(iter(importance))
    rng = np.random.default_rng(seed)
    averaged, taus = [], []
    for layer in sorted(importance[reference].index.get_level_values("layer").unique()):
        mapped = {reference: importance[reference].xs(layer).to_numpy()}
        perms = {}
        for job_a, job_b in itertools.combinations(importance, 2):
            try:
                perm = match_layer(finals, job_a, job_b, layer).permutation.numpy()
            except HeadlabError:  # this pair cannot be matched in this layer: no tau, no average
                continue
            perms[(job_a, job_b)] = perm
            a, b = importance[job_a].xs(layer).to_numpy(), importance[job_b].xs(layer).to_numpy()[perm]
            shuffled = [_tau(a, importance[job_b].xs(layer).to_numpy()[rng.permutation(len(a))]) for _ in range(N_SHUFFLES)]
            taus.append({"layer": int(layer), "job_a": job_a, "job_b": job_b, "n_heads": len(a), "kendall_tau": _tau(a, b),
                         **_shuffled_stats(shuffled)})
        for job in importance:
            if job != reference and (reference, job) in perms:
                mapped[job] = importance[job].xs(layer).to_numpy()[perms[(reference, job)]]
        stack = np.stack(list(mapped.values()))  # [seed, head of the reference]
        for head in range(stack.shape[1]):
            averaged.append({"layer": int(layer), "head": head, "reference_job": reference, "n_seeds": stack.shape[0],
                             f"{METRIC}_mean": float(stack[:, head].mean()), f"{METRIC}_std": float(stack[:, head].std(ddof=0))})
    return pd.DataFrame(averaged), pd.DataFrame(taus)


def seed_averaged_importance(runs: Sequence[Run], job: str) -> pd.DataFrame:
    """`ablation_dloss` mean over the config's seeds for each head of run `job`, the other seeds'
    heads matched to `job`'s (columns `layer, head, n_seeds, ablation_dloss_mean, ablation_dloss_std`).

    Empty when `job` has no importance or head metrics, or when some layer has no other seed matched
    to it: a ranking by it would be that seed's own importance, not an average."""
    ordered = [r for r in runs if r.job == job] + [r for r in runs if r.job != job]
    averaged, _ = config_importance(ordered)
    if averaged.empty or (averaged["reference_job"] != job).any() or (averaged["n_seeds"] < 2).any():
        return pd.DataFrame()
    return averaged.drop(columns="reference_job")


def _tau(a: np.ndarray, b: np.ndarray) -> float:
    if len(a) < 2:
        return math.nan
    tau = kendalltau(a, b).statistic
    return float(tau) if tau is not None else math.nan


def sweep_importance(groups: dict[str, list[Run]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`config_importance` of every config, with a `config` column; empty frames when no run has importance."""
    averaged, taus = [], []
    for config, runs in groups.items():
        avg, tau = config_importance(runs)
        if not avg.empty:
            averaged.append(avg.assign(config=config))
        if not tau.empty:
            taus.append(tau.assign(config=config))
    return (pd.concat(averaged, ignore_index=True) if averaged else pd.DataFrame(),
            pd.concat(taus, ignore_index=True) if taus else pd.DataFrame())


def write_sweep_importance(out_dir: Path, groups: dict[str, list[Run]]) -> list[Path]:
    """Write `sweep_importance.csv` and `sweep_importance_tau.csv` (atomically) when any config has
    two or more runs with `head_importance.parquet`; returns the paths written."""
    averaged, taus = sweep_importance(groups)
    return [atomic_write_csv(Path(out_dir) / name, frame)
            for name, frame in (("sweep_importance.csv", averaged), ("sweep_importance_tau.csv", taus)) if not frame.empty]


def _shuffled_stats(taus: list[float]) -> dict[str, float]:
    """Mean and std of the shuffled taus that are defined; NaN both when none is (a one-head layer has no
    tau): numpy would warn "Mean of empty slice" on the console of every such pair."""
    finite = np.asarray(taus, dtype=float)
    finite = finite[np.isfinite(finite)]
    if finite.size == 0:
        return {"tau_shuffled_mean": float("nan"), "tau_shuffled_std": float("nan")}
    return {"tau_shuffled_mean": float(finite.mean()), "tau_shuffled_std": float(finite.std())}
