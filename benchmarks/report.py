"""What the benchmark prints: Markdown tables (pasted into BENCHMARKS.md as measured) and the machine."""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import os
import platform
import statistics
from pathlib import Path
from typing import Any

import torch


def median(xs: list[float]) -> float:
    """Median of the samples, NaN when there are none (a skipped candidate)."""
    return statistics.median(xs) if xs else float("nan")


def fmt(x: Any) -> str:
    """Floats with 3 decimals below 10, one above; NaN as n/a; everything else as str.

    >>> [fmt(0.12345), fmt(1234.56), fmt(float("nan")), fmt(7)]
    ['0.123', '1234.6', 'n/a', '7']
    """
    if isinstance(x, float):
        return "n/a" if math.isnan(x) else (f"{x:.3f}" if abs(x) < 10 else f"{x:.1f}")
    return str(x)


def table(headers: list[str], rows: list[list[Any]]) -> str:
    """A Markdown table.

    >>> print(table(["a", "b"], [[1, 2.5]]))
    | a | b |
    |---|---|
    | 1 | 2.500 |
    """
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(fmt(x) for x in row) + " |" for row in rows]
    return "\n".join(lines)


def machine_info() -> dict[str, Any]:
    """CPU model, cores, torch and Python versions, threads, load average (and the GPU if any)."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    info = {"date": dt.datetime.now().isoformat(timespec="seconds"), "cpu": cpu, "cores": os.cpu_count(),
            "torch": torch.__version__, "python": platform.python_version(), "threads": torch.get_num_threads()}
    with contextlib.suppress(OSError):
        info["loadavg_start"] = [round(x, 2) for x in os.getloadavg()]
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info
