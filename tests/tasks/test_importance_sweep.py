"""`headlab-importance SWEEP_DIR` on a tiny sweep shaped like `make sweep-smoke` (1 layer, 2 heads,
d_model 32, two seeds and one job that never finished), then `headlab-prune` on every job."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from headlab.cli.importance import main
from headlab.cli.prune import main as prune_main
from headlab.reload import load_network
from tests._runs import file_listing, train_keeping_threads

pytestmark = pytest.mark.usefixtures("one_thread")

SMOKE_SHAPE = ["model.n_layers=1", "model.n_heads=2", "model.d_model=32", "callbacks.head_metrics.figures=false",
               "test=false", "threads=1"]


@pytest.fixture(scope="module")
def built_sweep(tmp_path_factory, compose_tiny):
    folder = tmp_path_factory.mktemp("importance_sweep") / "sweep"
    folder.mkdir()
    (folder / "multirun.yaml").write_text("hydra:\n  overrides:\n    task:\n    - model.n_layers=1\n    - seed=0,1,2\n")
    for seed in (0, 1):
        job = folder / str(seed)
        train_keeping_threads(compose_tiny(job, *SMOKE_SHAPE, f"seed={seed}"))
        (job / ".hydra").mkdir(exist_ok=True)
        (job / ".hydra" / "overrides.yaml").write_text(f"- model.n_layers=1\n- seed={seed}\n")
    unfinished = folder / "2"
    (unfinished / ".hydra").mkdir(parents=True)
    (unfinished / ".hydra" / "overrides.yaml").write_text("- model.n_layers=1\n- seed=2\n")
    (unfinished / "summary.json").write_text(json.dumps({"status": "running", "run_id": "2"}))
    return folder


@pytest.fixture
def sweep(built_sweep, tmp_path):
    return shutil.copytree(built_sweep, tmp_path / "sweep")


def test_every_usable_job_measured_then_the_sweep_aggregated(sweep, capsys):
    assert main([str(sweep), "importance.figures=false"]) == 0
    out = capsys.readouterr().out
    assert "skipped job 2" in out and "measured 2 of 3 jobs" in out
    assert not (sweep / "2" / "head_importance.parquet").exists()
    finals = []
    for job in ("0", "1"):
        table = pd.read_parquet(sweep / job / "head_importance.parquet")
        rows = table[table.metric == "ablation_dloss"]
        assert sorted(zip(rows["layer"], rows["head"])) == [(0, 0), (0, 1)]
        finals.append(rows.sort_values("head").value.to_numpy())
    averaged = pd.read_csv(sweep / "aggregate" / "sweep_importance.csv")
    assert averaged.n_seeds.tolist() == [2, 2] and averaged.reference_job.tolist() == [0, 0]
    # seed 0's head h averaged with the seed-1 head matched to it: the matching is the identity or the swap
    means = averaged.sort_values("head").ablation_dloss_mean.to_numpy()
    candidates = [(finals[0] + finals[1][list(perm)]) / 2 for perm in ((0, 1), (1, 0))]
    assert any(means == pytest.approx(c, abs=1e-9) for c in candidates)
    assert (sweep / "aggregate" / "sweep_importance_tau.csv").is_file()
    assert (sweep / "aggregate" / "sweep_redundancy.csv").is_file()


def test_prune_works_on_every_job_of_the_measured_sweep(sweep):
    assert main([str(sweep), "importance.figures=false", "importance.curves=false"]) == 0
    for job in ("0", "1"):
        for ranking in ("ablation", "gradient", "random", "seed_avg"):
            assert prune_main([str(sweep / job), f"prune.ranking={ranking}", "prune.max_drop=1.0",
                               "prune.fraction_per_step=0.5", "prune.figures=false"]) == 0
            net = load_network(sweep / job / "pruned" / f"{ranking}-ft0.ckpt")
            assert net.blocks[0].attn.n_heads == 1  # a layer keeps its last head; max_drop 1 accepts the round


def test_a_job_that_cannot_be_measured_stops_the_sweep_before_anything_is_written(sweep, capsys):
    shutil.rmtree(sweep / "1" / "checkpoints")
    before = file_listing(sweep)
    assert main([str(sweep)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "job 1" in err and "has no checkpoints" in err
    assert file_listing(sweep) == before


def test_bad_setting_is_named_once_for_the_sweep(sweep, capsys):
    before = file_listing(sweep)
    assert main([str(sweep), "importance.batch_size=0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("headlab-importance: error: invalid config importance.batch_size=0") and "job" not in err
    assert file_listing(sweep) == before
