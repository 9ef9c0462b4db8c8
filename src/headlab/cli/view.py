"""`headlab-view RUN_DIR|SWEEP_DIR`: one offline HTML page of a run or a sweep, `view.html` in that folder.

The page is built by `headlab.view.write_view` (docs/view.md). Exit 2: not a run directory nor a
sweep folder, one line, nothing written.
"""

from __future__ import annotations

import sys

from headlab.config.app import positional_arg, run_app
from headlab.view import ViewCommand

PROG = "headlab-view"


def main(argv: list[str] | None = None) -> int:
    args = positional_arg(sys.argv[1:] if argv is None else argv, "path")
    return run_app(PROG, "view", view, args, schema=ViewCommand)


def view(cmd) -> int:
    from headlab.store import RunDir, SweepDir, is_sweep_dir
    from headlab.view import write_view

    folder = SweepDir(cmd.path) if is_sweep_dir(cmd.path) else RunDir(cmd.path)
    print(f"wrote {write_view(folder)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
