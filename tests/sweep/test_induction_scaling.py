"""induction_scaling.csv and its figure: measured onset tokens against N = T sqrt(B C) (no training)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf

from headlab.plots.induction import FITTED_LABEL, MEASURED_LABEL, build_scaling_figure, plot_induction_scaling
from headlab.sweep.induction_scaling import (SCALING_CSV, predicted_onset_tokens, scaling_table,
                                             write_induction_scaling)
from headlab.sweep.runs import Run


def _per_run() -> pd.DataFrame:
    return pd.DataFrame([
        {"config": "b=16,c=33", "batch_size": 16, "context": 33, "onset_step": 2000, "max_induction_score": 0.6},
        {"config": "b=16,c=33", "batch_size": 16, "context": 33, "onset_step": 2200, "max_induction_score": 0.7},
        {"config": "b=64,c=65", "batch_size": 64, "context": 65, "onset_step": 800, "max_induction_score": 0.8},
        {"config": "b=64,c=65", "batch_size": 64, "context": 65, "onset_step": None, "max_induction_score": 0.2},
        {"config": "b=32,c=65", "batch_size": 32, "context": 65, "onset_step": None, "max_induction_score": 0.1},
    ])


def test_prediction_columns_equal_hand_computed_values():
    table = scaling_table(_per_run()).set_index("config")
    # 10^5.7 = 501,187.23; sqrt(16 * 33) = 22.978; sqrt(64 * 65) = 64.498
    assert predicted_onset_tokens(16, 33) == pytest.approx(501_187.23 * 22.9783, rel=1e-5)
    assert table.loc["b=16,c=33", "predicted_tokens"] == pytest.approx(11_516_351, rel=1e-5)
    assert table.loc["b=16,c=33", "predicted_step"] == pytest.approx(11_516_351 / 528, rel=1e-5)  # 21,811 steps
    assert table.loc["b=64,c=65", "predicted_tokens"] == pytest.approx(32_325_648, rel=1e-5)
    # measured: onset step x B x C, the mean over the seeds with an onset
    assert table.loc["b=16,c=33", "onset_tokens_mean"] == pytest.approx(2100 * 528)
    assert table.loc["b=16,c=33", "measured_over_predicted"] == pytest.approx(2100 * 528 / 11_516_351, rel=1e-5)
    assert table.loc["b=16,c=33", "log10_T_implied"] == pytest.approx(math.log10(2100 * 528 / math.sqrt(528)))
    assert table.loc["b=64,c=65", "onset_tokens_mean"] == pytest.approx(800 * 4160)
    assert table.loc["b=64,c=65", ["n_seeds", "n_with_onset", "n_formed"]].tolist() == [2, 1, 1]
    assert math.isnan(table.loc["b=64,c=65", "onset_tokens_ci95_low"])  # one onset: no interval, not a zero-width one
    assert math.isnan(table.loc["b=32,c=65", "onset_tokens_mean"]) and table.loc["b=32,c=65", "n_formed"] == 0
    assert list(table.index) == ["b=16,c=33", "b=32,c=65", "b=64,c=65"]  # by tokens per step


def test_another_t_scales_the_prediction():
    table = scaling_table(_per_run(), t_log10=5.0).set_index("config")
    assert table.loc["b=16,c=33", "predicted_tokens"] == pytest.approx(1e5 * math.sqrt(528))


def test_figure_has_the_measured_predicted_and_fitted_series(tmp_path):
    table = scaling_table(_per_run())
    fig = build_scaling_figure(table)
    labels = fig.axes[0].get_legend_handles_labels()[1]
    fitted = table["log10_T_implied"].dropna().mean()
    assert sorted(labels) == sorted([MEASURED_LABEL, FITTED_LABEL.format(t=fitted), "prediction N = T sqrt(BC), T = 10^5.7"])
    measured = fig.axes[0].containers[0]  # the errorbar: only the two configs with an onset
    assert len(measured.lines[0].get_xdata()) == 2
    assert sorted(measured.lines[0].get_ydata()) == pytest.approx([2100 * 528, 800 * 4160])
    path = plot_induction_scaling(table, tmp_path / "figures" / "induction_scaling.png")
    assert path.stat().st_size > 10_000 and path.read_bytes()[:4] == b"\x89PNG"


def test_without_any_onset_only_the_prediction_is_drawn():
    per_run = _per_run().assign(onset_step=None)
    labels = build_scaling_figure(scaling_table(per_run)).axes[0].get_legend_handles_labels()[1]
    assert labels == ["prediction N = T sqrt(BC), T = 10^5.7"]


def _lm_run(tmp_path: Path, job: str, batch_size: int, context: int, onset: int | None,
            segments: tuple[int, int] | None = None) -> Run:
    run_dir = tmp_path / job
    (run_dir / ".hydra").mkdir(parents=True)
    data = {"batch_size": batch_size, "max_len": context}
    if segments:
        data.update(min_segment=segments[0], max_segment=segments[1])
    OmegaConf.save(OmegaConf.create({"data": data}), run_dir / ".hydra" / "config.yaml")
    lm = {"induction_onset_steps": {"L1H0": onset}, "loss_drop_step": onset, "icl_jump_step": onset,
          "max_induction_score_overall": 0.6, "onsets_coincide_with_loss_drop": True}
    return Run(job=job, run_dir=run_dir, status="completed", summary={"lm": lm},
               overrides=[f"data.batch_size={batch_size}", f"data.max_len={context}"])


def test_written_from_run_dirs_only_when_the_runs_span_several_b_c(tmp_path):
    runs = [_lm_run(tmp_path, "0", 16, 33, 2000), _lm_run(tmp_path, "1", 64, 33, 1000)]
    written = write_induction_scaling(tmp_path / "aggregate", {r.config: [r] for r in runs})
    assert [p.name for p in written] == [SCALING_CSV, "induction_scaling.png"]
    table = pd.read_csv(written[0])
    assert table["onset_tokens_mean"].tolist() == [2000 * 16 * 33, 1000 * 64 * 33]
    assert table["loss_drop_step_mean"].tolist() == [2000, 1000]  # the helper's loss drop = its onset
    assert table["repeat_density"].isna().all()  # the helper's config names no segments
    one_grid_point = [_lm_run(tmp_path / "single", str(i), 32, 33, 1500) for i in range(2)]
    assert write_induction_scaling(tmp_path / "agg2", {"x": one_grid_point}) == []
    classifier = Run(job="c", run_dir=tmp_path / "c", status="completed", summary={"val_acc": 0.9})
    assert write_induction_scaling(tmp_path / "agg3", {"c": [classifier]}) == []


def test_scaling_rows_carry_the_new_seed_prediction_interval():
    from scipy import stats as st

    per_run = pd.DataFrame({"config": "c", "batch_size": 8, "context": 33, "onset_step": [1000, 1200, 1400],
                            "max_induction_score": 0.9})
    row = scaling_table(per_run).iloc[0]
    half = st.t.ppf(0.975, 2) * 200 * (4 / 3) ** 0.5  # sd of 1000, 1200, 1400 is 200
    assert (row["onset_step_pi95_low"], row["onset_step_pi95_high"]) == pytest.approx((1200 - half, 1200 + half))


# --- the B / C fit (scaling_fit) against hand-computed OLS and a hand-built cluster sandwich ---

from headlab.sweep.induction_scaling import FIT_CSV, repeat_density, scaling_fit  # noqa: E402


def _grid_runs() -> pd.DataFrame:
    """3 B x 3 C, 3 seeds; onset steps with planted, uneven noise; one seed without an onset and
    one cell (B 64, C 65) where no seed has one."""
    rng = np.random.default_rng(7)
    rows = []
    for batch_size in (16, 32, 64):
        for context in (17, 33, 65):
            for seed in range(3):
                tokens = 10 ** 4.3 * batch_size ** 0.8 * context ** 1.2 * 10 ** rng.normal(0, 0.08)
                step = round(tokens / (batch_size * context))
                if (batch_size, context) == (64, 65) or (batch_size, context, seed) == (16, 33, 2):
                    step = None
                rows.append({"config": f"b={batch_size},c={context}", "batch_size": batch_size, "context": context,
                             "onset_step": step, "max_induction_score": 0.6})
    return pd.DataFrame(rows)


def _design(frame: pd.DataFrame) -> np.ndarray:
    return np.column_stack([np.ones(len(frame)), np.log10(frame["batch_size"].to_numpy(float)),
                            np.log10(frame["context"].to_numpy(float))])


def _with_tokens(per_run: pd.DataFrame) -> pd.DataFrame:
    runs = per_run.dropna(subset=["onset_step"]).copy()
    runs["y"] = np.log10(runs["onset_step"].astype(float) * runs["batch_size"] * runs["context"])
    return runs


def test_repeat_density_is_the_copyable_share_of_targets():
    assert repeat_density(4, 16, 33) == pytest.approx(9 / 32)    # data=repeat_tokens' defaults: 0.28125
    assert repeat_density(3, 8, 17) == pytest.approx(4.5 / 16)   # the grid's C = 17: the same share
    assert repeat_density(8, 30, 65) == pytest.approx(18 / 64)   # C = 65: the same share
    assert repeat_density(4, 16, 65) == pytest.approx(9 / 64)    # the old grid's C = 65: half of it
    assert repeat_density(3, 12, 25) == pytest.approx(6.5 / 24)


def test_cell_means_fit_equals_hand_computed_ols():
    from scipy import stats as st

    per_run = _grid_runs()
    fit = scaling_fit(per_run, "cell_means").set_index("term")
    cells = _with_tokens(per_run).groupby(["batch_size", "context"], as_index=False)["y"].mean()
    X, y = _design(cells), cells["y"].to_numpy()
    beta = np.linalg.lstsq(X, y, rcond=None)[0]
    df = len(y) - 3
    s2 = np.sum((y - X @ beta) ** 2) / df
    cov = s2 * np.linalg.inv(X.T @ X)
    se = np.sqrt(np.diag(cov))
    half = st.t.ppf(0.975, df) * se
    assert fit["estimate"].tolist() == pytest.approx(beta.tolist(), rel=1e-9)
    assert fit["se"].tolist() == pytest.approx(se.tolist(), rel=1e-9)
    assert fit["ci95_low"].tolist() == pytest.approx((beta - half).tolist(), rel=1e-9)
    assert fit["ci95_high"].tolist() == pytest.approx((beta + half).tolist(), rel=1e-9)
    for i, term in ((1, "log10_B"), (2, "log10_C")):
        p = 2 * st.t.sf(abs(beta[i] - 0.5) / se[i], df)
        assert fit.loc[term, "p_slope_is_half"] == pytest.approx(p, rel=1e-9)
    R, d = np.array([[0, 1, 0], [0, 0, 1]]), beta[1:] - 0.5
    f = d @ np.linalg.inv(R @ cov @ R.T) @ d / 2
    assert fit["p_joint_sqrt_bc"].iloc[0] == pytest.approx(st.f.sf(f, 2, df), rel=1e-9)
    assert (fit["n_cells"].iloc[0], fit["n_runs"].iloc[0], fit["n_cells_without_onset"].iloc[0]) == (8, 23, 1)
    assert fit["df"].iloc[0] == 5
    assert math.isnan(fit.loc["intercept", "p_slope_is_half"])


def test_cluster_fit_equals_a_hand_built_sandwich_with_t_on_cells_minus_one():
    from scipy import stats as st

    per_run = _grid_runs()
    fit = scaling_fit(per_run, "cluster").set_index("term")
    runs = _with_tokens(per_run)
    X, y = _design(runs), runs["y"].to_numpy()
    beta = np.linalg.lstsq(X, y, rcond=None)[0]
    u = y - X @ beta
    bread = np.linalg.inv(X.T @ X)
    cells = (runs["batch_size"].astype(str) + "x" + runs["context"].astype(str)).to_numpy()
    meat = sum(np.outer(X[cells == g].T @ u[cells == g], X[cells == g].T @ u[cells == g]) for g in set(cells))
    n, k, g = len(y), 3, len(set(cells))
    cov = g / (g - 1) * (n - 1) / (n - k) * bread @ meat @ bread  # statsmodels' default small-sample factor
    se = np.sqrt(np.diag(cov))
    assert fit["estimate"].tolist() == pytest.approx(beta.tolist(), rel=1e-9)
    assert fit["se"].tolist() == pytest.approx(se.tolist(), rel=1e-9)
    half = st.t.ppf(0.975, g - 1) * se
    assert fit["ci95_low"].tolist() == pytest.approx((beta - half).tolist(), rel=1e-9)
    assert fit["df"].iloc[0] == g - 1 == 7
    p = 2 * st.t.sf(abs(beta[2] - 0.5) / se[2], g - 1)
    assert fit.loc["log10_C", "p_slope_is_half"] == pytest.approx(p, rel=1e-9)


def test_a_planted_sqrt_law_is_recovered_exactly():
    rows = [{"config": f"{b},{c}", "batch_size": b, "context": c, "onset_step": 10 ** 4.5 / math.sqrt(b * c),
             "max_induction_score": 0.6} for b in (16, 32, 64) for c in (17, 25, 33)]
    fit = scaling_fit(pd.DataFrame(rows)).set_index("term")["estimate"]
    assert fit.tolist() == pytest.approx([4.5, 0.5, 0.5], abs=1e-9)


def test_no_fit_unless_the_cells_with_an_onset_span_b_and_c():
    per_run = _grid_runs()
    one_context = per_run[per_run["context"] == 33]
    assert scaling_fit(one_context).empty
    square = per_run[per_run["batch_size"].isin([16, 32]) & per_run["context"].isin([17, 65])]
    assert len(scaling_fit(square)) == 3  # 2 B x 2 C: 4 cells, 1 df
    three_cells = square[~((square["batch_size"] == 32) & (square["context"] == 65))]
    assert scaling_fit(three_cells).empty  # as many cells as coefficients: nothing left to test against
    with pytest.raises(ValueError, match="method"):
        scaling_fit(per_run, "robust")
    with pytest.raises(ValueError, match="measure"):
        scaling_fit(per_run, measure="midpoint_step")


def test_the_loss_drop_is_fitted_from_its_own_column():
    per_run = _grid_runs()
    swapped = per_run.assign(loss_drop_step=per_run["onset_step"], onset_step=500)
    by_drop = scaling_fit(swapped, measure="loss_drop_step").drop(columns="measure")
    pd.testing.assert_frame_equal(by_drop, scaling_fit(per_run).drop(columns="measure"))


def test_the_grid_writes_its_fit_beside_the_table(tmp_path):
    segments = {17: (3, 8), 33: (4, 16)}
    runs = [_lm_run(tmp_path, f"{b}_{c}", b, c, round(30_000 / math.sqrt(b * c)), segments[c])
            for b in (16, 32, 64) for c in (17, 33)]
    written = write_induction_scaling(tmp_path / "aggregate", {r.config: [r] for r in runs}, figures=False)
    assert [p.name for p in written] == [SCALING_CSV, FIT_CSV]
    assert pd.read_csv(written[0])["repeat_density"].tolist() == pytest.approx([0.28125] * 6)  # from each saved config
    fit = pd.read_csv(written[1])
    assert sorted(set(fit["method"])) == ["cell_means", "cluster"] and len(fit) == 12
    assert sorted(set(fit["measure"])) == ["loss_drop_step", "onset_step"]
    slopes = fit[(fit["method"] == "cell_means") & (fit["measure"] == "onset_step")].set_index("term")["estimate"]
    assert slopes["log10_B"] == pytest.approx(0.5, abs=0.01) and slopes["log10_C"] == pytest.approx(0.5, abs=0.01)


@pytest.mark.parametrize("context, segments, steps, density", [
    ("c17", (3, 8), 4000, 0.28125), ("c25", (3, 12), 3000, 6.5 / 24), ("c33", (4, 16), 3000, 0.28125),
    ("c65", (8, 30), 3000, 0.28125)])
def test_each_grid_context_keeps_the_repeat_density_and_the_one_probe(context, segments, steps, density):
    """sweep=induction_scaling_grid's contexts: the copyable share within 4 % of 0.28125 (repeat_tokens'
    own at C = 33), the same 17-token probe everywhere and fitting every context."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_module("headlab.conf", version_base="1.3"):
        cfg = compose("train", overrides=["sweep=induction_scaling_grid", f"+sweep/induction_scaling_context={context}",
                                          "data.batch_size=64"])
    data = cfg.data
    assert (data.min_segment, data.max_segment, cfg.trainer.max_steps) == (*segments, steps)
    assert cfg.model.max_len == data.max_len == int(context[1:]) and data.batch_size == 64
    assert repeat_density(data.min_segment, data.max_segment, data.max_len) == pytest.approx(density)
    assert abs(density / 0.28125 - 1) < 0.04
    assert (data.probe_size, data.probe_half_len, data.probe_max_gap) == (64, 4, 8)
    assert 1 + data.probe_max_gap + 2 * data.probe_half_len <= data.max_len and 2 * data.max_segment <= data.max_len - 1
    assert cfg.model.n_layers == 2 and cfg.model.attn_only and cfg.model.d_model == 64 and cfg.model.n_heads == 4
