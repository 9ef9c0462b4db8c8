"""`headlab-distill` end to end on a tiny teacher run dir: an ordinary run with its own loss terms,
a zero-weight student bit-identical to a plain run, and one-line errors that leave nothing behind."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import torch

from headlab.tasks.train import train
from headlab.errors import ConfigError
from headlab.store import read_table
from tests._runs import compose_train_config, train_in_process

DISTILL = ["+distill=default", "trainer.log_every_n_steps=1"]


@pytest.fixture(scope="module")
def teacher(tmp_path_factory, compose_tiny) -> Path:
    """A tiny headlab run on the whole tiny train split: the teacher of every test here."""
    run = tmp_path_factory.mktemp("teacher") / "run"
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train(compose_tiny(run, "model.n_heads=4", "callbacks.head_metrics.figures=false"))
    finally:
        torch.set_num_threads(before)
    return run


def _student(tiny_config, run: Path, teacher: Path, *extra: str):
    return tiny_config(run, *DISTILL, f"teacher={teacher}", *extra)


def test_student_is_an_ordinary_run_whose_loss_is_the_sum_of_its_terms(tmp_path, tiny_config, teacher, one_thread):
    run = tmp_path / "student"
    summary = train(_student(tiny_config, run, teacher, "distill.labels=200", "distill.alpha=0.5", "distill.beta=2"))
    assert summary["status"] == "completed" and summary["data"]["n_train"] == 200
    assert 0 <= summary["test_f1"] <= 1 and summary["best"]["test_f1"] == summary["test_f1"]
    rows = pd.read_csv(run / "metrics.csv").dropna(subset=["train/loss_kd"])
    assert len(rows) == 6  # one row per training step
    total = rows["train/loss_ce"] + 0.5 * rows["train/loss_kd"] + 2 * rows["train/loss_attn"]
    assert (rows["train/loss"] - total).abs().max() < 1e-5
    assert (rows["train/loss_kd"] > 0).all() and (rows["train/loss_attn"] > 0).all()
    assert set(read_table(run / "head_metrics.parquet").layer) == {0, 1}  # heads measured as in any run
    from headlab.reload import load_network

    student = load_network(run / "checkpoints" / "last.ckpt")  # no teacher weights inside
    taught = json.loads((teacher / "summary.json").read_text())
    assert student.config.n_heads == 2 and student.config.vocab_size == taught["data"]["vocab_size"]
    # the teacher scored on the student's test batches: the student reads the teacher's data settings, so
    # this is the teacher's own test of its best checkpoint (its trainer, its metrics), to float precision
    assert summary["test_teacher_f1"] == pytest.approx(taught["test_f1"], abs=1e-6)
    assert summary["test_teacher_acc"] == pytest.approx(taught["test_acc"], abs=1e-6)
    assert summary["best"]["test_teacher_f1"] == summary["test_teacher_f1"]
    from headlab.sweep.aggregate import run_table
    from headlab.sweep.runs import load_run

    row = run_table([load_run(run)], pd.DataFrame({"job": [load_run(run).job]}), pd.DataFrame()).iloc[0]
    assert row["test_teacher_f1"] == pytest.approx(taught["test_f1"], abs=1e-6)  # sweep_runs.csv, C11's prerequisite


def test_zero_weights_and_all_labels_train_exactly_the_plain_run(tmp_path, tiny_config, teacher, one_thread):
    plain, zero = tmp_path / "plain", tmp_path / "zero"
    quiet = ("callbacks.head_metrics.figures=false", "seed=3")
    a = train(tiny_config(plain, *quiet))
    b = train(_student(tiny_config, zero, teacher, *quiet, "distill.labels=null", "distill.alpha=0", "distill.beta=0"))
    sa = torch.load(plain / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
    sb = torch.load(zero / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    assert (a["test_acc"], a["test_f1"], a["val_loss"]) == (b["test_acc"], b["test_f1"], b["val_loss"])
    pd.testing.assert_frame_equal(read_table(plain / "head_metrics.parquet").drop(columns="run_id"),
                                  read_table(zero / "head_metrics.parquet").drop(columns="run_id"))


@pytest.mark.parametrize("extra, key", [
    (("teacher=/nonexistent/run",), "teacher"),                  # missing teacher
    (("data.seed=3",), "teacher"),                               # other data split: other vocabulary
    (("distill.labels=100000",), "train_labels"),                # more labels than the train split has
    (("distill.layer_map=[0,5]",), "distill.layer_map"),         # teacher has 2 layers
    (("distill.head_map=mean", "model.n_heads=3", "model.d_model=36"), "distill.head_map"),  # 4 heads onto 3
])
def test_mistakes_fail_before_training_and_leave_nothing(tmp_path, tiny_config, teacher, extra, key):
    run = tmp_path / "bad"
    with pytest.raises(ConfigError, match=key):
        train(_student(tiny_config, run, teacher, "distill.labels=200", *extra))  # a later teacher= wins
    assert not run.exists()


def test_vocabulary_mismatch_names_both_sizes(tmp_path, tiny_config, teacher):
    with pytest.raises(ConfigError, match=r"teacher .*vocab\.json has \d+ tokens, the student's data \d+"):
        train(_student(tiny_config, tmp_path / "bad", teacher, "distill.labels=200", "data.seed=3"))


@pytest.mark.parametrize("args, key", [
    (("teacher=/x", "distill.layer_map=middle"), "distill.layer_map"),
    ((), "teacher"),
])
def test_console_script_errors_are_one_line_exit_2(tmp_path, args, key, monkeypatch, capfd):
    result = train_in_process(tmp_path, monkeypatch, capfd, f"hydra.run.dir={tmp_path / 'run'}",
                              f"paths.log_dir={tmp_path}", "data=synthetic", *args, prog="headlab-distill")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and key in lines[0], lines
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("variant, alpha, beta, layer_map", [
    ("ce", 0.0, 0.0, "uniform"), ("logits", 0.5, 0.0, "uniform"),
    ("logits_attn_last", 0.5, 1.0, "last"), ("logits_attn_first_middle", 0.5, 1.0, "first_middle"),
    ("attn_last", 0.0, 1.0, "last"), ("attn_first_middle", 0.0, 1.0, "first_middle"),
])
def test_a_variant_overrides_the_default_selection_wherever_it_stands(tmp_path, variant, alpha, beta, layer_map):
    for order in (["+distill=default", f"distill={variant}"], [f"distill={variant}", "+distill=default"]):
        cfg = compose_train_config(tmp_path / "run", [*order, "teacher=/t"])  # a sweep puts its params first
        assert (cfg.module.alpha, cfg.module.beta, cfg.module.layer_map) == (alpha, beta, layer_map)
        assert cfg.data.train_labels == 1000 and cfg.module._target_ == "headlab.distill.module.DistillModule"


def test_the_selection_goes_after_the_flags_and_before_the_first_override():
    from headlab.cli.distill import SELECT, with_selection

    assert with_selection(["-m", "sweep=distill", "teacher=x"]) == ["-m", SELECT, "sweep=distill", "teacher=x"]
    assert with_selection(["--help"]) == ["--help", SELECT]


def test_unlabelled_rest_is_trained_on_by_the_student_only(tmp_path, tiny_config, teacher, one_thread):
    summary = train(_student(tiny_config, tmp_path / "student", teacher, "distill.labels=100", "distill.unlabelled=true",
                             "callbacks.head_metrics.figures=false"))
    assert summary["status"] == "completed"
    assert summary["data"]["n_train"] == 640 and summary["data"]["n_train_labelled"] == 100
    with pytest.raises(ConfigError, match="data.train_unlabelled"):  # a plain run has no use for label-less rows
        train(tiny_config(tmp_path / "plain", "+data.train_labels=100", "+data.train_unlabelled=true"))
    assert not (tmp_path / "plain").exists()
