"""Who may write into a run directory: one process at a time, and never over another run.

`RunLock` holds an exclusive `fcntl.flock` on `<run_dir>/.lock` (the file records the holder's pid)
for as long as a command writes the run dir. The kernel drops the lock when the process dies, so a
SIGKILLed run never leaves a stale lock behind; a second writer is refused in one line naming the
holder. `refuse_occupied` is the check before a command writes into a folder it did not create.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import TracebackType
from typing import IO

from headlab.errors import ConfigError, HeadlabError
from headlab.store import RunDir


class RunDirBusy(HeadlabError):
    """Another live process holds the run dir's lock."""


class RunLock:
    """`with RunLock(run):` the exclusive right to write the run directory (created if missing)."""

    def __init__(self, run: RunDir, key: str = "hydra.run.dir") -> None:
        self.run, self.run_dir, self.key = run, run.path, key
        self._file: IO[str] | None = None

    def __enter__(self) -> "RunLock":
        import fcntl

        refuse_file(self.run_dir, self.key)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        path = self.run.lock_path
        handle = open(path, "a+", encoding="utf-8")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise RunDirBusy(f"{self.run_dir}: in use by another headlab process (pid {holder}); wait for it to end, "
                             f"or choose another {self.key}") from None
        handle.seek(0)
        if handle.read() != f"{os.getpid()}\n":  # written only when it changes: a refused command touches nothing
            handle.seek(0)
            handle.truncate()
            handle.write(f"{os.getpid()}\n")
            handle.flush()
        self._file = handle
        return self

    def __exit__(self, kind: type | None, err: BaseException | None, tb: TracebackType | None) -> None:
        if self._file is not None:
            self._file.close()  # closing drops the flock; the file stays (unlinking would race a waiting writer)
            self._file = None



def refuse_file(path: Path, key: str) -> None:
    """A run-dir key that names an existing file (not a folder): one ConfigError."""
    if path.exists() and not path.is_dir():
        raise ConfigError(key, str(path), "a folder for the run (new or a run dir); that path is a file")


def refuse_occupied(path: Path, key: str, what: str = "this command's output") -> None:
    """Before writing `what` into `path`: refused when `path` is a file or already holds a run's files."""
    refuse_file(path, key)
    run = RunDir(path)
    found = run.run_files()
    if found:
        status = run.summary.get("status")
        held = f"a run (status {status})" if status else f"files ({', '.join(found[:4])}{', ...' if len(found) > 4 else ''})"
        raise ConfigError(key, str(path), f"a new or empty folder for {what}; it holds {held}: "
                          "nothing was written, choose another folder")
