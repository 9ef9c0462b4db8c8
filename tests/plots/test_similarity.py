import numpy as np
import pandas as pd
import pytest

from headlab.errors import ConfigError, DataError
from headlab.plots import build_head_similarity_figure, plot_head_similarity
from headlab.store import head_pair_rows

STEPS = [5, 50]
N_LAYERS = 2


def _pair_table(n_heads=3, metrics=("js", "corr"), seed=0):
    """Long table plus its matrices: matrices[(step, metric, layer)] -> [head_a, head_b]."""
    rng = np.random.default_rng(seed)
    matrices = {}
    frames = []
    for step in STEPS:
        per_layer = []
        for layer in range(N_LAYERS):
            mats = {"js": rng.uniform(0.0, 0.7, (n_heads, n_heads)), "corr": rng.uniform(-1.0, 1.0, (n_heads, n_heads))}
            per_layer.append({m: mats[m] for m in metrics})
            matrices.update({(step, m, layer): mats[m] for m in metrics})
        frames.append(head_pair_rows("run-a", step, 0, per_layer))
    return pd.concat(frames[::-1], ignore_index=True), matrices


def _panels(fig) -> dict[str, object]:
    return {ax.get_title(): ax for ax in fig.axes if ax.collections and ax.get_title()}


def _shown(ax, n_heads) -> np.ndarray:
    return np.ma.filled(ax.collections[0].get_array().astype(float), np.nan).reshape(n_heads, n_heads)


@pytest.mark.parametrize("step", [None, 5])
def test_panels_show_the_matrices_of_the_requested_step(step):
    table, matrices = _pair_table()
    fig = build_head_similarity_figure(table, step=step)
    shown_step = 50 if step is None else step  # default: the last measurement
    panels = _panels(fig)
    assert sorted(panels) == sorted(f"{m} · L{layer}" for m in ("js", "corr") for layer in range(N_LAYERS))
    for metric in ("js", "corr"):
        for layer in range(N_LAYERS):
            ax = panels[f"{metric} · L{layer}"]
            np.testing.assert_allclose(_shown(ax, 3), matrices[(shown_step, metric, layer)])
            assert [t.get_text() for t in ax.get_xticklabels()] == ["H0", "H1", "H2"]
    assert f"step {shown_step}" in fig.get_suptitle()
    assert "qk_cosine" in fig.get_suptitle()  # a default metric that is absent, skipped


def test_cells_are_annotated_with_their_values_up_to_eight_heads():
    table, matrices = _pair_table()
    ax = _panels(build_head_similarity_figure(table, metrics=("js",)))["js · L1"]
    assert [t.get_text() for t in ax.texts] == [f"{v:.2f}" for v in matrices[(50, "js", 1)].ravel()]
    big, _ = _pair_table(n_heads=9)
    assert len(_panels(build_head_similarity_figure(big, metrics=("js",)))["js · L1"].texts) == 0


def test_each_metric_row_shares_a_colour_scale_centred_when_signed():
    table, matrices = _pair_table()
    panels = _panels(build_head_similarity_figure(table))
    corr_limit = max(np.abs(matrices[(50, "corr", layer)]).max() for layer in range(N_LAYERS))
    js_top = max(matrices[(50, "js", layer)].max() for layer in range(N_LAYERS))
    for layer in range(N_LAYERS):
        np.testing.assert_allclose(panels[f"corr · L{layer}"].collections[0].get_clim(), (-corr_limit, corr_limit))
        np.testing.assert_allclose(panels[f"js · L{layer}"].collections[0].get_clim(), (0.0, js_top))


def test_absent_metric_is_skipped_and_all_absent_raises():
    table, _ = _pair_table(metrics=("js",))
    fig = build_head_similarity_figure(table, metrics=("corr", "js"))
    assert sorted(_panels(fig)) == ["js · L0", "js · L1"]
    with pytest.raises(DataError, match=r"available: \['js'\]"):
        build_head_similarity_figure(table, metrics=("corr", "qk_cosine"))


def test_unmeasured_step_is_a_config_error_naming_the_measured_ones():
    table, _ = _pair_table()
    with pytest.raises(ConfigError, match=r"one of \[5, 50\]"):
        build_head_similarity_figure(table, step=7)


def test_similarity_png(tmp_path, read_png):
    table, _ = _pair_table()
    read_png(plot_head_similarity(table, tmp_path / "sim.png"))
    assert [p.name for p in tmp_path.iterdir()] == ["sim.png"]
