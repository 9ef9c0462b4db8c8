"""induction_scaling.csv and its figure: measured onset tokens against N = T sqrt(B C) (no training)."""

from __future__ import annotations

import math
from pathlib import Path

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


def _lm_run(tmp_path: Path, job: str, batch_size: int, context: int, onset: int | None) -> Run:
    run_dir = tmp_path / job
    (run_dir / ".hydra").mkdir(parents=True)
    OmegaConf.save(OmegaConf.create({"data": {"batch_size": batch_size, "max_len": context}}), run_dir / ".hydra" / "config.yaml")
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
