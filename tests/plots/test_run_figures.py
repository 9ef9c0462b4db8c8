from pathlib import Path

import numpy as np
import pytest

from headlab.errors import DataError
from headlab.plots import load_attention_maps, write_run_figures
from headlab.store import HEAD_METRICS, HEAD_PAIRS, append_part, head_metric_rows, head_pair_rows

L, H, P = 2, 2, 4
ROLES = [["previous_token", "broad"], ["vertical", "local"]]
ALL_FIGURES = ["attention_grid.png", "head_similarity.png", "metric_trajectories.png", "role_timeline.png"]


def _make_run(run_dir: Path, pairs=True, roles=True, maps=True) -> Path:
    rng = np.random.default_rng(0)
    for step in (0, 10, 100):
        per_layer = [{"entropy_norm": rng.random(H), "prev_score": rng.random(H)} for _ in range(L)]
        if roles:
            for layer in per_layer:
                layer["role"] = np.array([0.0, 3.0])
        append_part(run_dir / HEAD_METRICS, step, head_metric_rows("run-a", step, 0, per_layer))
        if pairs:
            matrices = [{"js": rng.random((H, H)), "corr": rng.uniform(-1, 1, (H, H))} for _ in range(L)]
            append_part(run_dir / HEAD_PAIRS, step, head_pair_rows("run-a", step, 0, matrices))
    if maps:
        np.savez(
            run_dir / "attention_maps.npz",
            mean_pattern=rng.dirichlet(np.ones(P), size=(L, H, P)),
            step=np.int64(100),
            roles=np.array(ROLES),
        )
    return run_dir


def test_writes_every_figure_of_a_complete_run(tmp_path, read_png):
    run_dir = _make_run(tmp_path / "run")
    written = write_run_figures(run_dir)
    assert sorted(p.name for p in written) == ALL_FIGURES
    assert all(p.parent == run_dir / "figures" for p in written)
    for path in written:
        read_png(path, min_side=100)
    assert sorted(p.name for p in (run_dir / "figures").iterdir()) == ALL_FIGURES  # no temp files


def test_missing_head_pairs_and_roles_skip_only_their_figures(tmp_path):
    run_dir = _make_run(tmp_path / "run", pairs=False, roles=False)
    written = write_run_figures(run_dir)
    assert sorted(p.name for p in written) == ["attention_grid.png", "metric_trajectories.png"]
    assert sorted(p.name for p in (run_dir / "figures").iterdir()) == sorted(p.name for p in written)


def test_run_without_measurements_writes_nothing_and_does_not_raise(tmp_path):
    (tmp_path / "run" / HEAD_METRICS).mkdir(parents=True)  # created, but the run died before measuring
    assert write_run_figures(tmp_path / "run") == []


def test_attention_maps_are_read_with_their_roles_and_step(tmp_path):
    maps = load_attention_maps(_make_run(tmp_path / "run") / "attention_maps.npz")
    assert maps.roles == ROLES and maps.step == 100 and maps.mean_pattern.shape == (L, H, P, P)
    assert load_attention_maps(tmp_path / "absent.npz") is None


def test_attention_maps_needing_pickle_or_lacking_patterns_raise_data_error(tmp_path):
    np.savez(tmp_path / "objects.npz", mean_pattern=np.zeros((1, 1, 2, 2)), roles=np.array([["a"]], dtype=object))
    with pytest.raises(DataError, match="string array"):
        load_attention_maps(tmp_path / "objects.npz")
    np.savez(tmp_path / "empty.npz", step=3)
    with pytest.raises(DataError, match="no 'mean_pattern'"):
        load_attention_maps(tmp_path / "empty.npz")
