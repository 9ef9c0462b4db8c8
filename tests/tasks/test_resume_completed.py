"""Resuming a run that completed, with its own settings, changes nothing: no second copy of the final
val / test rows in metrics.csv, the same summary, exit 0."""

from __future__ import annotations

import shutil

import pytest

from tests._runs import RESUMABLE, train_in_process


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """A completed RESUMABLE run, trained through headlab-train's main in this process (the shared
    fixture starts a real process: seconds of imports this module does not need)."""
    tmp = tmp_path_factory.mktemp("reference")
    with pytest.MonkeyPatch.context() as monkeypatch:
        result = train_in_process(tmp, monkeypatch, _NoCapture(), *RESUMABLE, f"hydra.run.dir={tmp / 'run'}")
    assert result.returncode == 0, result.stderr[-3000:]
    return tmp / "run"


class _NoCapture:
    """`capfd` for a module-scoped fixture (pytest's own is per test): nothing captured, nothing read."""

    def readouterr(self):
        return "", ""


@pytest.mark.parametrize("resume", ["true", "auto"])
def test_resuming_a_completed_run_appends_no_rows(reference, tmp_path, resume, monkeypatch, capfd):
    run = tmp_path / "run"
    shutil.copytree(reference, run)
    rows, summary = (run / "metrics.csv").read_bytes(), (run / "summary.json").read_bytes()
    result = train_in_process(tmp_path, monkeypatch, capfd, *RESUMABLE, f"hydra.run.dir={run}", f"resume={resume}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "completed already" in result.stdout and result.stdout.strip().splitlines()[-1] == str(run)
    # on the parent commit, resume=true: 2 more rows (the final val and test rows logged again)
    assert (run / "metrics.csv").read_bytes() == rows
    assert (run / "summary.json").read_bytes() == summary
