"""Per-domain accuracy: what a run records when its batches carry domain ids, and
domain_accuracy.csv (per config and domain, mean and 95 % t-interval over seeds)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from headlab.tasks.train import train
from headlab.data import TextDataModule
from headlab.sweep import aggregate_sweep
from headlab.analysis.roles import ROLES
from headlab.sweep.domains import (
    DOMAIN_CSV,
    ROLES_CSV,
    ROLES_RUNS_CSV,
    domain_table,
    format_domain_accuracy,
    roles_table,
    run_domain_accuracy,
)
from headlab.sweep.runs import Run
from headlab.store import SweepDir
from tests._runs import TINY, compose_train_config


def run(job: str, **accs: float) -> Run:
    return Run(job, Path(job), "completed", summary={"status": "completed", **accs})


def test_domain_table_means_and_t_intervals_per_config_and_domain():
    runs = {"k=0": [run("0", test_acc_domain_a=0.6, val_acc_domain_a=0.5, test_acc_domain_b=0.9),
                    run("1", test_acc_domain_a=0.7, val_acc_domain_a=0.55, test_acc_domain_b=0.8),
                    run("2", test_acc_domain_a=0.8, val_acc_domain_a=0.6)],
            "k=1": [run("3", test_acc_domain_a=1.0)]}
    tags = pd.DataFrame({"job": list("0123"), "config_label": ["k=0"] * 3 + ["k=1"]})
    table = domain_table(runs, tags).set_index(["config", "domain"])
    a = table.loc[("k=0", "a")]
    half = stats.t.ppf(0.975, 2) * np.std([0.6, 0.7, 0.8], ddof=1) / math.sqrt(3)
    assert a["test_acc_mean"] == pytest.approx(0.7)
    assert (a["test_acc_ci95_low"], a["test_acc_ci95_high"]) == (pytest.approx(0.7 - half), pytest.approx(0.7 + half))
    assert a["val_acc_mean"] == pytest.approx(0.55) and a["test_acc_n_seeds"] == 3
    b = table.loc[("k=0", "b")]
    assert b["test_acc_n_seeds"] == 2 and b["test_acc_mean"] == pytest.approx(0.85)  # seed 2 has no b
    assert b["test_acc_ci95_high"] == 1.0                                           # clipped to [0, 1]
    one = table.loc[("k=1", "a")]
    assert one["test_acc_mean"] == 1.0 and math.isnan(one["test_acc_ci95_low"])     # one seed: no interval
    assert "k=0" in format_domain_accuracy(domain_table(runs, tags))


def test_runs_without_domains_give_no_table(tmp_path):
    runs = {"c": [run("0", test_acc=0.9)]}
    assert domain_table(runs, pd.DataFrame({"job": ["0"], "config_label": ["c"]})).empty


# ---------------------------------------------------------------- a real 2-job sweep on multidomain
MULTIDOMAIN = [o for o in TINY if not o.startswith("data.")] + [
    "data=multidomain", "data.multidomain.n=300", "data.probe_size=32", "data.batch_size=32",
    "callbacks.head_metrics.query_tokens=[]", "threads=1"]
MULTIDOMAIN.remove("data=synthetic")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    """Jobs 0 and 1: a shared and a split (k=1) model, seed 0, trained the way headlab-train does."""
    root = tmp_path_factory.mktemp("domains") / "multirun"
    for job, k in enumerate((0, 1)):
        overrides = [f"model.domain_split_layers={k}", "seed=0"]
        train(compose_train_config(root / str(job), MULTIDOMAIN + overrides))
        (root / str(job) / ".hydra").mkdir(parents=True, exist_ok=True)
        (root / str(job) / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    return root


def test_a_run_with_domain_ids_records_each_domains_accuracy(sweep):
    summary = json.loads((sweep / "0" / "summary.json").read_text())
    accs = run_domain_accuracy(Run("0", sweep / "0", "completed", summary=summary))
    assert sorted(accs) == ["first_last", "previous"] == summary["data"]["domains"]
    # the domains' accuracies, weighted by their example counts, are the overall accuracy
    frame = pd.read_csv(sweep / "0" / "metrics.csv")
    assert {"val/acc_domain_previous", "val/acc_domain_first_last"} <= set(frame.columns)
    data = TextDataModule(  # the split the run used
        source="multidomain", multidomain={"n": 300, "domains": ["previous", "first_last"]},
        max_len=40, batch_size=32, probe_size=32, seed=0)
    for split in ("val", "test"):
        ids = data._data().splits[split].domain_ids
        counts = [ids.count(i) for i in range(2)]
        weighted = sum(accs[name][split] * n for name, n in zip(data.domain_names, counts)) / sum(counts)
        assert weighted == pytest.approx(summary[f"{split}_acc"], abs=1e-6)


def test_headlab_aggregate_writes_accuracy_per_config_and_domain(sweep, tmp_path):
    result = aggregate_sweep(SweepDir(sweep), tmp_path / "out", figures=False)
    assert DOMAIN_CSV in {p.name for p in result.written}
    table = pd.read_csv(tmp_path / "out" / DOMAIN_CSV)
    assert len(table) == 4                                   # 2 configs x 2 domains
    for job, config in enumerate(sorted(table["config"].unique())):
        summary = json.loads((sweep / str(job) / "summary.json").read_text())
        rows = table[table["config"] == config].set_index("domain")
        for domain in ("previous", "first_last"):            # one seed: the mean is that run's number
            assert rows.loc[domain, "test_acc_mean"] == pytest.approx(summary[f"test_acc_domain_{domain}"])


def test_roles_table_counts_heads_per_role_over_seeds():
    per_run = pd.DataFrame([
        {"job": "0", "domain": "a", "layer": 0, "head": 0, "role": "previous_token"},
        {"job": "0", "domain": "a", "layer": 0, "head": 1, "role": "previous_token"},
        {"job": "1", "domain": "a", "layer": 0, "head": 0, "role": "previous_token"},
        {"job": "1", "domain": "a", "layer": 0, "head": 1, "role": "sink"},
    ])
    runs = {"k=1": [run("0"), run("1")]}
    table = roles_table(per_run, runs, pd.DataFrame({"job": ["0", "1"], "config_label": ["k=1"] * 2}))
    by_role = table.set_index("role")
    assert by_role.loc["previous_token", "heads_mean"] == 1.5 and by_role.loc["sink", "heads_mean"] == 0.5
    half = stats.t.ppf(0.975, 1) * np.std([2, 1], ddof=1) / math.sqrt(2)
    assert by_role.loc["previous_token", "heads_ci95_high"] == pytest.approx(1.5 + half)
    assert by_role.loc["sink", "heads_ci95_low"] == 0.0          # clipped: a head count is >= 0


def test_split_runs_get_roles_per_domain_pipeline(sweep, tmp_path):
    aggregate_sweep(SweepDir(sweep), tmp_path / "out", figures=False)
    per_run = pd.read_csv(tmp_path / "out" / ROLES_RUNS_CSV, dtype={"job": str})
    assert set(per_run["job"]) == {"1"}                          # the shared (k=0) model has one pipeline
    assert len(per_run) == 2 * 2 * 2 and set(per_run["role"]) <= set(ROLES)  # domains x layers x heads
    table = pd.read_csv(tmp_path / "out" / ROLES_CSV)
    assert (table.groupby(["domain", "layer"])["heads_mean"].sum() == 2).all()  # every head has one role
