"""Cross-seed role agreement on DISJOINT seed pairs, chance-corrected: `sweep_seed_pairs.csv`.

`sweep_matches.csv` matches every pair of a config's seeds, so its rows share seeds and are not
independent units: ten seeds give 45 pairs but only ten independent runs. A verdict needs
independent units, so here a config's seeds, sorted, are paired off (s0, s1), (s2, s3), ...:
each seed is in at most one pair (an odd one out is left out), and the pairs are independent
replicates. One row per pair, its values averaged over the layers that matched:

- `same_role`: the share of heads (after the Hungarian matching of `headlab.sweep.heads.seed_matches`)
  whose role is the same in both seeds; `same_role_baseline`: its expectation under a random
  matching of the same two role sets, sum over roles of p_a(role) * p_b(role);
- `same_role_kappa`: Cohen's kappa of the matched roles, (same - chance) / (1 - chance): 1 is the
  same division in both seeds, 0 no more agreement than the role frequencies give by chance. A
  layer whose two role sets leave no room above chance (chance = 1: one role everywhere) has no
  kappa and is left out of the mean;
- `matched_distance_ratio`: the profile distance of the matched heads over the mean distance of
  a random pairing of the same heads (`matched_distance / random_distance` of `seed_matches`): 1
  is a division that does not repeat (matching does no better than chance), lower is one that
  does. Unlike kappa it needs no second role, so it reads a layer whose heads all share one role;
- `test_acc`: the mean test accuracy of the two runs, so an arm's agreement is read beside how
  well it learned.

The seed of a pair (`seed`) is its first seed, and `job` its first job: two configs run on the same
seeds pair up on `seed` (`paired_difference` in `headlab.reproduce.statistics`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

SEED_PAIRS_CSV = "sweep_seed_pairs.csv"
PAIR_COLUMNS = ["job", "job_b", "seed", "seed_b", "n_layers", "same_role", "same_role_baseline", "same_role_kappa",
                "matched_distance_ratio", "test_acc"]


def kappa(same: float, chance: float) -> float:
    """Cohen's kappa from the observed agreement and the chance agreement; NaN when chance is 1.

    >>> kappa(0.75, 0.5), kappa(0.5, 0.5), kappa(1.0, 1.0) != kappa(1.0, 1.0)
    (0.5, 0.0, True)
    """
    if not (math.isfinite(same) and math.isfinite(chance)) or chance >= 1.0:
        return math.nan
    return (same - chance) / (1.0 - chance)


def distance_ratio(matched: float, random: float) -> float:
    """Matched over random-pairing distance; NaN when the random pairing has no distance.

    >>> distance_ratio(0.5, 2.0), distance_ratio(1.0, 0.0) != distance_ratio(1.0, 0.0)
    (0.25, True)
    """
    if not (math.isfinite(matched) and math.isfinite(random)) or random <= 0.0:
        return math.nan
    return matched / random


def disjoint_pairs(seeds) -> list[tuple[int, int]]:
    """The config's seeds, sorted and paired off; an odd one out is left out.

    >>> disjoint_pairs([13, 10, 11, 12, 14])
    [(10, 11), (12, 13)]
    """
    ordered = sorted(int(s) for s in seeds)
    return [(ordered[i], ordered[i + 1]) for i in range(0, len(ordered) - 1, 2)]


def pair_means(matches: pd.DataFrame) -> pd.DataFrame:
    """One row per matched seed pair (job_a, job_b) of `seed_matches` rows: `n_layers` that matched
    (empty `error`) and, averaged over them, `same_role`, `same_role_baseline`, `same_role_kappa`
    and `matched_distance_ratio` (the last two over the layers that have one). Every pair of a
    config here; `seed_pair_table` keeps the disjoint ones."""
    columns = ["job_a", "job_b", "n_layers", "same_role", "same_role_baseline", "same_role_kappa", "matched_distance_ratio"]
    if matches is None or matches.empty:
        return pd.DataFrame(columns=columns)
    ok = matches[matches["error"] == ""].copy()
    nan = pd.Series(math.nan, index=ok.index)
    ok["same_role_kappa"] = [kappa(s, c) for s, c in zip(ok["same_role"], ok["same_role_baseline"])]
    ok["matched_distance_ratio"] = [distance_ratio(m, r) for m, r in
                                    zip(ok.get("matched_distance", nan), ok.get("random_distance", nan))]
    grouped = ok.groupby(["job_a", "job_b"], sort=True)
    means = grouped[["same_role", "same_role_baseline", "same_role_kappa", "matched_distance_ratio"]].mean()  # NaN-skipping
    return means.assign(n_layers=grouped.size()).reset_index()[columns]


def seed_pair_table(matches: pd.DataFrame, runs: pd.DataFrame, tags: pd.DataFrame) -> pd.DataFrame:
    """`sweep_seed_pairs.csv` from `seed_matches` rows (with `config`), `sweep_runs.csv` rows (job,
    config, seed, usable, test_acc) and the job tags (job, config_label, swept factors); the tags of
    a pair are its first job's."""
    if matches is None or matches.empty or runs.empty:
        return pd.DataFrame(columns=PAIR_COLUMNS)
    by_pair = {frozenset((r.job_a, r.job_b)): r for r in pair_means(matches).itertuples(index=False)}
    used = runs[runs["usable"].astype(str) == "True"]
    acc_of = dict(zip(used["job"], pd.to_numeric(used.get("test_acc", pd.Series(dtype=float)), errors="coerce")))
    rows = []
    for config, jobs in used.groupby("config"):
        job_of = dict(zip(jobs["seed"].astype(int), jobs["job"]))
        for seed_a, seed_b in disjoint_pairs(job_of):
            a, b = job_of[seed_a], job_of[seed_b]
            pair = by_pair.get(frozenset((a, b)))
            if pair is None:
                continue
            rows.append({"job": a, "job_b": b, "seed": seed_a, "seed_b": seed_b, "n_layers": int(pair.n_layers),
                         "same_role": float(pair.same_role), "same_role_baseline": float(pair.same_role_baseline),
                         "same_role_kappa": float(pair.same_role_kappa),
                         "matched_distance_ratio": float(pair.matched_distance_ratio),
                         "test_acc": float(np.nanmean([acc_of.get(a, math.nan), acc_of.get(b, math.nan)]))})
    if not rows:
        return pd.DataFrame(columns=PAIR_COLUMNS)
    pairs = pd.DataFrame(rows)[PAIR_COLUMNS]
    tags = tags.drop(columns=[c for c in (*PAIR_COLUMNS, "run_id", "status") if c != "job" and c in tags.columns])
    return tags.merge(pairs, on="job", how="right").assign(usable=True)
