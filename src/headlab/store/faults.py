"""Environment faults as one line: a write the machine refuses (disk full, a file-size limit, a read-only
folder, a path through a file) is a `StorageError` naming the path and the cause, never an OSError or
torch's `inline_container.cc` RuntimeError traceback; and a folder a command will write into is checked
before it computes anything, so a refusal costs milliseconds, not the computation.
"""

from __future__ import annotations

import errno
import os
import resource
import shutil
import tempfile
from pathlib import Path

from headlab.errors import HeadlabError

_CAUSES = {
    errno.ENOSPC: "no space left on device (the disk is full)",
    errno.EDQUOT: "disk quota exceeded",
    errno.EFBIG: "file too large (the file-size limit, ulimit -f)",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.EEXIST: "a file is there where a folder is needed",
    errno.EISDIR: "it is a folder",
    errno.ENAMETOOLONG: "the name is too long",
    errno.EIO: "input/output error (a failing disk or a lost network share)",
}
# Texts of the same causes where a library reports them without an errno (pyarrow's OSError).
_TEXTS = {os.strerror(code): cause for code, cause in _CAUSES.items()}
# torch.save's writer fails with this text whatever the cause (disk full, file-size limit).
_TORCH_WRITER = ("PytorchStreamWriter", "inline_container.cc")
_LOW_SPACE = 1 << 20
WRITE_CHECK = ".headlab-write-check."  # the probe file of `require_writable`, removed at once  # bytes: a disk with less left is reported as full


class StorageError(HeadlabError):
    """A file or folder cannot be written: names the path and the cause."""

    def __init__(self, path: str | os.PathLike, cause: str) -> None:
        self.path, self.cause = str(path), cause
        super().__init__(f"{path}: cannot be written: {cause}")


def storage_cause(err: BaseException, folder: str | os.PathLike | None = None) -> str | None:
    """The cause in words when `err` is the machine refusing a write (None for anything else): an errno
    of disk, quota, size, permission or path; the same as text; torch's failed writer, whose cause is
    then read off the machine (`folder`'s free space, the file-size limit)."""
    if isinstance(err, StorageError):
        return err.cause
    if isinstance(err, OSError) and err.errno in _CAUSES:
        return _with_limit(err.errno, _CAUSES[err.errno])
    text = str(err)
    if isinstance(err, OSError):  # a library's own OSError (pyarrow, numpy's "N requested and M written")
        named = next((cause for known, cause in _TEXTS.items() if known in text), None)
        return named or (likely_cause(folder) if err.errno is None else None)
    if isinstance(err, RuntimeError) and any(mark in text for mark in _TORCH_WRITER):
        return likely_cause(folder) or f"the write failed ({' '.join(text.split())[:160]})"
    return None


def likely_cause(folder: str | os.PathLike | None) -> str | None:
    """Why a write that reported no reason failed: the file-size limit when one is set, a disk with
    (almost) no space left; None when neither holds."""
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if soft != resource.RLIM_INFINITY:
        return f"file too large (the file-size limit, ulimit -f, is {soft} bytes)"
    if folder is not None:
        try:
            free = shutil.disk_usage(_existing(Path(folder))).free
        except OSError:
            return None
        if free < _LOW_SPACE:
            return f"no space left on device (the disk is full: {free} bytes free)"
    return None


def _with_limit(code: int, cause: str) -> str:
    if code == errno.EFBIG:
        return likely_cause(None) or cause
    return cause


def as_storage_error(err: BaseException, path: str | os.PathLike) -> StorageError | None:
    """`err` as a `StorageError` naming `path`, or None when it is not a refused write."""
    if isinstance(err, StorageError):
        return err
    cause = storage_cause(err, Path(path).parent)
    return StorageError(path, cause) if cause is not None else None


def make_folder(folder: str | os.PathLike) -> Path:
    """`mkdir -p folder`; a refusal (a file in the way, a read-only parent, a full disk) is a `StorageError`."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise StorageError(folder, _describe(err, folder)) from None
    return folder


def require_writable(folder: str | os.PathLike) -> None:
    """A file can be created in the existing `folder` (a real write, since permission bits do not stop
    root and say nothing of a read-only mount or a full disk); else a `StorageError` naming it."""
    folder = Path(folder)
    try:
        fd, name = tempfile.mkstemp(dir=folder, prefix=WRITE_CHECK, suffix=".tmp")
        os.close(fd)
        os.unlink(name)
    except OSError as err:
        raise StorageError(folder, _describe(err, folder)) from None


def require_creatable(folder: str | os.PathLike) -> None:
    """`folder` is a folder, or can be made: no part of its path is a file, and its nearest existing
    parent takes new entries (probed with a file written and removed). An existing `folder` is only
    asked (`os.access`: a read-only mount answers EROFS even to root), since a run may be writing it.
    Nothing is created (the caller, or Hydra, makes it)."""
    folder = Path(folder)
    for part in (folder, *folder.parents):
        if part.exists() or part.is_symlink():
            if not part.is_dir():
                where = "it is a file" if part == folder else f"{part} is a file"
                raise StorageError(folder, f"{where}, not a folder")
            if part == folder:  # it exists (maybe a run in progress): asked, not written into
                if not os.access(folder, os.W_OK | os.X_OK):
                    raise StorageError(folder, "read-only file system, or no permission to write")
                return
            try:
                require_writable(part)
            except StorageError as refused:
                raise StorageError(folder, f"{part} takes no new entries: {refused.cause}") from None
            return


def _existing(path: Path) -> Path:
    return next((p for p in (path, *path.parents) if p.exists()), Path("/"))


def _describe(err: OSError, folder: Path) -> str:
    """A refused folder operation in words: a known cause, else the errno's own words (an existing folder
    answering ENOENT to a new file is a pseudo file system such as /proc)."""
    return storage_cause(err, folder) or (os.strerror(err.errno).lower() if err.errno else _first_line(err))


def _first_line(err: BaseException) -> str:
    return " ".join(str(err).split())[:200] or type(err).__name__
