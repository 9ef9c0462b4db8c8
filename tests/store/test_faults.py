"""Every writer of store/ under a real fault (issue 34.2, 34.7): a file-size limit (RLIMIT_FSIZE, lowered
for this process for the length of one write) and a full disk reported at the flush. Each write is one
StorageError naming the file and the cause, the file keeps its previous content (or is not there), and
no temporary file is left."""

from __future__ import annotations

import contextlib
import errno
import resource
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from headlab.store import (RunDir, append_part, atomic_write_bytes, atomic_write_csv, atomic_write_json, atomic_write_text,
                           atomic_write_with, head_metric_rows, replace_steps, write_attention_maps)
from headlab.store.faults import StorageError, make_folder, require_creatable, require_writable
from headlab.store.probe_patterns import write_pattern_part

LIMIT = 4096  # bytes: every payload below is larger
BIG = np.random.default_rng(0).random((64, 64))


def _frame(n=2000):
    return pd.DataFrame({"step": np.arange(n), "value": np.random.default_rng(1).random(n)})


def _rows():
    return head_metric_rows("r", 0, 0, [{"entropy": np.random.default_rng(2).random(4000)}])


WRITERS = {  # name -> (the file it writes under `folder`, the write)
    "bytes": ("a.bin", lambda f: atomic_write_bytes(f / "a.bin", b"x" * 10_000)),
    "text": ("a.txt", lambda f: atomic_write_text(f / "a.txt", "x" * 10_000)),
    "json": ("a.json", lambda f: atomic_write_json(f / "a.json", {"values": BIG.tolist()})),
    "csv": ("a.csv", lambda f: atomic_write_csv(f / "a.csv", _frame())),
    "with": ("a.npy", lambda f: atomic_write_with(f / "a.npy", lambda tmp: np.save(tmp, BIG))),
    "append_part": ("t.parquet/part-000000000-0000.parquet", lambda f: append_part(f / "t.parquet", 0, _rows())),
    "replace_steps": ("r.parquet", lambda f: replace_steps(f / "r.parquet", _rows(), {0})),
    "attention_maps": ("attention_maps.npz", lambda f: write_attention_maps(
        f / "attention_maps.npz", SimpleNamespace(mean_patterns=BIG, step=3, roles=["local"] * 4))),
    "pattern_part": ("p/step000000003.npz", lambda f: write_pattern_part(
        f / "p", 3, BIG[None], np.array([64]), np.array(["a"] * 64), BIG)),
    "summary": ("summary.json", lambda f: RunDir(f).write_summary({"status": "completed", "values": BIG.tolist()})),
}


@contextlib.contextmanager
def _file_size_limit(limit: int):
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def _temporary(folder):
    return [p for p in folder.rglob("*") if ".tmp" in p.name]


@pytest.mark.parametrize("name", list(WRITERS))
def test_a_file_size_limit_is_one_storage_error_and_leaves_the_old_file(tmp_path, name):
    relative, write = WRITERS[name]
    write(tmp_path)  # a first, whole version
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    target = tmp_path / relative.replace("0000.parquet", "0001.parquet")  # a second part of a step is a new file
    with _file_size_limit(LIMIT), pytest.raises(StorageError) as info:
        write(tmp_path)
    assert str(info.value) == f"{target}: cannot be written: file too large (the file-size limit, ulimit -f, is {LIMIT} bytes)"
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before  # nothing new, nothing changed


@pytest.mark.parametrize("name", list(WRITERS))
def test_a_full_disk_at_the_flush_is_one_storage_error(tmp_path, monkeypatch, name):
    relative, write = WRITERS[name]

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("headlab.store.atomic.os.fsync", full)
    with pytest.raises(StorageError) as info:
        write(tmp_path)
    assert str(info.value) == f"{tmp_path / relative}: cannot be written: no space left on device (the disk is full)"
    assert not (tmp_path / relative).exists() and _temporary(tmp_path) == []


def test_a_path_through_a_file_is_one_line_for_every_folder_check(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(StorageError, match=f"^{afile}: cannot be written: it is a file, not a folder$"):
        require_creatable(afile)
    with pytest.raises(StorageError, match=f"^{afile / 'sub'}: cannot be written: {afile} is a file, not a folder$"):
        require_creatable(afile / "sub")
    with pytest.raises(StorageError, match=f"^{afile / 'sub'}: cannot be written: "):
        make_folder(afile / "sub")
    with pytest.raises(StorageError, match=f"^{afile / 'x.json'}: cannot be written: "):
        atomic_write_json(afile / "x.json", {})
    require_creatable(tmp_path / "new" / "deeper")  # creatable: nothing raised, nothing made
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_a_folder_that_refuses_new_files_is_found_before_anything_is_computed(tmp_path, monkeypatch):
    """Root ignores permission bits, so the refusal is what a read-only mount answers (EROFS)."""
    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr("headlab.store.faults.tempfile.mkstemp", read_only)
    with pytest.raises(StorageError, match=f"^{tmp_path}: cannot be written: read-only file system$"):
        require_writable(tmp_path)


def test_an_existing_folder_is_asked_not_written_into(tmp_path, monkeypatch):
    """A run may be writing it: nothing is created there, `os.access` answers (EROFS on a read-only mount)."""
    monkeypatch.setattr("headlab.store.faults.os.access", lambda path, mode: False)
    with pytest.raises(StorageError, match=f"^{tmp_path}: cannot be written: read-only file system, or no permission"):
        require_creatable(tmp_path)
    monkeypatch.undo()
    before = tmp_path.stat().st_mtime_ns
    require_creatable(tmp_path)
    assert tmp_path.stat().st_mtime_ns == before and list(tmp_path.iterdir()) == []


def _open_files_under(folder) -> list[str]:
    """The files under `folder` this process still holds open (a removed one shows as 'PATH (deleted)')."""
    import os

    found = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            if (target := os.readlink(f"/proc/self/fd/{fd}")).startswith(str(folder)):
                found.append(target)
    return found


@pytest.mark.skipif(not __import__("os").path.isdir("/proc/self/fd"), reason="reads the open files off /proc")
def test_a_refused_checkpoint_write_lets_go_of_its_temporary_file(tmp_path):
    """torch's writer closes its file only when destroyed, and the error's frames held it: the removed temporary
    file kept its blocks while the error lived, so on a full disk (a 1.2 MB tmpfs) summary.json could not record
    the failure (status left 'running'). The refused write frees them at once."""
    import torch

    from headlab.lit.checkpointing import AtomicCheckpointIO

    with _file_size_limit(LIMIT), pytest.raises(StorageError) as info:
        AtomicCheckpointIO().save_checkpoint({"state_dict": {"w": torch.zeros(10_000)}}, tmp_path / "last.ckpt")
    assert "file too large" in str(info.value)
    assert _open_files_under(tmp_path) == []  # parent commit: ['<tmp_path>/.last.ckpt.XXXXXXXX.tmp.ckpt (deleted)']
    assert _temporary(tmp_path) == [] and not (tmp_path / "last.ckpt").exists()
