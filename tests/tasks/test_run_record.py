"""The run's record: resume refuses changed settings and keeps every segment's config (issue 16.4),
a config mistake leaves no run dir behind (16.5), and summary.json says which model each number
comes from (16.2)."""

from __future__ import annotations

import json

import pytest
import yaml

from headlab.analysis import ROLES
from headlab.store import RunDir
from headlab.tasks.train import train
from headlab.errors import ConfigError
from tests._runs import summary, train_in_process

QUIET = ("callbacks.head_metrics.figures=false", "test=false")


@pytest.fixture(scope="module")
def finished(tmp_path_factory, compose_tiny):
    run = tmp_path_factory.mktemp("record") / "run"
    train(compose_tiny(run, *QUIET))
    return run


def test_resume_with_a_changed_setting_is_refused_naming_the_keys(finished, compose_tiny):
    before = {p: (finished / p).read_bytes() for p in ("summary.json", "checkpoints/last.ckpt")}
    with pytest.raises(ConfigError) as info:
        train(compose_tiny(finished, *QUIET, "resume=true", "optim.lr=0.5", "trainer.max_epochs=2"))
    message = str(info.value)
    assert "optim.lr: run 0.001 vs now 0.5" in message and "optim.optimizer.lr" not in message  # it follows optim.lr
    assert "resume_allow=[" in message and "max_epochs" not in message  # extending training is allowed
    assert "\n" not in message
    assert {p: (finished / p).read_bytes() for p in before} == before  # nothing of the run was touched


def test_listed_keys_may_change_and_every_segment_keeps_its_config(tmp_path, compose_tiny):
    run = tmp_path / "run"
    train(compose_tiny(run, *QUIET))
    result = train(compose_tiny(run, *QUIET, "resume=true", "trainer.max_epochs=2", "callbacks.head_metrics.every_n_steps=3",
                                "resume_allow=[callbacks.head_metrics]"))
    assert result["status"] == "completed" and result["resumed_from"]["step"] == 6 and result["global_step"] == 12
    assert [s["start_step"] for s in result["config_history"]] == [0, 6]
    first, second = (yaml.safe_load((run / "segments" / n / "config.yaml").read_text()) for n in ("0", "1"))
    cadence = [c["callbacks"]["head_metrics"]["every_n_steps"] for c in (first, second)]
    assert cadence == [2, 3] and [first["trainer"]["max_epochs"], second["trainer"]["max_epochs"]] == [1, 2]
    # a third segment compares against the second: every 3 steps is now the run's own cadence
    third = train(compose_tiny(run, *QUIET, "resume=true", "trainer.max_epochs=3", "callbacks.head_metrics.every_n_steps=3"))
    assert third["global_step"] == 18 and len(third["config_history"]) == 3


def test_a_refused_resume_through_main_keeps_the_first_starts_hydra_config(tmp_path, monkeypatch, capfd):
    run = tmp_path / "run"
    tiny = ["debug=fast", "data=synthetic", "data.synthetic.n=400", "data.probe_size=16", "model.d_model=16",
            "model.n_heads=2", "callbacks.head_metrics.figures=false", f"hydra.run.dir={run}"]
    assert train_in_process(tmp_path, monkeypatch, capfd, *tiny).returncode == 0
    hydra_before = {p.name: p.read_bytes() for p in (run / ".hydra").iterdir()}
    result = train_in_process(tmp_path, monkeypatch, capfd, *tiny, "resume=true", "optim.lr=0.5")
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1].startswith("headlab-train: error: invalid config resume=True: expected "
                                                    "the settings the run was trained with (optim.lr: run 0.001 vs now 0.5")
    assert {p.name: p.read_bytes() for p in (run / ".hydra").iterdir()} == hydra_before
    assert summary(run)["status"] == "completed"


def test_a_config_mistake_leaves_logs_runs_unchanged(tmp_path, monkeypatch, capfd):
    runs = tmp_path / "logs" / "runs"
    runs.mkdir(parents=True)
    (runs / "earlier").mkdir()
    result = train_in_process(tmp_path, monkeypatch, capfd, "data=synthetic", "model.n_heads=3")
    assert result.returncode == 2 and "model.n_heads=3" in result.stderr
    assert [p.name for p in runs.iterdir()] == ["earlier"]


def test_a_mistake_found_while_loading_data_removes_the_fresh_run_dir(tmp_path, tiny_config):
    run = tmp_path / "run"
    with pytest.raises(ConfigError, match="data.probe_size"):
        train(tiny_config(run, "data.probe_size=5000"))  # larger than the validation split: known after loading
    assert not run.exists()


def test_a_mistake_never_removes_a_dir_that_held_other_files(tmp_path, tiny_config):
    run = tmp_path / "mine"
    run.mkdir()
    (run / "notes.txt").write_text("keep me")
    with pytest.raises(ConfigError):
        train(tiny_config(run, "data.probe_size=5000"))
    assert (run / "notes.txt").read_text() == "keep me"


def test_summary_says_which_model_each_number_comes_from(tmp_path, tiny_config, caplog):
    run = tmp_path / "run"
    with caplog.at_level("INFO", logger="headlab.train"):
        train(tiny_config(run, "trainer.max_epochs=2", "optim.lr=1e-9", "callbacks.head_metrics.figures=false"))
    # the run ends with its head report: one line per head (2 layers x 2 heads), in words, from [CLS]
    report = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("which head does what")).splitlines()
    assert report[0] == f"which head does what (headlab-report {run}):" and len(report) == 5
    assert sorted(line.split(":")[0] for line in report[1:]) == ["  L0H0", "  L0H1", "  L1H0", "  L1H1"]
    assert all(" from [CLS] " in line and "role " in line for line in report[1:])
    facts = json.loads((run / "summary.json").read_text())
    best, last = facts["best"], facts["last"]
    assert best["step"] == 6 and best["checkpoint"].endswith("best-epoch00-step000006.ckpt")
    assert last["step"] == 12 and last["checkpoint"] == str(run / "checkpoints" / "last.ckpt") == facts["last_checkpoint"]
    assert {k: facts[k] for k in ("val_acc", "val_f1", "test_acc", "test_f1", "best_step")} == \
        {k: best[k] for k in ("val_acc", "val_f1", "test_acc", "test_f1")} | {"best_step": 6}
    assert last["roles"] == facts["final_roles"] and len(last["roles"]) == 2  # layers x heads
    # the task-aware roles (from [CLS]: cls pooling is the default), as names, and the table's ids agree
    assert facts["task_queries"] == "[CLS]" and last["task_roles"] == facts["final_task_roles"]
    table = RunDir(run).head_metrics()
    codes = table[(table["metric"] == "role@task") & (table["step"] == last["step"])].sort_values(["layer", "head"])
    assert [ROLES[int(c)] for c in codes["value"]] == [r for layer in facts["final_task_roles"] for r in layer]
    metrics = __import__("pandas").read_csv(run / "metrics.csv")
    epoch_end_val = metrics.loc[metrics["val/acc"].notna() & (metrics["step"] == 11), "val/acc"]
    assert last["val_acc"] == pytest.approx(float(epoch_end_val.iloc[0]))


def test_summary_records_the_commit_of_the_code_that_ran(finished):
    import subprocess

    # headlab.reproduce.provenance reads it to name the commit a verdict's evidence came from
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD"], check=False).returncode != 0
    assert summary(finished)["git_commit"] == head + ("-dirty" if dirty else "")
