"""Aggregation of the hand-made sweep of conftest.py against known answers."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from headlab.errors import DataError
from headlab.store import HEAD_METRICS, HEAD_PAIRS, SweepDir
from headlab.sweep import aggregate_sweep, discover_runs
from headlab.sweep.runs import expected_jobs

from .conftest import N_LAYERS, STEPS, VAL_ACC

CONFIG_2 = "data=synthetic,model.n_heads=2"
CONFIG_4 = "data=synthetic,model.n_heads=4"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _t_interval(values):
    x = np.asarray(values)
    half = stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x))
    return x.mean(), x.mean() - half, x.mean() + half


def test_discovery_lists_every_job_with_its_reason(sweep_dir):
    runs = {r.job: r for r in discover_runs(SweepDir(sweep_dir))}
    assert sorted(runs, key=int) == [str(i) for i in range(10)]
    assert {j for j, r in runs.items() if r.usable} == {"0", "1", "2", "5", "6"}
    assert runs["3"].status == "missing" and "no job directory" in runs["3"].reason
    assert runs["3"].config == CONFIG_2 and runs["3"].seed == 3  # known from multirun.yaml
    assert runs["4"].status == "running" and "still running" in runs["4"].reason
    assert runs["7"].status == "failed" and "boom: CUDA out of memory" in runs["7"].reason
    assert runs["8"].status == "unreadable" and HEAD_METRICS in runs["8"].reason
    assert runs["9"].status == "unreadable" and "summary.json" in runs["9"].reason
    assert runs["9"].config == CONFIG_4  # overrides.yaml was readable


def test_expected_jobs_follow_hydra_order(sweep_dir):
    jobs = expected_jobs(SweepDir(sweep_dir))
    assert len(jobs) == 10
    assert jobs[3] == ["data=synthetic", "model.n_heads=2", "seed=3"]
    assert jobs[5] == ["data=synthetic", "model.n_heads=4", "seed=0"]
    (sweep_dir / "multirun.yaml").unlink()
    assert "3" not in {r.job for r in discover_runs(SweepDir(sweep_dir))}  # no yaml: only the dirs present


def test_accuracy_ci_matches_a_hand_computed_t_interval(aggregated):
    _, summary = aggregated
    for config, jobs in ((CONFIG_2, (0, 1, 2)), (CONFIG_4, (5, 6))):
        row = summary.loc[config]
        assert row["n_seeds"] == len(jobs) and row["n_jobs"] == 5
        accs = [VAL_ACC[j] for j in jobs]
        mean, low, high = _t_interval(accs)
        # an accuracy's interval stops at 1 (2 seeds of CONFIG_4: the raw t-interval reaches 1.11)
        assert (row["val_acc_mean"], row["val_acc_ci95_low"], row["val_acc_ci95_high"]) == pytest.approx(
            (mean, max(low, 0.0), min(high, 1.0)))
        assert row["test_acc_mean"] == pytest.approx(mean - 0.02)
        assert row["test_acc_ci95_high"] == pytest.approx(min(high - 0.02, 1.0))
    assert summary.loc[CONFIG_4, "val_acc_ci95_high"] == 1.0
    assert summary.loc[CONFIG_2, "n_skipped"] == 2 and summary.loc[CONFIG_4, "n_skipped"] == 3
    assert summary.loc[CONFIG_2, "seeds"] == "0 1 2"
    assert summary.loc[CONFIG_2, "model.n_heads"] == 2 and summary.loc[CONFIG_4, "config_label"] == "model.n_heads=4"


def test_head_level_statistics_have_the_planted_values(aggregated):
    _, summary = aggregated
    two, four = summary.loc[CONFIG_2], summary.loc[CONFIG_4]
    assert two["steps_to_converge_mean"] == 29 and four["steps_to_converge_mean"] == 29
    assert (two["role_bifurcation_median"], four["role_bifurcation_median"]) == (20, 10)
    assert (two["metric_bifurcation_median"], four["metric_bifurcation_median"]) == (20, 10)
    assert two["role_unsettled_frac"] == 0 and two["metric_unsettled_frac"] == 0
    assert two["role_frac_previous_token"] == 0.5 and two["role_frac_local"] == 0.5 and two["role_frac_mixed"] == 0
    assert four["role_frac_broad"] == 0.25
    assert two["rho_grad_specificity_mean"] == pytest.approx(1.0)
    assert two["rho_dist_specificity_mean"] == pytest.approx(-1.0)
    assert two["final_js_mean"] == pytest.approx(0.4) and two["final_1-corr_mean"] == pytest.approx(0.4)
    assert two["q_cos_ratio_init_mean"] == pytest.approx(1.0) and two["qk_cos_ratio_final_mean"] == pytest.approx(2.0)


def test_cross_seed_matching_undoes_the_head_permutation(aggregated):
    _, summary = aggregated
    for config, pairs in ((CONFIG_2, 3), (CONFIG_4, 1)):
        row = summary.loc[config]
        assert row["n_seed_pairs"] == pairs
        assert row["match_same_role"] == 1.0 and row["match_matched_distance"] == pytest.approx(0.0, abs=1e-12)
        assert row["match_random_distance"] > 0.5
    four = summary.loc[CONFIG_4]
    assert four["match_same_role_baseline"] == pytest.approx(0.25)  # 4 distinct roles: 4 of 16 pairs agree
    matches = pd.read_csv(aggregated[0].out_dir / "sweep_matches.csv")
    assert len(matches) == N_LAYERS * 4  # (3 + 1) seed pairs per layer


def test_tidy_table_holds_only_usable_runs_tagged(aggregated):
    result, _ = aggregated
    tidy = pd.read_parquet(result.out_dir / "sweep.parquet")
    assert set(tidy["job"]) == {"0", "1", "2", "5", "6"}
    per_run = 5 * N_LAYERS * 9  # steps x layers x metrics, per head
    assert len(tidy) == 3 * 2 * per_run + 2 * 4 * per_run
    one = tidy[(tidy["job"] == "6") & (tidy["step"] == 40) & (tidy["layer"] == 1) & (tidy["metric"] == "role")]
    assert sorted(one["value"]) == [0.0, 1.0, 2.0, 3.0]
    assert set(tidy.loc[tidy["job"] == "6", "seed"]) == {1} and set(tidy.loc[tidy["job"] == "6", "model.n_heads"]) == {4}
    assert sorted(tidy["step"].unique()) == list(STEPS)
    runs = pd.read_csv(result.out_dir / "sweep_runs.csv", dtype={"job": str}).set_index("job")
    assert list(runs.index) == [str(i) for i in range(10)]
    assert not runs.loc["8", "usable"] and "garbage" not in runs.loc["8", "reason"]
    tables = {"sweep_runs.csv", "sweep.parquet", "sweep_heads.csv", "sweep_layer_pairs.parquet", "sweep_matches.csv",
              "sweep_summary.csv", "division_of_labour.csv", "sweep_redundancy.csv", "sweep_redundancy_runs.csv",
              "sweep_seed_pairs.csv"}
    assert {p.name for p in result.written if p.suffix != ".png"} == tables  # view.html is the commands' (cli/aggregate)


def test_runs_without_head_tables_still_count_for_accuracy(sweep_dir, tmp_path):
    shutil.rmtree(sweep_dir / "0" / HEAD_METRICS)
    shutil.rmtree(sweep_dir / "0" / HEAD_PAIRS)
    result = aggregate_sweep(SweepDir(sweep_dir), tmp_path / "out", figures=False)
    run0 = next(r for r in result.runs if r.job == "0")
    assert run0.usable and f"no {HEAD_METRICS}" in run0.notes
    summary = pd.read_csv(tmp_path / "out" / "sweep_summary.csv").set_index("config")
    assert summary.loc[CONFIG_2, "n_seeds"] == 3
    assert summary.loc[CONFIG_2, "n_seed_pairs"] == 1  # only jobs 1 and 2 have heads to match


def test_no_usable_run_writes_only_the_run_report(tmp_path):
    from .conftest import write_job

    sweep = tmp_path / "sw"
    write_job(sweep, 0, 2, 0, "failed", error="bad override")
    result = aggregate_sweep(SweepDir(sweep), figures=False)
    assert result.usable == [] and [p.name for p in result.written] == ["sweep_runs.csv"]
    assert (sweep / "aggregate" / "sweep_runs.csv").is_file()


def test_not_a_sweep_folder_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="no such directory"):
        aggregate_sweep(SweepDir(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no job directories"):
        aggregate_sweep(SweepDir(tmp_path / "empty"))


def test_figures_are_written(aggregated):
    result, _ = aggregated
    pngs = sorted(p.name for p in result.written if p.suffix == ".png")
    assert pngs == ["accuracy_vs_factor.png", "head_divergence.png", "metric_trajectories.png", "role_composition.png"]
    for p in result.written:
        if p.suffix == ".png":
            assert p.parent == result.out_dir / "figures"
            assert p.read_bytes()[:8] == PNG_SIGNATURE and p.stat().st_size > 10_000


def test_a_plain_override_names_the_config_over_an_appended_default_of_the_same_group(tmp_path):
    """headlab-distill appends `+distill=default` before a sweep's `distill=NAME`: the label is the variant."""
    from headlab.sweep.aggregate import run_tags
    from headlab.sweep.runs import Run

    runs = [Run(str(i), tmp_path / str(i), "completed", overrides=[f"distill={name}", f"seed={seed}", "+distill=default"])
            for i, (name, seed) in enumerate([("ce", 0), ("ce", 1), ("logits", 0), ("logits", 1)])]
    assert runs[0].override_values()["distill"] == "ce"
    tags = run_tags(runs)
    assert list(tags["config_label"]) == ["distill=ce", "distill=ce", "distill=logits", "distill=logits"]


def test_a_sweep_of_one_config_is_labelled_by_what_it_trained_not_how_it_ran(tmp_path):
    """Every job alike but the seed: the label is the sweep's own overrides less figures, resume,
    sweep, sweep_name and threads (a legend of the whole override string crowded the figures out)."""
    from headlab.sweep.aggregate import run_tags
    from headlab.sweep.runs import Run

    ran = ["figures=false", "resume=auto", "sweep=heads", "sweep_name=heads-synthetic-cls", "threads=1"]
    runs = [Run(str(i), tmp_path / str(i), "completed", overrides=[f"seed={i}", "model.n_heads=8", "model.pooling=cls", *ran])
            for i in range(3)]
    assert list(run_tags(runs)["config_label"]) == ["model.n_heads=8,model.pooling=cls"] * 3
    only_ran = [Run("0", tmp_path / "0", "completed", overrides=["seed=0", *ran])]
    assert list(run_tags(only_ran)["config_label"]) == [only_ran[0].config]  # nothing trained differently: the config

