"""metrics.csv survives any number of kills during resumes: the set-aside rows are never lost or doubled.

The CSV logger is simulated at file level (it replaces metrics.csv with the rows it logs since the
resume), and a kill is simulated by never running the merge (`finally` skipped, as under SIGKILL)."""

from __future__ import annotations

import pandas as pd

from headlab.tasks.csv_metrics import KEPT, _stash, keep_csv_rows
from headlab.store import RunDir


def _rows(steps) -> pd.DataFrame:
    return pd.DataFrame({"step": list(steps), "train_loss": [f"{1.0 / (s + 1):.6f}" for s in steps], "epoch": [s // 5 for s in steps]})


def _logger_writes(run, steps) -> None:
    """What Lightning's CSV logger leaves after a restart: only the rows logged since."""
    _rows(steps).to_csv(run / "metrics.csv", index=False)


def _read(run) -> pd.DataFrame:
    return pd.read_csv(run / "metrics.csv")


def test_two_kills_in_a_row_keep_every_row(tmp_path):
    _logger_writes(tmp_path, range(0, 8))  # first segment, SIGKILLed after step 7; last.ckpt at step 4
    _stash(tmp_path, 4)  # resume 1 sets rows 0..4 aside ...
    _logger_writes(tmp_path, range(5, 12))  # ... logs 5..11 and is SIGKILLed too (no merge); last.ckpt at 9
    with keep_csv_rows(RunDir(tmp_path), 9):  # resume 2
        _logger_writes(tmp_path, range(10, 20))
    got = _read(tmp_path)
    assert got["step"].tolist() == list(range(20))  # on the parent commit: rows 0..4 lost (15 of 20 left)
    pd.testing.assert_frame_equal(got, pd.read_csv(_write_reference(tmp_path)), check_dtype=False)
    assert not (tmp_path / KEPT).exists()


def test_kill_between_merge_and_cleanup_doubles_nothing(tmp_path):
    _logger_writes(tmp_path, range(0, 8))
    with keep_csv_rows(RunDir(tmp_path), 4):
        _logger_writes(tmp_path, range(5, 10))
    _rows(range(0, 5)).to_csv(tmp_path / KEPT, index=False)  # as if killed after the merge, before the unlink
    with keep_csv_rows(RunDir(tmp_path), 9):
        _logger_writes(tmp_path, range(10, 14))
    assert _read(tmp_path)["step"].tolist() == list(range(14))


def test_kill_before_the_logger_replaced_the_file(tmp_path):
    _logger_writes(tmp_path, range(0, 8))
    _stash(tmp_path, 4)  # killed before the CSV logger wrote anything: metrics.csv is still the old file
    with keep_csv_rows(RunDir(tmp_path), 6):
        _logger_writes(tmp_path, range(7, 10))
    assert _read(tmp_path)["step"].tolist() == list(range(10))


def test_n_kills_at_every_instant_of_a_resume(tmp_path):
    """Kills after the stash, after the logger's first rows, after the merge, N = 4 in a row."""
    _logger_writes(tmp_path, range(0, 6))
    checkpoints = [3, 7, 11, 15]
    for i, step in enumerate(checkpoints):
        stash = _stash(tmp_path, step)
        if i % 2:
            _logger_writes(tmp_path, range(step + 1, step + 6))  # the logger wrote, then the kill
        else:
            _logger_writes(tmp_path, range(step + 1, step + 6))
            from headlab.tasks.csv_metrics import _restore

            _restore(tmp_path, stash)  # a clean end of the segment, then the next kill comes later
    with keep_csv_rows(RunDir(tmp_path), 20):
        _logger_writes(tmp_path, range(21, 25))
    assert _read(tmp_path)["step"].tolist() == list(range(25))


def _write_reference(tmp_path):
    path = tmp_path / "reference.csv"
    _rows(range(20)).to_csv(path, index=False)
    return path


def test_a_torn_last_row_is_dropped_with_a_warning_naming_it(tmp_path, caplog):
    _logger_writes(tmp_path, range(0, 8))
    with open(tmp_path / "metrics.csv", "a") as fh:
        fh.write("8,0.1")  # a kill while the logger wrote step 8: no line end, the epoch cell missing
    with caplog.at_level("WARNING", logger="headlab.train"):
        with keep_csv_rows(RunDir(tmp_path), 7):
            _logger_writes(tmp_path, range(8, 12))  # the resume logs step 8 again, whole
    got = _read(tmp_path)
    assert got["step"].tolist() == list(range(12))
    assert got.loc[got["step"] == 8, "train_loss"].item() == 0.111111  # the whole row, not the torn "0.1"
    torn = [r.getMessage() for r in caplog.records if "line 10 dropped: cut short" in r.getMessage()]
    assert len(torn) == 1 and str(tmp_path / "metrics.csv") in torn[0]


def test_a_malformed_row_is_dropped_with_a_warning_and_the_rest_kept(tmp_path, caplog):
    _logger_writes(tmp_path, range(0, 6))
    text = (tmp_path / "metrics.csv").read_text().splitlines(keepends=True)
    text.insert(3, "2,0.5,0,extra\n")  # line 4: one field too many
    (tmp_path / "metrics.csv").write_text("".join(text))
    with caplog.at_level("WARNING", logger="headlab.train"):
        with keep_csv_rows(RunDir(tmp_path), 5):
            _logger_writes(tmp_path, range(6, 9))
    assert _read(tmp_path)["step"].tolist() == list(range(9))
    assert any("line 4 dropped: 4 field(s) where the header has 3" in r.getMessage() for r in caplog.records)


def test_a_row_logged_again_after_a_kill_is_one_row_when_later_rows_add_a_column(tmp_path):
    """The random-instant kill test's case: the rows after checkpoint 3 (step 3 among them) reach metrics.csv when
    checkpoint 6 is being written, a kill leaves 6 unwritten, and the next resume from 3 logs step 3 again, then a
    validation column the set-aside rows never had. The copies of that row are equal cell for cell."""
    _logger_writes(tmp_path, range(0, 3))  # first segment, SIGKILLed after checkpoint 3
    _stash(tmp_path, 3)  # resume 1 from 3 ...
    _logger_writes(tmp_path, range(3, 6))  # ... flushes 3..5 before writing checkpoint 6, killed mid-write
    with keep_csv_rows(RunDir(tmp_path), 3):  # resume 2, again from 3
        later = _rows(range(3, 10)).assign(val_acc="")
        later.loc[later["step"] == 9, "val_acc"] = "0.5"
        later.to_csv(tmp_path / "metrics.csv", index=False)
    got = _read(tmp_path)
    assert got["step"].tolist() == list(range(10))  # parent commit: step 3 twice (NaN in val_acc != '')
    assert got["val_acc"].tolist()[-1] == 0.5 and got["val_acc"].isna().sum() == 9
