"""figures/importance.png: importance heat maps, and beside them what each head reads for the decision."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from headlab.plots.importance import TaskView, build_importance_figure, reading_grid

# 1 layer x 2 heads: H0 reads the last token from [CLS] (0.66) and matters; H1 spreads and does not.
IMPORTANCE = pd.DataFrame([{"step": 40, "layer": 0, "head": h, "metric": m, "value": v}
                           for h, (dloss, grad) in enumerate([(0.36, 0.9), (0.01, 0.1)])
                           for m, v in (("ablation_dloss", dloss), ("grad_importance", grad))])
TASK = TaskView("[CLS]", [["vertical", "broad"]], [{
    "last_attention@task": np.array([0.66, 0.05]), "cls_attention@task": np.array([0.10, 0.12]),
    "punct_attention@task": np.array([0.0, 0.0]), "prev_score@task": np.array([0.0, 0.0]),
    "next_score@task": np.array([0.05, 0.07]), "self_score@task": np.array([0.10, 0.04]),
    "entropy_norm": np.array([0.2, 0.9]),  # an all-query metric: not read for the task panel
}])


def _panel(fig, title):
    (ax,) = [ax for ax in fig.axes if ax.get_title() == title]
    return ax


def test_the_reading_grid_names_the_place_each_head_reads_from_cls():
    mass, labels = reading_grid(TASK, 1, 2)
    # from [CLS], cls_attention is the head's own row ("self") and next_score the first word ("first")
    np.testing.assert_allclose(mass, [[0.66, 0.12]])
    assert labels == [["last", "self"]]


def test_the_figure_shows_the_task_roles_and_reading_beside_importance():
    fig = build_importance_figure(IMPORTANCE, 40, roles=[["mixed", "mixed"]], task=TASK)
    reading = _panel(fig, "most attended from [CLS]")
    assert sorted(t.get_text() for t in reading.texts) == ["last\n0.66", "self\n0.12"]
    task_roles = _panel(fig, "task role (from [CLS])")
    assert [t.get_text() for t in task_roles.get_legend().get_texts()] == ["broad", "vertical"]
    assert [t.get_text() for t in task_roles.texts] == ["vertical", "broad"]  # each cell named
    every = _panel(fig, "role (every query)")
    assert [t.get_text() for t in every.get_legend().get_texts()] == ["mixed"]
    # one palette for both role maps: the same role, the same colour
    colours = [{t.get_text(): tuple(p.get_facecolor()) for t, p in zip(ax.get_legend().get_texts(), ax.get_legend().get_patches())}
               for ax in (task_roles, every)]
    assert len({*colours[0].values(), *colours[1].values()}) == 3
    ablation = _panel(fig, "ablation: val loss increase")
    assert sorted(t.get_text() for t in ablation.texts) == ["0.01", "0.36"]
    assert "what each head reads from [CLS]" in fig._suptitle.get_text()


def test_without_a_task_view_the_figure_keeps_its_one_row():
    fig = build_importance_figure(IMPORTANCE, 40, roles=[["mixed", "mixed"]])
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titles == ["ablation: val loss increase", "gradient importance E|dL/dgate|", "role (probe set)"]


def test_a_step_without_rows_names_the_steps_there_are():
    with pytest.raises(Exception, match=r"no rows at step 7; steps: \[40\]"):
        build_importance_figure(IMPORTANCE, 7, task=TASK)
