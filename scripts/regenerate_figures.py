#!/usr/bin/env python3
"""Refresh the figures the docs show from real runs, so a shipped figure is what today's code draws.

    .venv/bin/python scripts/regenerate_figures.py --demo RUN_DIR [--sweep SWEEP_DIR] [--minilm RUN_DIR] [--redraw]

--demo: a `make demo` run (docs/demo_attention_grid.png, the README's "figure to look at first");
--sweep: an aggregated `sweep=heads` folder (docs/sweep_heads_divergence.png);
--minilm: a `headlab-analyze-hf` run (docs/minilm_attention_grid.png). Each figure is copied from
the run as that run drew it; a missing figure is one line naming it, exit 2, nothing copied.
--redraw: the run figures (--demo, --minilm) are first drawn again by today's code from the run's own
tables, in a temporary copy of the run (the given folder is never written), so a figure made by an
older role rule or layout cannot ship.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"
# option -> (figure inside the given folder, file under docs/)
FIGURES = {"demo": ("figures/attention_grid.png", "demo_attention_grid.png"),
           "sweep": ("aggregate/figures/head_divergence.png", "sweep_heads_divergence.png"),
           "minilm": ("figures/attention_grid.png", "minilm_attention_grid.png")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in FIGURES:
        parser.add_argument(f"--{name}", type=Path, default=None)
    parser.add_argument("--docs", type=Path, default=DOCS, help="where the figures go (default: docs/)")
    parser.add_argument("--redraw", action="store_true", help="draw the run figures again with today's code first")
    args = parser.parse_args(argv)
    chosen = {name: getattr(args, name) for name in FIGURES if getattr(args, name) is not None}
    if not chosen:
        parser.error("name at least one of --demo, --sweep, --minilm")
    with tempfile.TemporaryDirectory(prefix="regenerate_figures-") as scratch:
        if args.redraw:
            chosen = {name: redrawn(folder, Path(scratch) / name) if name != "sweep" else folder
                      for name, folder in chosen.items()}
        return copy_figures(chosen, args.docs)


def redrawn(run_dir: Path, copy: Path) -> Path:
    """A copy of `run_dir` whose figures/ today's `write_run_figures` drew from its tables."""
    from headlab.plots.run_figures import write_run_figures

    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("checkpoints", "pruned", "figures"))
    write_run_figures(copy)
    return copy


def copy_figures(chosen: dict[str, Path], docs: Path) -> int:
    sources = {name: folder / FIGURES[name][0] for name, folder in chosen.items()}
    missing = [str(path) for path in sources.values() if not path.is_file()]
    if missing:
        print(f"regenerate_figures: error: no such figure: {', '.join(missing)}", file=sys.stderr)
        return 2
    for name, source in sources.items():
        target = docs / FIGURES[name][1]
        shutil.copyfile(source, target)
        print(f"{source} -> {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
