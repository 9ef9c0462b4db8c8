"""Atomic file writes: a crash mid-write never leaves a truncated file behind.

Each writer writes into a temporary file in the destination folder, flushes it to disk, then
renames it over the target (`os.replace` is atomic on POSIX within one filesystem).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
import traceback
from pathlib import Path
from typing import Any, Callable, Iterator

from headlab.store.faults import WRITE_CHECK, as_storage_error


_UMASK = os.umask(0)  # read once (os.umask only reads by setting): the mode a plain open() would give
os.umask(_UMASK)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success rename it onto `path`.

    The temporary name keeps the target's suffix so libraries that infer the format from it
    (pyarrow, matplotlib) still do. A write the machine refuses (disk full, file-size limit, read-only
    folder, a file where the folder should be) is a `StorageError` naming `path`, and the temporary
    file is removed: nothing half-written is left under either name.
    """
    target = Path(path)
    tmp: Path | None = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=f".tmp{target.suffix}")
        os.close(fd)
        tmp = Path(tmp_name)
        yield tmp
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp's 0600 would make view.html, summary.json, ... private to the writer
        os.replace(tmp, target)
    except (OSError, RuntimeError) as err:
        refused = as_storage_error(err, target)
        if refused is not None:
            # The failed writer's frames still hold its open file (torch's PyTorchFileWriter closes it only when
            # destroyed): the unlinked temp file would keep its blocks, and on a full disk the run's record of the
            # failure (summary.json) could not be written either. The error names the cause; its locals are not needed.
            _release_frames(err)
        if refused is None or refused is err:
            raise
        raise refused from err
    finally:
        if tmp is not None and tmp.exists():
            tmp.unlink()


def _release_frames(err: BaseException) -> None:
    """Clear the finished frames of `err` and of the errors it was raised during or from (torch's writer fails
    twice: the write, then its end-of-file record), so the objects only they hold are freed now."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        traceback.clear_frames(err.__traceback__)
        err = err.__cause__ or err.__context__


# `atomic_path`'s temporary names: "." + the target's name + mkstemp's 8 random characters + ".tmp" + its suffix
_TEMPORARY = re.compile(r"^\..+\.[a-z0-9_]{8}\.tmp(\.[^./]+)?$")


def is_interrupted_write(name: str) -> bool:
    """`name` is an `atomic_path` temporary file (what a kill during a write leaves behind).

    >>> is_interrupted_write(".last.ckpt.k3_9xq2a.tmp.ckpt"), is_interrupted_write(".metrics.kept.csv")
    (True, False)
    """
    return bool(_TEMPORARY.match(name))


def remove_interrupted_writes(folder: str | os.PathLike) -> list[Path]:
    """Delete the temporary files that writes killed mid-way left anywhere under `folder`; returns them.
    Only for the folder's one writer (the run-dir lock's holder): another process's write in progress
    uses the same names."""
    root = Path(folder)
    if not root.is_dir():
        return []
    found = sorted(p for p in root.rglob(".*.tmp*") if p.is_file() and is_interrupted_write(p.name)
                   and not p.name.startswith(WRITE_CHECK))  # another command's probe, removed by itself
    for path in found:
        path.unlink(missing_ok=True)
    return found


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, default=_json_default) + "\n")


def atomic_write_with(path: str | os.PathLike, write: Callable[[Path], None]) -> None:
    """Call `write(tmp_path)` (e.g. `fig.savefig`, `df.to_parquet`) and publish atomically."""
    with atomic_path(path) as tmp:
        write(tmp)


def atomic_write_csv(path: str | os.PathLike, frame: Any) -> Path:
    """A pandas frame as CSV without its index, written atomically; the path, for lists of files written."""
    atomic_write_with(path, lambda tmp: frame.to_csv(tmp, index=False))
    return Path(path)


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item"):  # numpy / torch scalars
        return obj.item()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    raise TypeError(f"cannot serialise {type(obj).__name__} to JSON")
