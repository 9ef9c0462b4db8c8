"""A sweep's page data (divergence curves with their seed band, seed grids aligned by the matching)
and the command line: a run or sweep gets view.html, anything else one line and exit 2."""

from __future__ import annotations

import numpy as np
import pytest

from headlab.cli.view import main
from headlab.sweep.matching import config_finals, match_layer
from headlab.sweep.runs import discover_runs
from headlab.view.sweep_data import divergence_curve, sweep_page_data
from headlab.store import SweepDir
from tests.sweep.conftest import build_sweep


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    return build_sweep(tmp_path_factory.mktemp("sweep") / "multirun")


def test_each_config_gets_the_seed_mean_and_band_of_its_divergence(sweep):
    runs = discover_runs(SweepDir(sweep))
    data = sweep_page_data(runs, {})
    usable = [r for r in runs if r.usable]
    by_label = {c["label"]: c for c in data["configs"]}
    assert sorted(c["n_seeds"] for c in data["configs"]) == [2, 3]
    for label, config in by_label.items():
        members = [r for r in usable if r.config == label]
        curves = []
        for run in members:  # mean JS over distinct pairs of each layer, then over layers: by hand
            p = run.head_pairs[run.head_pairs["metric"] == "js"]
            per_step = {}
            for step, rows in p.groupby("step"):
                layers = [g.loc[g["head_a"] != g["head_b"], "value"].mean() for _, g in rows.groupby("layer")]
                per_step[step] = float(np.mean(layers))
            curves.append(per_step)
        steps = sorted(curves[0])
        assert config["steps"] == steps
        values = np.array([[c[s] for s in steps] for c in curves])
        np.testing.assert_allclose(config["mean"], values.mean(0), atol=1e-6)
        np.testing.assert_allclose(config["lo"], values.min(0), atol=1e-6)
        np.testing.assert_allclose(config["hi"], values.max(0), atol=1e-6)
        assert config["grid"] is None  # no maps given
    assert any("not usable" in n for n in data["notes"])


def test_the_seed_grids_are_ordered_by_the_cross_seed_matching(sweep):
    runs = [r for r in discover_runs(SweepDir(sweep)) if r.usable]
    label = next(r.config for r in runs if r.head_metrics["head"].max() == 3)
    members = sorted((r for r in runs if r.config == label), key=lambda r: r.seed)
    n_layers = int(members[0].head_metrics["layer"].max()) + 1
    maps = {r.job: np.random.default_rng(int(r.job)).dirichlet(np.ones(4), size=(n_layers, 4, 4)) for r in members}
    grid = next(c for c in sweep_page_data(runs, maps)["configs"] if c["label"] == label)["grid"]
    finals = config_finals(members)
    assert grid["jobs"] == [r.job for r in members] and grid["order"][0] == [[0, 1, 2, 3]] * n_layers
    for si, run in enumerate(members[1:], 1):
        for layer in range(n_layers):
            assert grid["order"][si][layer] == match_layer(finals, members[0].job, run.job, layer).permutation.tolist()


def test_divergence_ignores_a_heads_pair_with_itself():
    import pandas as pd

    pairs = pd.DataFrame({"step": 0, "layer": [0, 0, 0, 0], "head_a": [0, 0, 1, 1], "head_b": [0, 1, 0, 1],
                          "metric": "js", "value": [0.9, 0.2, 0.2, 0.9]})
    assert divergence_curve(pairs).tolist() == [0.2]


def test_the_command_writes_the_sweeps_page_and_refuses_a_folder_that_is_neither(sweep, tmp_path, capsys):
    assert main([str(sweep)]) == 0
    assert (sweep / "view.html").is_file() and "wrote" in capsys.readouterr().out
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main([str(empty)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"headlab-view: error: {empty}: has no head_metrics.parquet: not a headlab run (or it measured nothing)"]
    assert list(empty.iterdir()) == []


def test_a_run_whose_last_part_is_truncated_is_refused_in_one_line_naming_it(tmp_path, capsys):
    """Parts are written atomically, so a cut-short part is damage: a page without it would show a run
    that ends early with no sign of it, so the command refuses and says which file."""
    from headlab.store import append_part, head_metric_rows

    run = tmp_path / "run"
    for step in (0, 10):
        last = append_part(run / "head_metrics.parquet", step,
                           head_metric_rows("r", step, 0, [{"entropy": np.array([0.1, 0.2])}]))
    last.write_bytes(last.read_bytes()[:100])
    assert main([str(run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"headlab-view: error: {last}: cannot be read: truncated")
    assert not (run / "view.html").exists()


def test_a_read_only_folder_is_refused_before_its_tables_are_read(tmp_path, capsys, monkeypatch):
    import errno

    from headlab.store import append_part, head_metric_rows

    run = tmp_path / "run"
    append_part(run / "head_metrics.parquet", 0, head_metric_rows("r", 0, 0, [{"entropy": np.array([0.1, 0.2])}]))

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    def read(*args, **kwargs):
        raise AssertionError("read before the write check")

    monkeypatch.setattr("tempfile.mkstemp", read_only)
    monkeypatch.setattr("headlab.view.read_run", read)
    assert main([str(run)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"headlab-view: error: {run}: cannot be written: read-only file system"]
    assert not (run / "view.html").exists()
