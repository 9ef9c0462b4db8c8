"""`headlab-prune RUN prune.ranking=seed_avg`: heads ranked by ablation importance averaged over the
seeds of the run's sweep config (hand-made importance tables), and the refusal outside a sweep."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from headlab.cli.prune import main
from headlab.store import head_metric_rows
from tests._runs import file_listing, train_keeping_threads

pytestmark = pytest.mark.usefixtures("one_thread")

# [layer][head] ablation_dloss of two seeds (identical descriptors: the matching is the identity).
SEED0 = [[0.0, 0.4, 0.8, 0.2], [0.9, 0.05, 0.3, 0.6]]
SEED1 = [[1.0, 0.3, 0.0, 0.9], [0.1, 0.65, 0.5, 0.2]]
# mean: L0 [0.5, 0.35, 0.4, 0.55], L1 [0.5, 0.35, 0.4, 0.4]: the four lowest are L0H1, L1H1, L0H2 and one of L1H2/L1H3
# (tied at 0.4); seed 0 alone would remove L0H0, L1H1, L0H3, L1H2.


@pytest.fixture(scope="module")
def trained(tmp_path_factory, compose_tiny):
    run = tmp_path_factory.mktemp("prune_seed_avg") / "run"
    train_keeping_threads(compose_tiny(run, "callbacks.head_metrics.figures=false", "test=false", "model.n_heads=4", "threads=1"))
    return run


def _importance(run_dir, job, values):
    head_metric_rows(job, 6, 0, [{"ablation_dloss": np.array(v)} for v in values]).to_parquet(run_dir / "head_importance.parquet")


@pytest.fixture
def sweep(trained, tmp_path):
    folder = tmp_path / "sweep"
    for job, values in (("0", SEED0), ("1", SEED1)):
        shutil.copytree(trained, folder / job)
        _importance(folder / job, job, values)
    return folder


def test_seed_avg_removes_the_heads_lowest_on_the_seed_average(sweep):
    assert main([str(sweep / "0"), "prune.ranking=seed_avg", "prune.fraction_per_step=0.5", "prune.max_drop=1.0",
                 "prune.figures=false"]) == 0
    curve = pd.read_parquet(sweep / "0" / "prune_curve.parquet")
    first = curve[curve.prune_step == 1].removed.iloc[0].split(",")
    assert {"L0H1", "L1H1", "L0H2"} <= set(first) and len(first) == 4
    assert set(first) - {"L0H1", "L1H1", "L0H2"} <= {"L1H2", "L1H3"}
    assert "L0H0" not in first  # seed 0's own least important head survives: the ranking is the average
    report = json.loads((sweep / "0" / "prune.json").read_text())
    assert "seed_avg-ft0" in report and set(curve.ranking) == {"seed_avg"}


def test_seed_avg_is_refused_outside_a_sweep(run_copy, capsys):
    _importance(run_copy, "run", SEED0)
    before = file_listing(run_copy)
    assert main([str(run_copy), "prune.ranking=seed_avg"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "prune.ranking='seed_avg'" in err and "sweep folder" in err
    assert file_listing(run_copy) == before


def test_seed_avg_is_refused_when_the_other_seeds_lack_importance(sweep, capsys):
    (sweep / "1" / "head_importance.parquet").unlink()
    before = file_listing(sweep)
    assert main([str(sweep / "0"), "prune.ranking=seed_avg"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "head_importance.parquet" in err
    assert file_listing(sweep) == before
