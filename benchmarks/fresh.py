"""Run one arm of a section in a fresh Python process, so its memory and caches start clean.

An arm is a public entry point, `python -m benchmarks.<section> ...`, whose last stdout line is
one JSON object; anyone can run it alone to reproduce one row of a table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.options import machine_argv

REPO = Path(__file__).resolve().parents[1]


def run_fresh(module: str, arm_argv: list[str], args: argparse.Namespace, timeout: float = 1800) -> dict[str, Any]:
    """`python -m <module> <arm_argv> <the parent's --threads/--device/--quick>`; its last JSON line."""
    cmd = [sys.executable, "-m", module, *arm_argv, *machine_argv(args)]
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO)
    return last_json_line(proc.stdout, f"{' '.join(cmd[2:])} (rc {proc.returncode})", proc.returncode, proc.stderr)


def last_json_line(stdout: str, what: str, returncode: int = 0, stderr: str = "") -> dict[str, Any]:
    """The last stdout line that is a JSON object; an arm that failed or printed none is an error.

    >>> last_json_line('loading\\n{"a": 1}\\n{"b": 2}\\ndone\\n', "arm")
    {'b': 2}
    """
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if returncode != 0 or not lines:
        raise RuntimeError(f"arm {what} failed:\n{stderr[-3000:]}")
    return json.loads(lines[-1])


def print_result(result: dict[str, Any]) -> None:
    """An arm's answer to its parent: one JSON line, last on stdout."""
    print(json.dumps(result), flush=True)
