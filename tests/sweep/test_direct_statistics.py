"""The per-head and per-pair columns the direct verdict statistics read (issue 25, item 4).

- `initial_role` / `acquired_role` (C9: a head that only kept its step-0 role did not specialise);
- `early_grad_norm` and `rho_early_grad_ablation` (C18: gradients of the first 100 steps, ranked
  within layers, as a predictor of final importance);
- `sweep_seed_pairs.csv` (C6, C14: chance-corrected role agreement on independent seed pairs).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.inter_rater import cohens_kappa

from headlab.analysis.roles import ROLES
from headlab.store import HEAD_METRICS, append_part, head_metric_rows
from headlab.sweep.heads import KEPT_ROLE, early_gradient_correlation, head_summary
from headlab.sweep.runs import Run
from headlab.sweep.seed_pairs import SEED_PAIRS_CSV, disjoint_pairs, distance_ratio, kappa, seed_pair_table

LOCAL, PREV, MIXED = ROLES.index("local"), ROLES.index("previous_token"), ROLES.index("mixed")


def _run(tmp_path: Path, steps_roles_grads) -> Run:
    """A one-layer, two-head run from (step, [role id per head], [cum grad per head]) rows."""
    for step, roles, grads in steps_roles_grads:
        layer = {"role": np.array(roles, float), "cum_grad_norm": np.array(grads, float),
                 "entropy_norm": np.array([0.5, 0.5]), "dist_from_init": np.array([0.1, 0.2])}
        append_part(tmp_path / HEAD_METRICS, step, head_metric_rows("r", step, 0, [layer]))
    frame = pd.concat(pd.read_parquet(p) for p in sorted((tmp_path / HEAD_METRICS).glob("*.parquet")))
    return Run("0", tmp_path, "completed", head_metrics=frame)


def test_a_head_that_keeps_its_step0_role_is_kept_and_one_that_changes_acquires_its_final_role(tmp_path):
    # head 0 is local at init and stays local (a random preference kept); head 1 goes mixed -> previous_token
    run = _run(tmp_path, [(0, [LOCAL, MIXED], [0, 0]), (60, [LOCAL, PREV], [3, 5]), (120, [LOCAL, PREV], [9, 8])])
    heads = head_summary(run, None).set_index("head")
    assert heads.loc[0, "initial_role"] == "local" and heads.loc[0, "final_role"] == "local"
    assert heads.loc[0, "acquired_role"] == KEPT_ROLE
    assert heads.loc[1, "initial_role"] == "mixed" and heads.loc[1, "acquired_role"] == "previous_token"


def test_early_gradient_is_the_running_sum_at_the_last_measurement_by_step_100(tmp_path):
    run = _run(tmp_path, [(0, [MIXED, MIXED], [0, 0]), (60, [MIXED, MIXED], [3, 5]), (120, [MIXED, MIXED], [9, 8])])
    heads = head_summary(run, None).set_index("head")
    assert heads["early_grad_norm"].tolist() == [3.0, 5.0]     # step 60, not step 120 (9, 8)
    assert heads["cum_grad_norm"].tolist() == [9.0, 8.0]      # the whole-run sum is unchanged


def test_early_gradient_is_missing_when_only_step_0_lies_in_the_window(tmp_path):
    run = _run(tmp_path, [(0, [MIXED, MIXED], [0, 0]), (150, [MIXED, MIXED], [3, 5])])
    assert head_summary(run, None)["early_grad_norm"].isna().all()


def test_early_gradient_correlation_ranks_within_layers_not_across_them():
    # inside each layer the larger early gradient is the more important head (rho 1 within layers);
    # across layers the scales run the other way, so a pooled rank correlation would be far below 1
    heads = pd.DataFrame({"layer": [0] * 4 + [1] * 4,
                          "early_grad_norm": [10, 20, 30, 40, 1, 2, 3, 4],
                          "ablation_dloss": [1, 2, 3, 4, 10, 20, 30, 40]})
    assert early_gradient_correlation(heads) == pytest.approx(1.0)
    pooled = stats.spearmanr(heads["early_grad_norm"], heads["ablation_dloss"]).statistic
    assert pooled < 0.0
    # one layer reversed: within-layer rho is 0 (scipy on the within-layer ranks agrees)
    heads.loc[heads["layer"] == 1, "ablation_dloss"] = [40, 30, 20, 10]
    assert early_gradient_correlation(heads) == pytest.approx(0.0, abs=1e-12)


def test_kappa_equals_statsmodels_cohens_kappa_on_the_matched_roles():
    a = np.array([0, 0, 1, 2])          # roles of seed a's heads, in matched order
    b = np.array([0, 1, 1, 2])          # roles of the heads of seed b they were matched with
    same = float((a == b).mean())
    chance = sum((a == r).mean() * (b == r).mean() for r in np.union1d(a, b))
    table = pd.crosstab(a, b).reindex(index=[0, 1, 2], columns=[0, 1, 2], fill_value=0).to_numpy()
    assert kappa(same, chance) == pytest.approx(cohens_kappa(table).kappa)
    assert math.isnan(kappa(1.0, 1.0))  # one role everywhere: no room above chance


def test_disjoint_pairs_use_every_seed_at_most_once():
    pairs = disjoint_pairs(range(10, 20))
    flat = [s for p in pairs for s in p]
    assert pairs[0] == (10, 11) and len(pairs) == 5 and len(set(flat)) == len(flat) == 10


def test_seed_pair_table_from_the_hand_made_sweep(aggregated):
    result, _ = aggregated
    table = pd.read_csv(result.out_dir / SEED_PAIRS_CSV)
    # n_heads=2: completed seeds 0, 1, 2 -> one pair (0, 1), seed 2 left out; n_heads=4: seeds 0, 1 -> (0, 1)
    assert sorted(zip(table["model.n_heads"], table["seed"], table["seed_b"])) == [(2, 0, 1), (4, 0, 1)]
    by_heads = table.set_index("model.n_heads")
    # the matching undoes each seed's permutation, so every matched head keeps its role: kappa 1
    assert by_heads["same_role"].tolist() == [1.0, 1.0]
    assert by_heads.loc[2, "same_role_baseline"] == pytest.approx(0.5)    # roles {0, 1}: 2 x (1/2)^2
    assert by_heads.loc[4, "same_role_baseline"] == pytest.approx(0.25)   # roles {0..3}: 4 x (1/4)^2
    assert by_heads["same_role_kappa"].tolist() == [1.0, 1.0]
    # the seeds are permutations of each other: matched heads have the same profile, distance 0
    assert by_heads["matched_distance_ratio"].tolist() == pytest.approx([0.0, 0.0], abs=1e-9)
    assert by_heads.loc[2, "test_acc"] == pytest.approx((0.78 + 0.82) / 2)  # jobs 0 and 1


def test_matched_distance_ratio_is_the_layer_mean_of_matched_over_random_distance():
    matches = pd.DataFrame({"layer": [0, 1], "job_a": ["0", "0"], "job_b": ["1", "1"], "same_role": [1.0, 1.0],
                            "same_role_baseline": [1.0, 1.0], "matched_distance": [0.5, 1.5],
                            "random_distance": [1.0, 2.0], "error": ["", ""], "config": ["c", "c"]})
    runs = pd.DataFrame({"job": ["0", "1"], "config": ["c", "c"], "seed": [0, 1], "usable": [True, True], "test_acc": [0.5, 0.6]})
    row = seed_pair_table(matches, runs, runs[["job", "config"]]).iloc[0]
    # one role everywhere: no kappa, but the ratio still reads the layers: (0.5 + 0.75) / 2
    assert math.isnan(row["same_role_kappa"]) and row["matched_distance_ratio"] == pytest.approx(0.625)
    assert distance_ratio(1.0, 4.0) == 0.25 and math.isnan(distance_ratio(1.0, 0.0))


def test_seed_pair_table_skips_pairs_that_did_not_match():
    matches = pd.DataFrame({"layer": [0], "job_a": ["0"], "job_b": ["1"], "same_role": [math.nan],
                            "same_role_baseline": [math.nan], "error": ["one run has no roles"], "config": ["c"]})
    runs = pd.DataFrame({"job": ["0", "1"], "config": ["c", "c"], "seed": [0, 1], "usable": [True, True], "test_acc": [0.5, 0.6]})
    assert seed_pair_table(matches, runs, runs[["job", "config"]]).empty
