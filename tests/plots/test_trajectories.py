import sys
import types

import matplotlib.colors as mcolors
import numpy as np
import pandas as pd
import pytest

from headlab.errors import DataError
from headlab.plots import (
    build_metric_trajectories_figure,
    build_role_timeline_figure,
    plot_metric_trajectories,
    plot_role_timeline,
)
from headlab.store import head_metric_rows

STEPS = [0, 3, 30, 300]
N_LAYERS, N_HEADS = 2, 3


def _metric_table(metrics=("entropy_norm", "mean_distance"), run_id="run-a", seed=0):
    """Shuffled long table plus the values it holds: values[(metric, step)] -> [layer, head]."""
    rng = np.random.default_rng(seed)
    values = {(m, s): rng.random((N_LAYERS, N_HEADS)) for m in metrics for s in STEPS}
    frames = [
        head_metric_rows(run_id, s, s // 100, [{m: values[(m, s)][layer] for m in metrics} for layer in range(N_LAYERS)])
        for s in STEPS
    ]
    return pd.concat(frames).sample(frac=1.0, random_state=1), values  # row order must not matter


def _facets(fig) -> dict[tuple[int, int], object]:
    """Data axes keyed by (row, col) of their place in the grid."""
    return {
        (ax.get_subplotspec().rowspan.start, ax.get_subplotspec().colspan.start): ax
        for ax in fig.axes
        if ax.get_subplotspec() is not None
    }


def test_facets_are_metric_rows_by_layer_cols_with_one_line_per_head_in_step_order():
    table, values = _metric_table()
    fig = build_metric_trajectories_figure(table, metrics=("entropy_norm", "prev_score", "mean_distance"))
    facets = _facets(fig)
    assert sorted(facets) == [(r, c) for r in range(2) for c in range(N_LAYERS)]  # prev_score absent -> 2 rows
    head_colours = {}
    for (row, layer), ax in facets.items():
        metric = ("entropy_norm", "mean_distance")[row]
        assert len(ax.lines) == N_HEADS
        for head, line in enumerate(ax.lines):
            assert line.get_label() == f"H{head}"
            np.testing.assert_array_equal(line.get_xdata(), STEPS)
            np.testing.assert_array_equal(line.get_ydata(), [values[(metric, s)][layer, head] for s in STEPS])
            head_colours.setdefault(head, set()).add(mcolors.to_hex(line.get_color()))
        assert ax.get_xscale() == "symlog"
    assert all(len(c) == 1 for c in head_colours.values())  # a head keeps its colour in every facet
    assert len({c.pop() for c in head_colours.values()}) == N_HEADS
    assert _facets(fig)[(0, 0)].get_ylabel() == "entropy_norm" and _facets(fig)[(1, 0)].get_ylabel() == "mean_distance"
    assert "prev_score" in fig.get_suptitle()


def test_linear_x_when_log_x_is_false():
    table, _ = _metric_table()
    fig = build_metric_trajectories_figure(table, metrics=("entropy_norm",), log_x=False)
    assert {ax.get_xscale() for ax in _facets(fig).values()} == {"linear"}


def test_all_metrics_absent_raises_listing_what_is_available():
    table, _ = _metric_table()
    with pytest.raises(ValueError, match=r"available: \['entropy_norm', 'mean_distance'\]") as err:
        build_metric_trajectories_figure(table, metrics=("prev_score", "cls_attention"))
    assert isinstance(err.value, DataError)


def test_two_runs_or_duplicated_points_are_refused():
    table, _ = _metric_table()
    other, _ = _metric_table(run_id="run-b")
    with pytest.raises(DataError, match="2 runs"):
        build_metric_trajectories_figure(pd.concat([table, other]))
    with pytest.raises(DataError, match="share the same"):
        build_metric_trajectories_figure(pd.concat([table, table.iloc[:1]]))


def test_metric_trajectories_png(tmp_path, read_png):
    table, _ = _metric_table()
    path = plot_metric_trajectories(table, tmp_path / "traj.png")
    read_png(path)
    assert [p.name for p in tmp_path.iterdir()] == ["traj.png"]


# role ids per (layer, head) over STEPS[:3]; L1H1 was not measured at step 0 (its row is absent)
ROLE_IDS = {(0, 0): [2, 0, 0], (0, 1): [2, 2, 1], (1, 0): [3, 3, 3], (1, 1): [np.nan, 1, 2]}
NAMES = ["previous_token", "local", "long_range", "broad"]


def _role_table():
    frames = []
    for i, step in enumerate(STEPS[:3]):
        per_layer = [
            {"role": [ROLE_IDS[(layer, head)][i] for head in range(2)], "entropy_norm": np.full(2, 0.5)}
            for layer in range(2)
        ]
        frames.append(head_metric_rows("run-a", step, 0, per_layer))
    table = pd.concat(frames, ignore_index=True)
    return table[~table["value"].isna()]


def _expected_ids() -> np.ndarray:
    return np.array([ROLE_IDS[key] for key in sorted(ROLE_IDS)], dtype=np.float64)


def test_role_timeline_cells_are_role_ids_with_one_colour_per_role():
    fig = build_role_timeline_figure(_role_table(), role_names=NAMES)
    (ax,) = fig.axes
    image = ax.images[0]
    np.testing.assert_array_equal(np.ma.filled(image.get_array().astype(float), np.nan), _expected_ids())
    assert [t.get_text() for t in ax.get_yticklabels()] == ["L0H0", "L0H1", "L1H0", "L1H1"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "3", "30"]
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == NAMES
    for role, patch in enumerate(legend.get_patches()):  # the cell colour of role k is legend entry k
        assert mcolors.to_hex(image.cmap(image.norm(role))) == mcolors.to_hex(patch.get_facecolor())


def test_role_names_come_from_analysis_roles_when_it_exists(monkeypatch):
    fake = types.ModuleType("headlab.analysis.roles")
    fake.ROLES = ("a", "b", "c", "d", "e")
    monkeypatch.setitem(sys.modules, "headlab.analysis.roles", fake)
    legend = build_role_timeline_figure(_role_table()).axes[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == list(fake.ROLES)


def test_role_names_fall_back_to_ids_without_analysis_roles(monkeypatch):
    table = _role_table()  # written while the names exist (the table's writer names its roles)
    monkeypatch.setitem(sys.modules, "headlab.analysis.roles", None)  # import raises ImportError
    legend = build_role_timeline_figure(table).axes[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["role 0", "role 1", "role 2", "role 3"]


@pytest.mark.parametrize("bad_value, match", [(7.0, "role id 7 has no name"), (1.5, "non-negative integers")])
def test_role_ids_that_name_no_role_are_refused(bad_value, match):
    table = _role_table()
    table.loc[(table["metric"] == "role") & (table["value"] == 3.0), "value"] = bad_value
    with pytest.raises(DataError, match=match):
        build_role_timeline_figure(table, role_names=NAMES)


def test_role_timeline_without_role_metric_raises():
    table, _ = _metric_table()
    with pytest.raises(DataError, match="no 'role' metric"):
        build_role_timeline_figure(table, role_names=NAMES)


def test_role_timeline_png(tmp_path, read_png):
    read_png(plot_role_timeline(_role_table(), tmp_path / "roles.png", role_names=NAMES), min_side=100)
    assert [p.name for p in tmp_path.iterdir()] == ["roles.png"]
