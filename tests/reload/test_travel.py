"""Run folders that travel: a `data=files` run trained with a RELATIVE data path, then moved, works from
another directory (importance, prune, doctor, predict); old runs with relative paths resolve against the
directory they started in; a data file that moved is found through HEADLAB_DATA_DIR, checked by its sha256."""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from headlab.errors import DataError
from headlab.reload import Predictor, load_network, predict, run_config, tokenize
from headlab.store import RunDir
from tests._runs import compose_train_config, train_keeping_threads

pytestmark = pytest.mark.usefixtures("one_thread")

LABELS = ("cat", "dog", "fox")
SMALL = ["data=files", "data.files.train=my.csv", "data.batch_size=16", "data.probe_size=6", "model.d_model=16",
         "model.n_heads=2", "model.n_layers=1", "trainer.max_steps=3", "trainer.enable_progress_bar=false",
         "trainer.enable_model_summary=false", "callbacks.progress_bar=null", "callbacks.head_metrics.every_n_steps=1",
         "callbacks.head_metrics.early_steps=2", "callbacks.head_metrics.figures=false", "test=false"]


def write_csv(path: Path, n: int = 48, columns: tuple[str, str] = ("text", "label")) -> Path:
    """n rows 'the <colour> one is <label>', labels cycling cat, dog, fox."""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(columns)
        for i in range(n):
            out.writerow([f"the {('red', 'blue', 'green')[i * 7 % 3]} one is {LABELS[i % 3]}", LABELS[i % 3]])
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A run trained from `start/` with data.files.train=my.csv (relative), then moved to `moved/run`."""
    root = tmp_path_factory.mktemp("travel")
    start = root / "start"
    start.mkdir()
    write_csv(start / "my.csv")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(start)
        cfg = compose_train_config(root / "logs" / "run", SMALL)
        train_keeping_threads(cfg)
    (root / "moved").mkdir()
    return Path(shutil.move(root / "logs" / "run", root / "moved" / "run"))


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    away = tmp_path / "elsewhere"
    away.mkdir()
    monkeypatch.chdir(away)
    return away


def test_the_run_records_its_data_absolute_with_digest_and_label_names(trained):
    data_file = trained.parent.parent / "start" / "my.csv"
    saved = OmegaConf.load(RunDir(trained).config_path)
    assert saved.data.files.train == str(data_file)  # absolute, though typed as my.csv
    summary = json.loads((trained / "summary.json").read_text())
    assert summary["data"]["files"]["train"] == str(data_file)
    assert summary["data"]["files_sha256"] == {"train": hashlib.sha256(data_file.read_bytes()).hexdigest()}
    assert summary["data"]["label_names"] == list(LABELS)
    assert summary["start_dir"] == str(data_file.parent)


def test_importance_prune_doctor_view_report_work_after_the_move_from_another_directory(trained, elsewhere, tmp_path, capsys):
    from headlab.cli.doctor import main as doctor
    from headlab.cli.importance import main as importance
    from headlab.cli.prune import main as prune
    from headlab.cli.report import main as report
    from headlab.cli.view import main as view

    run = Path(shutil.copytree(trained, tmp_path / "copy"))
    assert importance([str(run), "importance.figures=false", "importance.curves=false"]) == 0
    assert (run / "head_importance.parquet").is_file()
    assert prune([str(run), "prune.figures=false"]) == 0
    assert (run / "prune_curve.parquet").is_file()
    assert doctor([str(run)]) in (0, 1)  # 1 = a check failed; 2 would be an unusable run
    assert (run / "doctor.json").is_file()
    assert view([str(run)]) == 0 and (run / "view.html").is_file()
    assert report([str(run)]) == 0
    out, err = capsys.readouterr()
    assert "not found" not in err and "L0H1:" in out


def test_an_old_run_with_a_relative_path_resolves_against_where_it_started(trained, elsewhere, tmp_path):
    run = RunDir(shutil.copytree(trained, tmp_path / "old"))
    saved = OmegaConf.load(run.config_path)
    saved.data.files.train = "my.csv"  # as runs recorded it before paths were made absolute
    run.config_path.write_text(OmegaConf.to_yaml(saved))
    assert run_config(run).data.files.train == str(trained.parent.parent / "start" / "my.csv")


def test_a_moved_data_file_is_found_by_headlab_data_dir_and_checked_by_digest(trained, elsewhere, tmp_path, monkeypatch):
    original = trained.parent.parent / "start" / "my.csv"
    run = RunDir(shutil.copytree(trained, tmp_path / "run"))
    saved = OmegaConf.load(run.config_path)
    saved.data.files.train = str(tmp_path / "gone" / "my.csv")
    run.config_path.write_text(OmegaConf.to_yaml(saved))
    with pytest.raises(DataError, match=r"data.files.train of run .* is not there: .*HEADLAB_DATA_DIR=/that/folder"):
        run_config(run)
    (tmp_path / "now").mkdir()
    shutil.copy(original, tmp_path / "now" / "my.csv")
    monkeypatch.setenv("HEADLAB_DATA_DIR", str(tmp_path / "now"))
    assert run_config(run).data.files.train == str(tmp_path / "now" / "my.csv")
    (tmp_path / "now" / "my.csv").write_text((tmp_path / "now" / "my.csv").read_text() + "one more row,cat\n")
    with pytest.raises(DataError, match="differs from the data.files.train run .* trained on"):
        run_config(run)


def test_predict_equals_the_network_on_hand_tokenised_text(trained, elsewhere):
    vocab = json.loads((trained / "vocab.json").read_text())["tokens"]
    text = "the red one is fox"
    ids = [1] + [vocab.index(c) if c in vocab else 2 for c in text]  # [CLS]=1, then one id per character, [UNK]=2
    net = load_network(RunDir(trained).best_checkpoint())
    with torch.no_grad():
        expected = torch.softmax(net(torch.tensor([ids]), torch.ones(1, len(ids), dtype=torch.bool)).logits, -1)[0]
    [got, unknown] = predict(trained, [text, "ZZ"])
    assert list(got.probabilities) == list(LABELS)
    assert list(got.probabilities.values()) == pytest.approx(expected.tolist(), abs=1e-6)
    assert got.label == LABELS[int(expected.argmax())]
    assert (got.n_tokens, got.n_unknown) == (len(text) + 1, 0)
    assert (unknown.n_tokens, unknown.n_unknown) == (3, 2)  # [CLS] Z Z: Z never in training
    assert tokenize(trained, "the Z") == ["[CLS]", "t", "h", "e", " ", "[UNK]"]


def test_predict_refuses_a_bare_string_and_a_folder_that_is_no_run(trained, tmp_path):
    with pytest.raises(DataError, match="one string: predict"):
        Predictor(trained).predict("the red one")
    with pytest.raises(DataError, match="no such run directory"):
        predict(tmp_path / "nothing", ["x"])


def test_the_segment_and_hydra_copy_of_the_config_get_the_absolute_paths(tmp_path):
    """headlab-train's Hydra writes .hydra/config.yaml with the path as typed: the run's saved config
    (segments/0/ and .hydra/ after the first start) holds the absolute path train() recorded."""
    from headlab.tasks.history import record_segment

    run = RunDir(tmp_path / "run")
    run.hydra_dir.mkdir(parents=True)
    typed = {"data": {"files": {"train": "my.csv", "val": None}, "max_len": 8}, "model": {"max_len": "${data.max_len}"}}
    run.hydra_config_path.write_text(OmegaConf.to_yaml(OmegaConf.create(typed)))
    cfg = OmegaConf.create({"data": {"files": {"train": "/data/my.csv", "val": None}, "max_len": 8}, "model": {"max_len": 8}})
    record_segment(run, cfg, 0, [])
    for path in (run.path / "segments" / "0" / "config.yaml", run.hydra_config_path):
        saved = OmegaConf.load(path)
        assert saved.data.files.train == "/data/my.csv" and saved.data.files.val is None
        assert OmegaConf.to_container(saved.model) == {"max_len": "${data.max_len}"}  # interpolations kept


def test_resuming_a_run_recorded_with_a_relative_path_from_where_it_started_is_not_a_change(tmp_path, monkeypatch):
    from headlab.store import atomic_write_json
    from headlab.tasks.resume import _changed_settings

    monkeypatch.chdir(tmp_path)
    run = RunDir(tmp_path / "run")
    (run.path / "segments" / "0").mkdir(parents=True)
    atomic_write_json(run.path / "segments" / "0" / "resolved.json", {"data.files.train": "my.csv", "seed": 1})
    same = OmegaConf.create({"data": {"files": {"train": str(tmp_path / "my.csv")}}, "seed": 1})
    assert _changed_settings(same, run, extendable=True) == {}
    other = OmegaConf.create({"data": {"files": {"train": "/elsewhere/my.csv"}}, "seed": 1})
    assert _changed_settings(other, run, extendable=True) == {"data.files.train": ("my.csv", "/elsewhere/my.csv")}
