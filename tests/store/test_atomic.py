import json
import os
from pathlib import Path

import pytest

from headlab.store import atomic_write_json, atomic_write_text, atomic_write_with


def test_atomic_write_replaces_and_leaves_no_temp_files(tmp_path):
    target = tmp_path / "summary.json"
    atomic_write_json(target, {"a": 1})
    atomic_write_json(target, {"a": 2, "b": [1, 2]})
    assert json.loads(target.read_text()) == {"a": 2, "b": [1, 2]}
    assert os.listdir(tmp_path) == ["summary.json"]


def test_failed_write_keeps_previous_content(tmp_path):
    target = tmp_path / "table.txt"
    atomic_write_text(target, "complete old content")

    def crash_midway(tmp):
        tmp.write_text("half of the new")
        raise RuntimeError("killed mid-write")

    with pytest.raises(RuntimeError):
        atomic_write_with(target, crash_midway)
    assert target.read_text() == "complete old content"
    assert os.listdir(tmp_path) == ["table.txt"]


def test_temp_file_keeps_suffix_for_format_sniffing(tmp_path):
    seen = []
    atomic_write_with(tmp_path / "fig.png", lambda tmp: (seen.append(tmp.suffix), tmp.write_bytes(b"x")))
    assert seen == [".png"]


def test_the_temporary_files_of_killed_writes_are_found_and_removed_and_nothing_else(tmp_path):
    import tempfile

    from headlab.store import remove_interrupted_writes

    left = []
    for folder, name in (("checkpoints", "last.ckpt"), ("head_metrics.parquet", "part-000000010-0000.parquet"), (".", "summary.json")):
        (tmp_path / folder).mkdir(exist_ok=True)
        fd, path = tempfile.mkstemp(dir=tmp_path / folder, prefix=f".{name}.", suffix=".tmp" + Path(name).suffix)
        os.close(fd)
        left.append(Path(path))
    kept = [tmp_path / ".metrics.kept.csv", tmp_path / ".lock", tmp_path / "checkpoints" / "last.ckpt",
            tmp_path / "notes.tmp.txt"]
    for path in kept:
        path.write_text("x")
    assert remove_interrupted_writes(tmp_path) == sorted(left)
    assert not any(p.exists() for p in left) and all(p.exists() for p in kept)


def test_a_written_file_has_the_mode_a_plain_open_gives_not_mkstemps_private_one(tmp_path):
    import stat

    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    atomic_write_text(tmp_path / "view.html", "<html></html>")
    mode = stat.S_IMODE((tmp_path / "view.html").stat().st_mode)
    assert mode == stat.S_IMODE(plain.stat().st_mode)  # under umask 022: 0644, not 0600
