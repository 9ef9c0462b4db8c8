"""figures/importance_timeline.png: importance per head over training with its role along it."""

from __future__ import annotations

import matplotlib.colors as mcolors
import numpy as np
import pandas as pd
import pytest
import seaborn as sns

from headlab.analysis.roles import ROLES
from headlab.cli.importance import main
from headlab.plots.importance import build_importance_timeline_figure, importance_trajectory
from tests._runs import train_keeping_threads

STEPS = [0, 10, 20, 30]
# (layer, head) -> importance per step. Step 0: every head large (the untrained loss), equal shares.
# Shares after it: L0H0 0.6 then 0.2 (lost), L0H1 0.2, 0.5, 0.6 (important from step 20), L0H2 at most 0.3.
VALUES = {(0, 0): [3.0, 0.6, 0.2, 0.2], (0, 1): [3.0, 0.2, 0.5, 0.6], (0, 2): [3.0, 0.2, 0.3, 0.2]}
# role ids per step: L0H1 is "mixed" until step 10, "previous_token" from 20 on; the others stay "broad"
ROLE_IDS = {(0, 0): [ROLES.index("broad")] * 4, (0, 1): [ROLES.index("mixed")] * 2 + [ROLES.index("previous_token")] * 2,
            (0, 2): [ROLES.index("broad")] * 4}


def _long(values: dict, metric: str) -> pd.DataFrame:
    return pd.DataFrame([{"step": s, "layer": l, "head": h, "metric": metric, "value": float(v)}
                         for (l, h), series in values.items() for s, v in zip(STEPS, series)])


def test_each_head_panel_shows_its_onset_and_its_roles():
    fig = build_importance_timeline_figure(_long(VALUES, "ablation_dloss")[["step", "layer", "head", "value"]],
                                           "ablation_dloss", _long(ROLE_IDS, "role"))
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in panels] == ["L0H0: not held", "L0H1: from step 20", "L0H2: not held"]
    onset_lines = [line for line in panels[1].lines if line.get_linestyle() == "--"]
    assert len(onset_lines) == 1 and list(onset_lines[0].get_xdata()) == [20, 20]
    assert not [line for ax in (panels[0], panels[2]) for line in ax.lines if line.get_linestyle() == "--"]
    shares = panels[1].lines[0].get_ydata()
    assert list(shares) == pytest.approx([1 / 3, 0.2, 0.5, 0.6])
    palette = sns.color_palette("husl", len(ROLES))

    def band(ax):  # (start, role) of each shaded interval
        out = []
        for patch in ax.patches:
            colour = mcolors.to_rgb(patch.get_facecolor())
            role = int(np.argmin([np.abs(np.subtract(colour, c)).sum() for c in palette]))
            out.append((round(patch.get_x()), ROLES[role]))
        return sorted(out)

    assert band(panels[1]) == [(0, "mixed"), (10, "mixed"), (20, "previous_token"), (30, "previous_token")]
    assert {role for _, role in band(panels[0])} == {"broad"}


def test_the_trajectory_prefers_measured_ablation_over_the_gradient_proxy():
    ablation, grad = _long(VALUES, "ablation_dloss"), _long(VALUES, "grad_importance")
    assert importance_trajectory(ablation, grad)[1] == "ablation_dloss"
    assert importance_trajectory(ablation[ablation.step == 30], grad)[1] == "grad_importance"  # one checkpoint only
    assert importance_trajectory(ablation[ablation.step == 30], None) is None


@pytest.mark.usefixtures("one_thread")
def test_checkpoint_all_on_a_run_with_kept_checkpoints_writes_the_timeline(tmp_path, tiny_config, capsys):
    run = tmp_path / "run"
    train_keeping_threads(tiny_config(run, "+callbacks.checkpoint.keep_every_n_train_steps=2", "test=false",
                                      "callbacks.head_metrics.figures=false", "threads=1"))
    assert main([str(run), "checkpoint=last", "importance.curves=false"]) == 0
    assert not (run / "figures" / "importance_timeline.png").exists()  # one step: no trajectory yet
    assert main([str(run), "checkpoint=all", "importance.curves=false"]) == 0
    assert (run / "figures" / "importance_timeline.png").stat().st_size > 0
    assert pd.read_parquet(run / "head_importance.parquet").step.nunique() >= 3
