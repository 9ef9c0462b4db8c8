"""`headlab-doctor RUN_DIR | SWEEP_DIR`: the article's closing advice as checks on finished runs.

Prints one line per check (ok / WARN / FAIL / n/m = not measured) with the numbers behind it and
the override to try, and writes `doctor.json` into each run directory (and the sweep directory).
Exit codes: 0 no check failed, 1 at least one failed, 2 the path is not a run or sweep directory.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

PROG = "headlab-doctor"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="a run directory (holds summary.json) or a multirun folder")
    args = parser.parse_args(argv)
    if not args.path.is_dir():  # before the heavy imports: a typo answers at once
        print(f"{PROG}: error: {args.path}: no such directory (expected a run directory or a sweep directory)", file=sys.stderr)
        return 2
    from headlab.doctor import FAIL, diagnose, format_diagnosis
    from headlab.errors import HeadlabError

    try:
        diagnoses = diagnose(args.path)
    except HeadlabError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 2
    for d in diagnoses:
        print(format_diagnosis(d))
    return 1 if any(d.worst == FAIL for d in diagnoses) else 0


if __name__ == "__main__":
    sys.exit(main())
