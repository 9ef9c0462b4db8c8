import itertools

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.figure import Figure

from headlab.errors import DataError
from headlab.plots import build_attention_grid_figure, plot_attention_grid

ROLES = [["local", "broad", "vertical"], ["previous_token", "mixed", "long_range"]]


def _patterns(n_layers=2, n_heads=3, n_pos=5, seed=0) -> np.ndarray:
    """[layer, head, q, k] rows that sum to 1, with one query row never reached (NaN)."""
    rng = np.random.default_rng(seed)
    patterns = rng.dirichlet(np.ones(n_pos), size=(n_layers, n_heads, n_pos))
    patterns[n_layers - 1, n_heads - 1, -1, :] = np.nan
    return patterns


def _panels(fig) -> dict[str, object]:
    """Image axes keyed by the first line of their title (L{l}H{h})."""
    return {ax.get_title().split("\n")[0]: ax for ax in fig.axes if ax.images}


def test_one_panel_per_head_shows_exactly_its_mean_pattern_and_role():
    patterns = _patterns()
    fig = build_attention_grid_figure(patterns, roles=ROLES, title="step 7")
    panels = _panels(fig)
    assert sorted(panels) == sorted(f"L{l}H{h}" for l, h in itertools.product(range(2), range(3)))
    for layer, head in itertools.product(range(2), range(3)):
        ax = panels[f"L{layer}H{head}"]
        assert len(ax.images) == 1
        assert ax.get_title().split("\n")[1] == ROLES[layer][head]
        shown = np.ma.filled(ax.images[0].get_array().astype(np.float64), np.nan)
        np.testing.assert_array_equal(shown, patterns[layer, head])  # rows = queries, cols = keys
    assert fig.get_suptitle() == "step 7"


def test_panels_share_one_colour_scale_and_one_colourbar():
    patterns = _patterns()
    fig = build_attention_grid_figure(patterns)
    panels = _panels(fig)
    expected = (0.0, float(np.nanmax(patterns)))
    assert {ax.images[0].get_clim() for ax in panels.values()} == {expected}
    others = [ax for ax in fig.axes if not ax.images]
    assert len(others) == 1 and others[0].get_ylabel() == "mean attention"


def test_nan_positions_are_masked_and_drawn_blank():
    fig = build_attention_grid_figure(_patterns())
    image = _panels(fig)["L1H2"].images[0]
    mask = np.ma.getmaskarray(image.get_array())
    assert mask[-1].all() and not mask[:-1].any()
    assert image.get_cmap().get_bad().tolist() == [1.0, 1.0, 1.0, 1.0]


def test_tokens_label_only_the_outer_panels():
    tokens = ["[CLS]", "a", "b", ",", "c"]
    fig = build_attention_grid_figure(_patterns(), tokens=tokens)
    panels = _panels(fig)
    assert [t.get_text() for t in panels["L0H0"].get_yticklabels()] == tokens
    assert [t.get_text() for t in panels["L1H1"].get_xticklabels()] == tokens
    assert panels["L0H1"].get_yticklabels() == [] and panels["L0H1"].get_xticklabels() == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {"mean_patterns": np.ones((2, 3, 5))},  # no layer axis
        {"mean_patterns": np.ones((2, 3, 5, 4))},  # q != k
        {"mean_patterns": _patterns(), "roles": [["a", "b"], ["c", "d"]]},  # roles for 2 heads, not 3
        {"mean_patterns": _patterns(), "tokens": ["a", "b"]},
    ],
)
def test_bad_inputs_raise_data_error(kwargs):
    with pytest.raises(DataError):
        build_attention_grid_figure(**kwargs)


def test_writes_a_png_atomically_without_touching_global_state(tmp_path, read_png):
    rc_before = dict(mpl.rcParams)
    path = plot_attention_grid(_patterns(), tmp_path / "figs" / "grid.png", roles=ROLES)
    assert path == tmp_path / "figs" / "grid.png"
    read_png(path)
    assert [p.name for p in path.parent.iterdir()] == ["grid.png"]  # no temp file left behind
    assert dict(mpl.rcParams) == rc_before
    assert plt.get_fignums() == []


def test_failed_save_leaves_neither_target_nor_temp_file(tmp_path, monkeypatch):
    def crash(self, fname, **kwargs):
        open(fname, "wb").write(b"\x89PNG half")
        raise RuntimeError("disk full")

    monkeypatch.setattr(Figure, "savefig", crash)
    with pytest.raises(RuntimeError, match="disk full"):
        plot_attention_grid(_patterns(), tmp_path / "grid.png")
    assert list(tmp_path.iterdir()) == []
