"""A command given a folder that holds another run's files refuses before writing anything:
`headlab-analyze-hf run_dir=<a training run>` used to overwrite its config, maps, figure and tables."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from headlab.cli.analyze_hf import main


def _training_run(path: Path) -> Path:
    (path / ".hydra").mkdir(parents=True)
    (path / ".hydra" / "config.yaml").write_text("seed: 1\n")
    (path / "summary.json").write_text(json.dumps({"status": "completed", "run_id": path.name}))
    (path / "attention_maps.npz").write_bytes(b"maps")
    (path / "metrics.csv").write_text("step,train_loss\n0,1.0\n")
    return path


def _digest(run: Path) -> dict[str, str]:
    return {str(p.relative_to(run)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(run.rglob("*")) if p.is_file()}


def test_analyze_hf_refuses_a_training_run_dir(tmp_path, capsys):
    run = _training_run(tmp_path / "run")
    before = _digest(run)
    assert main(["data=synthetic", "data.probe_size=8", f"run_dir={run}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "run_dir" in err[0] and "status completed" in err[0], err
    assert _digest(run) == before  # on the parent commit: config, maps and tables rewritten, then exit 2


def test_analyze_hf_refuses_a_file_as_run_dir(tmp_path, capsys):
    path = tmp_path / "a_file"
    path.write_text("not a folder")
    assert main(["data=synthetic", "data.probe_size=8", f"run_dir={path}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is a file" in err[0], err  # on the parent commit: a NotADirectoryError traceback
    assert path.read_text() == "not a folder"


@pytest.mark.parametrize("extra", [[], ["data=en_polarity"]])
def test_default_data_is_one_minilm_reads(extra):
    """The bare command (README's line) must not be refused for [UNK]: its default is English."""
    from tests._runs import compose_command
    from headlab.tasks.pretrained import CONFIG_MODULE, AnalyzeHFConfig

    cfg = compose_command("analyze", extra, config_module=CONFIG_MODULE, schema=AnalyzeHFConfig)
    assert cfg.data.source == "en_polarity"
