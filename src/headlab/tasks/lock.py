"""Who may write into a run directory: one process at a time, and never over another run.

`RunLock` holds an exclusive `fcntl.flock` on `<run_dir>/.lock` (the file records the holder's pid)
for as long as a command writes the run dir. The kernel drops the lock when the process dies, so a
SIGKILLed run never leaves a stale lock behind; a second writer is refused in one line naming the
holder. `refuse_occupied` is the check before a command writes into a folder it did not create.

headlab-train takes the lock in Hydra's `on_run_start` (`LockRunDir`), before Hydra writes
`.hydra/` into the folder, so a refused second training changes no byte of the running run; `train()`
then holds the same lock again (a process re-entering its own lock is let through).
"""

from __future__ import annotations

import os
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from hydra.experimental.callback import Callback

from headlab.errors import ConfigError, HeadlabError
from headlab.store import RunDir

# run folder (resolved) -> the open lock file this process holds on it (the lock lives as long as the file)
_HELD: dict[Path, IO[str]] = {}
# run folder (resolved) -> its entries before this start's Hydra wrote into it (None: the folder was not there)
_BEFORE_START: dict[Path, set[str] | None] = {}


def entries_before_start(run_dir: Path) -> tuple[bool, set[str] | None]:
    """(known, the folder's entries before this process's Hydra run start wrote `.hydra/`, `train.log`, `.lock`,
    None when the folder was not there): what a start refused before training takes away again."""
    key = run_dir.resolve()
    return key in _BEFORE_START, _BEFORE_START.get(key)


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
        if self.run_dir.resolve() in _HELD:  # this process holds it already (taken at Hydra's run start)
            return self
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
        self._file = _HELD[self.run_dir.resolve()] = handle
        return self

    def __exit__(self, kind: type | None, err: BaseException | None, tb: TracebackType | None) -> None:
        if self._file is not None:
            _HELD.pop(self.run_dir.resolve(), None)
            self._file.close()  # closing drops the flock; the file stays (unlinking would race a waiting writer)
            self._file = None


class LockRunDir(Callback):
    """headlab-train's run folder locked at Hydra's run start, before `.hydra/` is written into it,
    and released at the run's end; a busy folder is refused with nothing written (ConfigRefused)."""

    def __init__(self) -> None:
        self._lock: RunLock | None = None

    def on_run_start(self, config: Any, **kwargs: Any) -> None:
        from headlab.config.run_check import ConfigRefused
        from headlab.tasks.rank import is_rank_zero

        if not is_rank_zero():  # DDP ranks > 0 share rank 0's folder and lock
            return
        run_dir = Path(str(config.hydra.run.dir))
        _BEFORE_START[run_dir.resolve()] = {p.name for p in run_dir.iterdir()} if run_dir.is_dir() else None
        lock = RunLock(RunDir(run_dir))
        try:
            self._lock = lock.__enter__()
        except HeadlabError as err:
            raise ConfigRefused(err) from None

    def on_run_end(self, config: Any, **kwargs: Any) -> None:
        if self._lock is not None:
            self._lock.__exit__(None, None, None)
            self._lock = None



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
