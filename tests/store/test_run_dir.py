"""RunDir on a run directory written by hand: every lookup has an answer known from the files the test wrote."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from omegaconf import DictConfig, OmegaConf

from headlab.errors import ConfigError, DataError
from headlab.lit.checkpointing import CheckpointError
from headlab.store import RunDir, append_part, head_metric_rows

SRC = Path(__file__).resolve().parents[2] / "src" / "headlab"
BEST = "best-epoch01-step000020.ckpt"


def _checkpoint(path: Path, step: int, epoch: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": {"w": torch.zeros(1)}, "global_step": step, "epoch": epoch}, path)


@pytest.fixture
def run_root(tmp_path) -> Path:
    """A finished run: two resumes' segments, three checkpoints at steps 10 / 20 / 30, a summary
    whose best checkpoint was recorded before the run dir moved, a dataset table and a file table."""
    root = tmp_path / "2026-12-01_10-00-00_000001"
    _checkpoint(root / "checkpoints" / "step000010.ckpt", 10, 0)
    _checkpoint(root / "checkpoints" / BEST, 20, 1)
    _checkpoint(root / "checkpoints" / "last.ckpt", 30, 2)
    (root / ".hydra").mkdir()
    (root / ".hydra" / "config.yaml").write_text("seed: 0\n")
    for segment, seed in (("0", 0), ("2", 2), ("10", 10)):  # 10 is the newest (numeric, not text order)
        (root / "segments" / segment).mkdir(parents=True)
        (root / "segments" / segment / "config.yaml").write_text(f"seed: {seed}\nlr: ${{optim.lr}}\n")
    (root / "segments" / "notes").mkdir()  # not a segment
    (root / "summary.json").write_text(json.dumps(
        {"status": "completed", "run_id": "run-7", "best_checkpoint": f"/elsewhere/run-7/checkpoints/{BEST}"}))
    append_part(root / "head_metrics.parquet", 30, head_metric_rows("run-7", 30, 2, [{"entropy": np.array([0.5, 0.25])}]))
    append_part(root / "head_metrics.parquet", 10, head_metric_rows("run-7", 10, 0, [{"entropy": np.array([1.0, 2.0])}]))
    pd.DataFrame({"step": [30, 30], "layer": [0, 0], "head": [1, 0], "metric": ["ablation_dloss"] * 2,
                  "value": [0.75, 0.125]}).to_parquet(root / "head_importance.parquet", index=False)
    return root


def test_each_file_of_the_contract_is_at_its_documented_place(run_root):
    run = RunDir(run_root)
    expected = {
        run.summary_path: "summary.json", run.vocab_path: "vocab.json", run.metrics_csv_path: "metrics.csv",
        run.train_log_path: "train.log", run.head_metrics_path: "head_metrics.parquet",
        run.head_pairs_path: "head_pairs.parquet", run.attention_maps_path: "attention_maps.npz",
        run.probe_patterns_dir: "probe_patterns", run.view_path: "view.html",
        run.interventions_path: "interventions.json", run.head_importance_path: "head_importance.parquet",
        run.importance_curves_path: "importance_curves.parquet", run.importance_report_path: "importance.json",
        run.prune_curve_path: "prune_curve.parquet", run.prune_report_path: "prune.json",
        run.pruned_checkpoint("ablation-ft0"): "pruned/ablation-ft0.ckpt", run.doctor_report_path: "doctor.json",
        run.figure("attention_grid.png"): "figures/attention_grid.png",
        run.last_checkpoint_path: "checkpoints/last.ckpt", run.step_checkpoint(1200): "checkpoints/step001200.ckpt",
        run.hydra_config_path: ".hydra/config.yaml", run.hydra_file_path: ".hydra/hydra.yaml",
        run.hydra_overrides_path: ".hydra/overrides.yaml", run.reproduce_steps_path: "reproduce_steps.json",
    }
    assert {path: path.relative_to(run_root).as_posix() for path in expected} == expected


def test_segments_are_in_numeric_order_and_the_newest_holds_the_config(run_root):
    run = RunDir(run_root)
    assert [d.name for d in run.segment_dirs()] == ["0", "2", "10"]
    assert run.config_path == run_root / "segments" / "10" / "config.yaml"
    cfg = run.config()
    assert isinstance(cfg, DictConfig) and cfg.seed == 10
    assert OmegaConf.to_container(cfg, resolve=False)["lr"] == "${optim.lr}"  # loaded, not resolved


def test_without_segments_the_config_is_hydras(run_root):
    import shutil

    shutil.rmtree(run_root / "segments")
    assert RunDir(run_root).config_path == run_root / ".hydra" / "config.yaml"
    assert RunDir(run_root).config().seed == 0


def test_no_config_and_no_run_dir_are_data_errors(tmp_path):
    with pytest.raises(DataError) as missing:
        RunDir(tmp_path / "absent").config()
    assert str(missing.value) == f"{tmp_path / 'absent'}: no such run directory"
    assert RunDir(tmp_path).config_path is None
    with pytest.raises(DataError) as bare:
        RunDir(tmp_path).config()
    assert str(bare.value) == f"{tmp_path}: not a headlab run directory (no segments/<n>/config.yaml or .hydra/config.yaml)"


def test_checkpoints_last_best_and_all_with_their_steps(run_root):
    run = RunDir(run_root)
    found = {which: [(f.path.name, f.step, f.epoch) for f in run.find_checkpoints(which)] for which in ("last", "best", "all")}
    assert found == {"last": [("last.ckpt", 30, 2)], "best": [(BEST, 20, 1)],
                     "all": [("step000010.ckpt", 10, 0), (BEST, 20, 1), ("last.ckpt", 30, 2)]}


def test_two_checkpoints_of_one_step_keep_last(run_root):
    _checkpoint(run_root / "checkpoints" / "last.ckpt", 20, 1)  # the best is the newest state
    run = RunDir(run_root)
    assert [(f.path.name, f.step) for f in run.find_checkpoints("all")] == [("step000010.ckpt", 10), ("last.ckpt", 20)]
    assert [f.path.name for f in run.find_checkpoints("best")] == [BEST]


def test_no_checkpoints_is_a_data_error_that_says_what_to_do(tmp_path):
    with pytest.raises(DataError) as err:
        RunDir(tmp_path).find_checkpoints("last")
    assert str(err.value) == f"{tmp_path}: has no checkpoints (checkpoints/*.ckpt): train it first, or point at a run dir"


def test_a_missing_kind_of_checkpoint_lists_what_there_is(tmp_path):
    _checkpoint(tmp_path / "checkpoints" / "last.ckpt", 5, 0)
    _checkpoint(tmp_path / "checkpoints" / "step000002.ckpt", 2, 0)
    with pytest.raises(DataError) as err:
        RunDir(tmp_path).find_checkpoints("best")
    assert str(err.value) == f"{tmp_path / 'checkpoints'}: has no best checkpoint (found last.ckpt, step000002.ckpt)"


def test_an_unknown_choice_is_a_config_error(run_root):
    with pytest.raises(ConfigError) as err:
        RunDir(run_root).find_checkpoints("newest")
    assert str(err.value) == "invalid config checkpoint='newest': expected one of last, best, all"


class _Payload:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


def test_finding_checkpoints_never_runs_pickled_code(tmp_path):
    marker = tmp_path / "ran"
    (tmp_path / "checkpoints").mkdir()
    torch.save({"state_dict": {}, "global_step": 1, "payload": _Payload(str(marker))}, tmp_path / "checkpoints" / "last.ckpt")
    with pytest.raises(CheckpointError):
        RunDir(tmp_path).find_checkpoints("last")
    assert not marker.exists()


def test_summary_run_id_and_best_checkpoint_after_a_move(run_root):
    run = RunDir(run_root)
    assert run.has_summary and run.summary["status"] == "completed"
    assert run.run_id == "run-7"
    assert run.best_checkpoint() == run_root / "checkpoints" / BEST  # the recorded path is gone; same name here
    assert run.teacher_checkpoint("best") == run_root / "checkpoints" / BEST
    assert run.teacher_checkpoint("last") == run_root / "checkpoints" / "last.ckpt"
    assert run.existing_last_checkpoint() == run_root / "checkpoints" / "last.ckpt"


def test_summary_is_read_once_per_run_dir(run_root):
    run = RunDir(run_root)
    assert run.summary["status"] == "completed"
    (run_root / "summary.json").write_text(json.dumps({"status": "failed"}))
    assert run.summary["status"] == "completed"
    assert RunDir(run_root).summary["status"] == "failed"


@pytest.mark.parametrize("text, problem", [
    ("{\"status\": \"runn", "cannot be read (Unterminated string"),
    ("[1, 2]", "expected a JSON object, got list"),
])
def test_a_broken_summary_is_empty_or_a_data_error(run_root, text, problem):
    (run_root / "summary.json").write_text(text)
    run = RunDir(run_root)
    assert run.summary == {}
    assert run.run_id == run_root.name
    assert run.best_checkpoint() is None and run.teacher_checkpoint("best") == run_root / "checkpoints" / "last.ckpt"
    with pytest.raises(DataError) as err:
        run.require_summary()
    assert str(err.value).startswith(f"{run_root / 'summary.json'}: {problem}")


def test_no_summary_no_last_checkpoint(tmp_path):
    run = RunDir(tmp_path)
    assert not run.has_summary and run.summary == {} and run.run_id == tmp_path.name
    assert run.existing_last_checkpoint() is None and run.teacher_checkpoint("best") is None
    with pytest.raises(DataError, match="cannot be read"):
        run.require_summary()


def test_tables_dataset_folders_sorted_single_files_as_written(run_root):
    run = RunDir(run_root)
    metrics = run.head_metrics()
    assert metrics[["step", "head", "value"]].values.tolist() == [[10, 0, 1.0], [10, 1, 2.0], [30, 0, 0.5], [30, 1, 0.25]]
    importance = run.head_importance()
    assert importance[["head", "value"]].values.tolist() == [[1, 0.75], [0, 0.125]]
    with pytest.raises(FileNotFoundError):
        run.head_pairs()


# The contract's file names, as a module would spell them; only store/run_dir.py may (cli/ is being moved).
CONTRACT_FILES = ("summary.json", "vocab.json", "metrics.csv", "train.log", "head_metrics.parquet",
                  "head_pairs.parquet", "attention_maps.npz", "interventions.json", "head_importance.parquet",
                  "importance_curves.parquet", "importance.json", "prune_curve.parquet", "prune.json", "doctor.json",
                  "reproduce_steps.json", "last.ckpt", "resolved.json", "segment.json", "config.yaml", "hydra.yaml",
                  "overrides.yaml", "view.html")
CONTRACT_FOLDERS = (".hydra", "checkpoints", "segments", "probe_patterns")  # words that are also JSON keys: caught as path parts only
# a quoted file name ("summary.json", 'last.ckpt'), a quoted path starting with one (".hydra/config.yaml"),
# or a folder joined onto a path (run_dir / "checkpoints")
SPELLED = re.compile(r"""(["'])(?:%s)(?:\1|/)|(["'])(?:%s)/|/\s*(["'])(?:%s)\3"""
                     % ("|".join(map(re.escape, CONTRACT_FILES)), "|".join(map(re.escape, CONTRACT_FOLDERS)),
                        "|".join(map(re.escape, CONTRACT_FOLDERS))))
OWNER_EXEMPT = (SRC / "store" / "run_dir.py", SRC / "cli")


def test_the_ownership_check_sees_a_spelled_name():
    assert SPELLED.search('summary = run_dir / "summary.json"') and SPELLED.search("x / 'last.ckpt'")
    assert SPELLED.search('Path(".hydra/config.yaml")') and SPELLED.search("folder = run_dir / 'checkpoints'")
    assert not SPELLED.search('{"checkpoints": entries}')  # a JSON key, not the folder
    assert not SPELLED.search('"no summary.json (the job never reached training)"')  # prose naming a file
    assert not SPELLED.search('"last.ckpt\'') and not SPELLED.search('"my_summary.json"')


def test_only_run_dir_spells_the_contracts_file_names():
    files = [p for p in sorted(SRC.rglob("*.py")) if not any(p == e or e in p.parents for e in OWNER_EXEMPT)]
    files += sorted((SRC.parents[1] / "benchmarks").rglob("*.py"))
    offenders = [f"{path}:{n}: {line.strip()}" for path in files
                 for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                 if SPELLED.search(line) and "# a hub folder's files, not the run contract's" not in line]
    assert len(files) > 50  # the walk found the package
    assert offenders == [], "file names of the run contract belong to headlab.store.run_dir:\n" + "\n".join(offenders)


def test_importing_the_store_loads_neither_torch_nor_lightning():
    import subprocess
    import sys

    probe = ("import sys, headlab.store; "
             "sys.exit(','.join(m for m in ('torch', 'lightning', 'headlab.lit') if m in sys.modules) or None)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, f"importing headlab.store loaded {done.stderr.strip()}"
