"""A run's tables -> the page's data, on hand-made tables whose answers are known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from headlab.analysis.roles import ROLES
from headlab.errors import DataError
from headlab.view.encode import dequantize, quantize
from headlab.view.run_data import run_page_data

STEPS = (0, 16, 40)


def metrics_table() -> pd.DataFrame:
    """1 layer x 2 heads; head 0 goes broad -> local -> local, head 1 stays mixed; entropy falls."""
    rows = []
    roles = {0: ["broad", "local", "local"], 1: ["mixed", "mixed", "mixed"]}
    for t, step in enumerate(STEPS):
        for head in (0, 1):
            rows.append((step, 0, head, "entropy", 2.0 - t * 0.5 + head))
            rows.append((step, 0, head, "role", float(ROLES.index(roles[head][t]))))
            rows.append((step, 0, head, "prev_score@y", 0.5))  # a conditional metric: its own chart, after the others
    return pd.DataFrame(rows, columns=["step", "layer", "head", "metric", "value"]).assign(run_id="r", epoch=0)


def test_trajectories_roles_changes_and_bifurcation_are_indexed_by_step_and_head():
    data = run_page_data(metrics_table())
    assert data["steps"] == list(STEPS) and (data["n_layers"], data["n_heads"]) == (1, 2)
    assert data["metrics"] == {"entropy": [[2.0, 3.0], [1.5, 2.5], [1.0, 2.0]], "prev_score@y": [[0.5, 0.5]] * 3}
    assert list(data["metrics"]) == ["entropy", "prev_score@y"]  # the all-query metrics first
    assert data["roles"] == [["broad", "mixed"], ["local", "mixed"], ["local", "mixed"]]
    assert data["role_changes"] == [{"step": 16, "head": 0, "from": "broad", "to": "local"}]
    assert data["bifurcation"] == [16, 0]  # head 1 holds its role from step 0
    assert data["maps"] is None and data["tokens"] is None and data["pairs"] == {}


def test_importance_joins_the_trajectories_at_its_step_and_nan_elsewhere():
    importance = pd.DataFrame({"step": [40, 40], "layer": [0, 0], "head": [0, 1], "metric": ["ablation_dloss"] * 2,
                               "value": [0.25, 0.125]})
    data = run_page_data(metrics_table(), importance=importance)
    assert data["metrics"]["ablation_dloss"] == [[None, None], [None, None], [0.25, 0.125]]


def test_quantized_maps_come_back_within_half_a_code_of_each_matrix_maximum():
    rng = np.random.default_rng(0)
    maps = rng.dirichlet(np.ones(6), size=(2, 3, 4, 6))  # [map, layer, head, q, k]
    data, scale = quantize(maps)
    assert scale == pytest.approx(maps.reshape(24, 36).max(axis=1).tolist())
    back = dequantize(data, scale, maps.shape)
    assert np.all(np.abs(back - maps) <= np.asarray(scale).reshape(2, 3, 4, 1, 1) / 510 + 1e-12)


def test_maps_and_tokens_keep_only_measured_steps():
    maps = {16: np.full((1, 2, 3, 3), 0.5), 99: np.ones((1, 2, 3, 3))}
    parts = [{"step": np.int64(40), "patterns": np.ones((1, 2, 1, 2, 2), np.float16) / 2, "lengths": np.array([2]),
              "tokens": np.array([["[CLS]", "好"]])}]
    data = run_page_data(metrics_table(), maps=maps, patterns=parts)
    assert data["maps"]["steps"] == [16] and data["maps"]["size"] == 3
    assert data["tokens"]["steps"] == [40] and data["tokens"]["sentences"] == [["[CLS]", "好"]]


def test_a_run_without_measurements_is_one_data_error():
    with pytest.raises(DataError, match="measured nothing"):
        run_page_data(metrics_table().iloc[:0])


def test_the_grid_shows_the_task_role_when_the_run_measured_it():
    """A head that reads the label from [CLS] is `mixed` over all queries: the grid, its ticks and the timeline
    take `role@task` (named as such), so the page is not a grid of `mixed`."""
    table = metrics_table()
    task = table[table.metric == "role"].assign(metric="role@task")
    task.loc[task["head"] == 1, "value"] = [float(ROLES.index(r)) for r in ("mixed", "vertical", "vertical")]
    data = run_page_data(pd.concat([table, task], ignore_index=True), task_queries="[CLS]")
    assert data["role_label"] == "task role (from [CLS])"
    assert data["roles"] == [["broad", "mixed"], ["local", "vertical"], ["local", "vertical"]]
    assert {"step": 16, "head": 1, "from": "mixed", "to": "vertical"} in data["role_changes"]
    assert run_page_data(table)["role_label"] == "role"  # no task view: the all-query role, as before
