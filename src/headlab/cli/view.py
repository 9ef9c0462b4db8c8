"""`headlab-view RUN_DIR|SWEEP_DIR`: one offline HTML page of a run or a sweep, `view.html` in that folder.

The page is built by `headlab.view.write_view` (docs/view.md). Exit 2: not a run directory nor a
sweep folder, one line, nothing written.
"""

from __future__ import annotations

import sys

from headlab.cli import positional_arg
from headlab.config.app import run_app
from headlab.view import ViewCommand

PROG = "headlab-view"
# `--help`: this text, the keys with their defaults, then the doc named by `footer=`
HELP = """headlab-view RUN_DIR|SWEEP_DIR: writes view.html there, one self-contained page (no server, no network).
A run: every head's mean map over a step slider, a head's trajectories and role timeline, the token view.
A sweep (holds multirun.yaml): each config's head-to-head divergence with its seed band, the seeds'
head grids aligned by the cross-seed matching. Short form: PATH = path=PATH. Exit 2: not a run or sweep."""


def main(argv: list[str] | None = None) -> int:
    args = positional_arg(sys.argv[1:] if argv is None else argv, "path")
    return run_app(PROG, "view", view, args, schema=ViewCommand, header=HELP, footer="docs/view.md")


def view(cmd) -> int:
    from headlab.store import RunDir, SweepDir, is_sweep_dir
    from headlab.view import write_view

    folder = SweepDir(cmd.path) if is_sweep_dir(cmd.path) else RunDir(cmd.path)
    print(f"wrote {write_view(folder)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
