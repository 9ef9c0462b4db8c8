import json
import os

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
