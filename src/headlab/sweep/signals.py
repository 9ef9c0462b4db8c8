"""SIGTERM / SIGINT to a sweep's main process reach every job, and the main process waits for them.

With `hydra/launcher=joblib` the jobs train in worker processes. Without this, a SIGTERM to the main
process (a scheduler, `kill`) ended it at once and left the workers training, orphaned, their
summary.json `running`. `SweepSignals` (around the multirun, in the main process) passes the signal on
to every worker, so each job saves `last.ckpt`, records `interrupted` and prints its own resume line
(`headlab.lit.signals`); it then waits until no job process holds a run-dir lock and exits
143 / 130 (joblib then ends its idle workers: no orphan). A second signal is passed on too (each
job stops at once) and the main process exits without waiting. Ctrl-C in a terminal already reaches
every process of the foreground group, so SIGINT is passed on only when it cannot have (a `kill -INT`).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from headlab.store.run_dir import LOCK_FILE

log = logging.getLogger("headlab.sweep")

EXIT_CODES = {"SIGINT": 130, "SIGTERM": 143}  # the shell's 128 + signal number
HANDLED = (signal.SIGTERM, signal.SIGINT)
_JOBS = ("joblib.externals.loky", "submitit")  # worker processes of the joblib and submitit-local launchers
_NOT_JOBS = ("resource_tracker",)  # helper processes of joblib / multiprocessing, not jobs


class SweepSignals:
    """Context manager for a multirun's main process (see the module docstring).

    Args:
        prog: the command's name, for its lines on stderr.
        wait_s: how long to wait for the jobs to save and stop.
    """

    def __init__(self, prog: str, wait_s: float = 600.0) -> None:
        self.prog, self.wait_s = prog, wait_s
        self.received: str | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> "SweepSignals":
        if threading.current_thread() is threading.main_thread():
            for signum in HANDLED:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: Any) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        self._previous = {}

    def _handle(self, signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        workers = job_processes(os.getpid())
        if not (signum == signal.SIGINT and _terminal_reached_them()):
            _send(workers, signum)
        if self.received is not None:  # the second signal: every job stops at once
            raise SystemExit(EXIT_CODES[name])
        self.received = name
        print(f"{self.prog}: {name}: passed to {len(workers)} job process(es); each saves its checkpoint, records "
              "`interrupted` and stops (send it again to stop at once)", file=sys.stderr, flush=True)
        left = wait_for_jobs(self.wait_s, signum)
        still = f"; still running after {self.wait_s:.0f} s: {', '.join(str(p) for p in left)}" if left else ""
        print(f"{self.prog}: sweep stopped by {name}{still}; launch the same command with resume=auto to continue "
              "every job that did not finish", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_CODES[name])


def job_processes(pid: int) -> list[int]:
    """The child processes of `pid` that run jobs: joblib's loky workers, submitit's local jobs, and any
    child holding a run-dir lock; never a helper (a resource tracker, the W&B service). Read from /proc;
    elsewhere none are found."""
    found = []
    try:
        entries = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return []
    for entry in entries:
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # ended meanwhile
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) != pid or any(mark in cmdline for mark in _NOT_JOBS):
            continue
        if any(mark in cmdline for mark in _JOBS) or held_run_locks([int(entry)]):
            found.append(int(entry))
    return sorted(found)


def wait_for_jobs(wait_s: float, signum: int | None = None, poll_s: float = 0.2) -> list[Path]:
    """Wait until no job process of this one holds a run dir's lock (every training keeps `<run dir>/.lock`
    open and locked while it runs: `headlab.tasks.lock`); returns the run dirs still held after `wait_s`.
    With `signum`, a job that takes its lock while this waits gets it too: joblib may hand a worker its
    next job meanwhile, and that one must stop as well."""
    deadline = time.monotonic() + wait_s
    seen: set[Path] | None = None  # the jobs running when the signal was passed on
    while True:
        held = held_run_locks(job_processes(os.getpid()))
        if signum is not None:
            seen = set(held) if seen is None else seen
            for lock in [p for p in held if p not in seen]:
                _send([held[lock]], signum)
                seen.add(lock)
        if not held or time.monotonic() >= deadline:
            return sorted(p.parent for p in held)
        time.sleep(poll_s)


def held_run_locks(pids: list[int]) -> dict[Path, int]:
    """The run-dir locks (`.lock`) the processes `pids` hold open, each with its holder (from /proc)."""
    held: dict[Path, int] = {}
    for pid in pids:
        try:
            fds = list(os.scandir(f"/proc/{pid}/fd"))
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(fd.path)
            except OSError:
                continue
            if target.endswith(f"/{LOCK_FILE}"):
                held[Path(target)] = pid
    return held


def _send(pids: list[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass


def _terminal_reached_them() -> bool:
    """This process is in its terminal's foreground group: a Ctrl-C there reached the workers too."""
    try:
        return os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except (OSError, ValueError, AttributeError):
        return False
