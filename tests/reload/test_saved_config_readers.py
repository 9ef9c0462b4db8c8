"""Every command that reads a run's saved config or settings says in one line when they are broken:
RunDir is the one reader (config, the newest segment's settings, the segment records)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from headlab.errors import DataError
from headlab.store import RunDir
from tests._runs import train_in_process

BROKEN = [("{not json", "cannot be read"), ("[1, 2]", "not a JSON object")]


def _segment(run: Path, name: str, text: str) -> Path:
    (run / "segments" / "0").mkdir(parents=True, exist_ok=True)
    path = run / "segments" / "0" / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("text, problem", BROKEN)
def test_broken_segment_settings_name_the_file(tmp_path, text, problem):
    path = _segment(tmp_path / "run", "resolved.json", text)
    with pytest.raises(DataError, match=problem) as info:  # on the parent commit: JSONDecodeError / a list
        RunDir(tmp_path / "run").latest_settings()
    assert str(path) in str(info.value)


@pytest.mark.parametrize("text, problem", BROKEN)
def test_broken_segment_record_names_the_file(tmp_path, text, problem):
    path = _segment(tmp_path / "run", "segment.json", text)
    with pytest.raises(DataError, match=problem) as info:
        RunDir(tmp_path / "run").segment_infos()
    assert str(path) in str(info.value)


@pytest.mark.parametrize("text, problem", [("data: [unclosed\n", "cannot be read"), ("model: {}\n", "lacks the data"),
                                           ("- a\n", "not a mapping")])
def test_run_dir_config_is_the_one_checked_reader(tmp_path, text, problem):
    path = _segment(tmp_path / "run", "config.yaml", text)
    with pytest.raises(DataError, match=problem) as info:
        RunDir(tmp_path / "run").config(required=("data", "model"))
    assert str(path) in str(info.value)


def test_resume_auto_over_broken_saved_settings_is_one_line(tmp_path, monkeypatch, capfd):
    run = tmp_path / "run"
    _segment(run, "resolved.json", "{not json")
    (run / "summary.json").write_text(json.dumps({"status": "completed", "run_id": "r"}))
    result = train_in_process(tmp_path, monkeypatch, capfd, "data=synthetic", "resume=auto", f"hydra.run.dir={run}")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]  # on the parent commit: a traceback
    assert "resolved.json" in lines[0] and "saved settings cannot be read" in lines[0]
