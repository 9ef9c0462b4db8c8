"""Per-domain Q/K/V config mistakes from the command line: one line, exit 2, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._runs import train_in_process


@pytest.mark.parametrize("overrides, message", [
    (["data=multidomain", "model.domain_split_layers=3"],
     "invalid config model.domain_split_layers=3: expected an integer in [0, n_layers=2]"),
    (["data=synthetic", "data.synthetic.n=200", "data.probe_size=8", "model.domain_split_layers=1"],
     "invalid config model.domain_split_layers=1: expected 0 for data without domain ids"),
])
def test_domain_config_mistake_is_one_line_and_exit_2(tmp_path: Path, overrides, message, monkeypatch, capfd):
    result = train_in_process(tmp_path, monkeypatch, capfd, *overrides, f"hydra.run.dir={tmp_path / 'run'}")
    assert result.returncode == 2, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and errors[0].startswith("headlab-train: error: " + message)
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "run").exists() and not (tmp_path / "logs").exists()
