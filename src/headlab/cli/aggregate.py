"""`headlab-aggregate SWEEP_DIR [--out DIR]`: a Hydra multirun folder -> tables and figures.

Prints every file written, the per-config tables (results, division of labour, and where the sweep
has them: steps to target, intervention effects, per-domain accuracy, duplicate heads), then every job that was skipped and
why (missing, still running, failed, diverged, unreadable). Exit codes: 0 when at least one run
was aggregated, 1 when the folder holds jobs but none usable, 2 when SWEEP_DIR is not a
multirun folder.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from headlab.errors import HeadlabError

PROG = "headlab-aggregate"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("sweep_dir", type=Path, help="the multirun folder (holds multirun.yaml and <job_num>/ dirs)")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: SWEEP_DIR/aggregate)")
    parser.add_argument("--no-figures", action="store_true", help="write the tables only")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not args.sweep_dir.is_dir():  # before the heavy imports: a typo answers at once
        print(f"{PROG}: error: {args.sweep_dir}: no such directory (expected a Hydra multirun folder)", file=sys.stderr)
        return 2
    _quiet_plot_caches(args.sweep_dir, args.out)
    from headlab.sweep import aggregate_sweep  # after argument parsing: --help stays instant
    from headlab.sweep.aggregate import SOURCES

    try:
        result = aggregate_sweep(args.sweep_dir, args.out, figures=not args.no_figures)
    except HeadlabError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 2
    for path in result.written:
        print(f"wrote {path}")
    print(f"{len(result.usable)} of {len(result.runs)} runs aggregated ({SOURCES})")
    for table in _terminal_tables(result.written):
        print(table)
    for run in result.skipped:
        print(f"skipped job {run.job} ({run.config}, seed {run.seed}): {run.status}: {run.reason}")
    if not result.usable:
        print(f"{PROG}: error: no usable run in {args.sweep_dir}", file=sys.stderr)
        return 1
    return 0


def _terminal_tables(written: list[Path]) -> list[str]:
    """The per-config tables a reader wants first, formatted, in a fixed order (those the sweep wrote)."""
    import pandas as pd

    from headlab.sweep.aggregate import format_results
    from headlab.sweep.convergence import CONVERGENCE_CSV, format_convergence
    from headlab.sweep.division import DIVISION_CSV, format_division
    from headlab.sweep.domains import DOMAIN_CSV, format_domain_accuracy
    from headlab.sweep.interventions import EFFECTS_CSV, format_effects
    from headlab.sweep.pruning import CONFIG_FILE as PRUNE_CSV, format_prune
    from headlab.sweep.redundancy import CONFIG_FILE as REDUNDANCY_CSV, format_redundancy

    formatters = {"sweep_summary.csv": format_results, DIVISION_CSV: format_division, CONVERGENCE_CSV: format_convergence,
                  EFFECTS_CSV: format_effects, DOMAIN_CSV: format_domain_accuracy, REDUNDANCY_CSV: format_redundancy,
                  PRUNE_CSV: format_prune}
    by_name = {p.name: p for p in written}
    return [format_table(pd.read_csv(by_name[name])) for name, format_table in formatters.items() if name in by_name]


def _quiet_plot_caches(sweep_dir: Path, out: Path | None) -> None:
    """matplotlib's cache goes under the output folder, never the home directory (matplotlib
    creates the folder when it is first imported, i.e. only once figures are drawn)."""
    import os

    if "MPLCONFIGDIR" not in os.environ and sweep_dir.is_dir():
        cache = (out or sweep_dir / "aggregate").resolve() / ".cache" / "matplotlib"
        os.environ["MPLCONFIGDIR"] = str(cache)


if __name__ == "__main__":
    sys.exit(main())
