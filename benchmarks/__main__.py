"""`python -m benchmarks`: run the chosen sections in order, print their tables, optionally keep JSON."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from typing import Any

from benchmarks import compiled, lm, memory, overhead, pruning, speed, step_profile, sweep
from benchmarks.options import SECTIONS, configure_process, parse_args
from benchmarks.report import machine_info
from headlab.store import atomic_write_text

RUNNERS = {"train": speed.section, "profile": step_profile.section, "compile": compiled.section,
           "overhead": overhead.section, "memory": memory.section, "sweep": sweep.section,
           "pruning": pruning.section, "lm": lm.section}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configure_process(args.threads)
    out: dict[str, Any] = {"machine": machine_info(), "args": vars(args)}
    m = out["machine"]
    print(f"# headlab bench {'(--quick: checks the benchmark, do not quote) ' if args.quick else ''}{m['date']}")
    print(f"\nmachine: {m['cpu']}, {m['cores']} cores, torch {m['torch']}, {m['threads']} threads"
          f"{', GPU ' + m['gpu'] if 'gpu' in m else ''}; load average at start {m.get('loadavg_start')}")
    started = time.perf_counter()
    for name in SECTIONS:
        if name in args.sections:
            t0 = time.perf_counter()
            RUNNERS[name](args, out)
            out.setdefault("section_s", {})[name] = round(time.perf_counter() - t0, 1)
            sys.stdout.flush()
    with contextlib.suppress(OSError):
        out["machine"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    print(f"\nbench took {time.perf_counter() - started:.0f} s; load average at end {out['machine'].get('loadavg_end')}")
    if args.json:
        atomic_write_text(args.json, json.dumps(out, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
