"""End to end: a composed config trains on CPU and writes the whole run-output contract."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from headlab.analysis import METRIC_NAMES, ROLES
from headlab.tasks.train import train
from headlab.errors import ConfigError
from headlab.store import read_table


def test_train_writes_the_run_contract(tmp_path, tiny_config):
    run = tmp_path / "run"
    summary = train(tiny_config(run, "figures=true"))  # the contract includes the figures (TINY leaves them out)

    assert summary["status"] == "completed"
    on_disk = json.loads((run / "summary.json").read_text())
    for key in ("status", "val_acc", "val_f1", "test_acc", "test_f1", "best_step", "wall_s", "measure_s",
                "swept", "config_digest", "probe_digest"):
        assert on_disk[key] is not None, key
    assert 0.0 <= on_disk["val_acc"] <= 1.0
    assert on_disk["swept"]["model.n_heads"] == 2 and on_disk["swept"]["seed"] == 42

    metrics = read_table(run / "head_metrics.parquet")
    assert list(metrics.columns) == ["run_id", "step", "epoch", "layer", "head", "metric", "value", "role_name"]
    named = metrics[metrics.metric.str.match(r"^role(@|$)")]  # every role row (role, role@task, ...) names its role, only those
    assert named.role_name.tolist() == [ROLES[int(v)] for v in named.value] and metrics.role_name.notna().sum() == len(named)
    # step 0, the early cadence (2, 4) and the epoch end (6) are all measured, each exactly once
    assert sorted(metrics.step.unique()) == [0, 2, 4, 6]
    assert not metrics.duplicated(["step", "layer", "head", "metric"]).any()
    assert set(METRIC_NAMES) | {"role", "dist_from_init", "grad_norm", "cum_grad_norm"} <= set(metrics.metric)
    assert set(metrics.layer) == {0, 1} and set(metrics["head"]) == {0, 1}
    roles = metrics[metrics.metric == "role"].value
    assert roles.between(0, len(ROLES) - 1).all()
    # distance from init is 0 at step 0 and grows once the optimiser moves the weights
    dist = metrics[metrics.metric == "dist_from_init"].groupby("step").value.mean()
    assert dist.loc[0] == 0.0 and dist.loc[6] > 0.0
    cum = metrics[metrics.metric == "cum_grad_norm"].groupby("step").value.mean()
    assert cum.is_monotonic_increasing and cum.loc[0] == 0.0

    pairs = read_table(run / "head_pairs.parquet")
    assert {"js", "corr", "q_cosine", "qk_cosine", "q_subspace"} <= set(pairs.metric)
    js = pairs[(pairs.metric == "js") & (pairs.step == 6) & (pairs.layer == 0)]
    assert js[js.head_a == js.head_b].value.abs().max() == 0.0

    csv = pd.read_csv(run / "metrics.csv")
    assert {"heads/L1H1/entropy", "heads/entropy/L1H1"} & set(csv.columns) and "val/acc" in csv.columns  # naming: H2
    assert (run / "checkpoints" / "last.ckpt").is_file()
    assert (run / "vocab.json").is_file()
    maps = np.load(run / "attention_maps.npz")
    assert maps["mean_pattern"].shape[:2] == (2, 2)
    figures = sorted(p.name for p in (run / "figures").glob("*.png"))
    assert figures == ["attention_grid.png", "head_similarity.png", "metric_trajectories.png", "role_timeline.png"]

    # the callback accounts for its own time: the measurements happen inside its hooks, the
    # per-step gradient norms and the writes are parts of it, the figures come on top
    t = on_disk
    assert t["head_metrics_s"] >= t["measure_s"] + t["head_metrics_grad_norm_s"] + t["head_metrics_write_s"] - 1e-3
    assert t["head_metrics_grad_norm_s"] > 0 and t["head_metrics_write_s"] > 0 and t["figures_s"] > 0
    assert t["head_metrics_s"] + t["figures_s"] < t["wall_s"]


def test_log_spaced_early_cadence_doubles_from_every_n_steps(tmp_path, tiny_config):
    run = tmp_path / "run"
    train(tiny_config(run, "callbacks.head_metrics.every_n_steps=1", "callbacks.head_metrics.early_steps=5",
                      "callbacks.head_metrics.early_spacing=log", "callbacks.head_metrics.figures=false"))
    steps = sorted(read_table(run / "head_metrics.parquet").step.unique())
    assert steps == [0, 1, 2, 4, 6]  # 3 and 5 are skipped; 6 is the epoch end


def test_same_seed_gives_identical_head_metrics(tmp_path, tiny_config):
    tables = []
    for name in ("a", "b"):
        run = tmp_path / name
        train(tiny_config(run, "trainer.deterministic=true", "callbacks.head_metrics.figures=false", "test=false"))
        tables.append(read_table(run / "head_metrics.parquet").drop(columns="run_id"))
    pd.testing.assert_frame_equal(tables[0], tables[1], check_exact=True)


def test_different_seed_changes_head_metrics(tmp_path, tiny_config):
    values = []
    for seed in (1, 2):
        run = tmp_path / f"s{seed}"
        train(tiny_config(run, f"seed={seed}", "callbacks.head_metrics.figures=false", "test=false"))
        table = read_table(run / "head_metrics.parquet")
        values.append(table[table.metric == "entropy"].value.to_numpy())
    assert not np.allclose(values[0], values[1])


@pytest.mark.parametrize(
    "override, key",
    [
        ("model.n_heads=3", "model.n_heads"),
        ("model.pos_encoding=spiral", "model.pos_encoding"),
        ("optim.lr=0", "optim.lr"),
        ("data.max_len=1", "data.max_len"),
        ("callbacks.head_metrics.every_n_steps=0", "every_n_steps"),
        ("callbacks.head_metrics.early_spacing=cubic", "early_spacing"),
    ],
)
def test_config_mistakes_fail_before_training_with_the_key(tmp_path, tiny_config, override, key):
    run = tmp_path / "bad"
    with pytest.raises(ConfigError, match=key):
        train(tiny_config(run, override))
    assert not (run / "checkpoints").exists()


def test_resume_continues_without_duplicating_or_losing_measurements(tmp_path, tiny_config):
    run = tmp_path / "run"
    quiet = ("callbacks.head_metrics.figures=false", "test=false")
    train(tiny_config(run, *quiet))
    first = read_table(run / "head_metrics.parquet")
    assert first.step.max() == 6

    summary = train(tiny_config(run, *quiet, "resume=true", "trainer.max_epochs=2"))
    assert summary["global_step"] == 12
    table = read_table(run / "head_metrics.parquet")
    assert not table.duplicated(["step", "layer", "head", "metric"]).any()
    assert sorted(table.step.unique()) == [0, 2, 4, 6, 12]
    logged = pd.read_csv(run / "metrics.csv")
    assert logged.step.min() <= 6 and logged.step.max() == 12  # rows from before the restart survive
    # per segment: the epoch's validation and the best-checkpoint validation after fit
    assert sorted(logged.loc[logged["val/acc"].notna(), "epoch"]) == [0, 1, 1, 2]
    # what was measured before the restart is kept as it was
    before = table[table.step <= 4].reset_index(drop=True)
    pd.testing.assert_frame_equal(before, first[first.step <= 4].reset_index(drop=True))


def test_resume_without_a_checkpoint_is_a_config_error(tmp_path, tiny_config):
    with pytest.raises(ConfigError, match="resume"):
        train(tiny_config(tmp_path / "empty", "resume=true"))


def test_tensorboard_and_offline_wandb_loggers_get_the_head_scalars(tmp_path, tiny_config):
    run = tmp_path / "run"
    train(tiny_config(run, "logger=many", "callbacks.head_metrics.figures=false", "test=false"))
    assert list((run / "tensorboard").rglob("events.out.tfevents.*"))
    offline = list((run / "wandb").glob("offline-run-*"))
    assert len(offline) == 1
    import wandb

    assert wandb.run is None  # finished, so the next job in a multirun starts its own run


def test_zero_epochs_is_a_config_error(tmp_path, tiny_config):
    with pytest.raises(ConfigError, match="trainer.max_epochs"):
        train(tiny_config(tmp_path / "r", "trainer.max_epochs=0"))


def test_query_tokens_measure_only_those_queries(tmp_path, tiny_config):
    """`prev_score@y` equals A[i, i-1] averaged by hand over the probe's y queries, through the
    trained network reloaded from its checkpoint; [CLS] queries have no previous key."""
    import torch

    from headlab.data import TextDataModule
    from headlab.reload import load_network

    run = tmp_path / "run"
    cfg = tiny_config(run, "callbacks.head_metrics.query_tokens=[y,'[CLS]']", "callbacks.head_metrics.figures=false",
                      "test=false")
    train(cfg)
    table = read_table(run / "head_metrics.parquet")
    last = table[table.step == table.step.max()]
    for name in ("prev_score@y", "role@y", "entropy@y", "self_score@[CLS]", "role@[CLS]"):
        assert set(table[table.metric == name].step) == set(table.step), name

    dm = TextDataModule(**{k: v for k, v in cfg.data.items() if k != "_target_"})
    probe = dm.probe_set()
    y_id = dm.tokenizer.tokens.index("y")
    net = load_network(run / "checkpoints" / "last.ckpt")
    prev, cls_self = {}, {}
    with torch.no_grad():
        for ids in probe.input_ids:
            patterns = net(torch.tensor([ids]), torch.ones(1, len(ids), dtype=torch.bool), return_patterns=True).patterns
            for layer, pattern in enumerate(patterns):
                for head in range(pattern.shape[1]):
                    a = pattern[0, head]
                    prev.setdefault((layer, head), []).extend(float(a[i, i - 1]) for i, t in enumerate(ids) if t == y_id)
                    cls_self.setdefault((layer, head), []).append(float(a[0, 0]))
    for (layer, head), values in prev.items():
        row = last[(last["layer"] == layer) & (last["head"] == head)].set_index("metric")["value"]
        assert row["prev_score@y"] == pytest.approx(np.mean(values), abs=1e-5)
        assert row["self_score@[CLS]"] == pytest.approx(np.mean(cls_self[(layer, head)]), abs=1e-5)
        assert np.isnan(row["prev_score@[CLS]"])
        assert row["prev_score@y"] != pytest.approx(row["prev_score"], abs=1e-6)  # not the all-query mean


def test_unknown_query_token_is_a_config_error(tmp_path, tiny_config):
    run = tmp_path / "run"
    with pytest.raises(ConfigError, match=r"query_tokens='Q'.*vocabulary"):
        train(tiny_config(run, "callbacks.head_metrics.query_tokens=[Q]", "callbacks.head_metrics.figures=false"))
    assert not (run / "head_metrics.parquet").exists() and not (run / "checkpoints").exists()


@pytest.mark.parametrize("value, expected", [("y", ["y"]), ("[CLS]", ["[CLS]"]), (["y", "."], ["y", "."]), (None, [])])
def test_query_tokens_accepts_one_token_or_a_list(value, expected):
    from headlab.lit.callbacks import HeadMetricsCallback

    assert HeadMetricsCallback(query_tokens=value).query_tokens == expected


@pytest.mark.parametrize("value", [["y", "y"], [""], [1]])
def test_bad_query_tokens_are_config_errors(value):
    from headlab.lit.callbacks import HeadMetricsCallback

    with pytest.raises(ConfigError, match="query_tokens"):
        HeadMetricsCallback(query_tokens=value)


def test_one_override_swaps_the_optimiser(tmp_path, tiny_config):
    """optim=sgd: Hydra hands the module a partial SGD; the checkpoint's optimiser state is SGD's
    (momentum buffers, the config's lr and momentum), with the same warm-up + cosine schedule."""
    from headlab.lit.checkpointing import load_checkpoint

    run = tmp_path / "run"
    train(tiny_config(run, "optim=sgd", "optim.lr=0.05", "callbacks.head_metrics.figures=false", "test=false"))
    checkpoint = load_checkpoint(run / "checkpoints" / "last.ckpt")
    assert checkpoint["hyper_parameters"]["optimizer"]["_target_"] == "torch.optim.sgd.SGD"
    state = checkpoint["optimizer_states"][0]
    decay, no_decay = state["param_groups"]
    assert decay["momentum"] == 0.9 and decay["nesterov"] and decay["initial_lr"] == 0.05 and no_decay["weight_decay"] == 0.0
    assert all("momentum_buffer" in s for s in state["state"].values())
    assert checkpoint["hyper_parameters"]["scheduler"]["schedule"] == "cosine"
