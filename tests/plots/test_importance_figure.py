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
    "entropy_norm@task": np.array([0.2, 0.9]), "confidence@task": np.array([0.7, 0.1]),
    "entropy_norm": np.array([0.9, 0.2]),  # an all-query metric: not read for the task panel
}])


def _panel(fig, title):
    (ax,) = [ax for ax in fig.axes if ax.get_title() == title]
    return ax


def test_the_reading_grid_says_what_each_head_reads_from_cls_as_the_report_does():
    number, labels = reading_grid(TASK, 1, 2)
    # H0: 0.66 on the last token (a place); H1 no place reaches 0.25 (its largest, 0.12, is [CLS] itself)
    # and its entropy_norm@task 0.9 is broad: "spread", as the report's "spreads over the whole sentence"
    np.testing.assert_allclose(number, [[0.66, 0.9]])
    assert labels == [["last", "spread"]]
    content = TaskView("[CLS]", [["content"]], [{"last_attention@task": np.array([0.1]), "cls_attention@task": np.array([0.05]),
                                                 "entropy_norm@task": np.array([0.4]), "confidence@task": np.array([0.72])}])
    assert reading_grid(content, 1, 1)[1] == [["content"]] and reading_grid(content, 1, 1)[0][0, 0] == 0.72
    assert reading_grid(TaskView("[CLS]", [["self"]], [{"cls_attention@task": np.array([0.3]), "entropy_norm@task":
                                                        np.array([0.2])}]), 1, 1)[1] == [["self"]]  # from [CLS]: itself


def test_the_figure_shows_the_task_roles_and_reading_beside_importance():
    fig = build_importance_figure(IMPORTANCE, 40, roles=[["mixed", "mixed"]], task=TASK)
    reading = _panel(fig, "what it reads from [CLS]")
    assert sorted(t.get_text() for t in reading.texts) == ["last\n0.66", "spread\n0.90"]
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
