"""The per-config tables `headlab-aggregate` prints after aggregating, formatted for a terminal.

Read back from the CSVs the sweep wrote (so the terminal shows exactly what is on disk), in a fixed
order: results first, then division of labour, and where the sweep has them steps to target,
intervention effects, per-domain accuracy, duplicate heads and pruning.
"""

from __future__ import annotations

from pathlib import Path

from headlab.sweep.aggregate import SOURCES, format_results
from headlab.sweep.convergence import CONVERGENCE_CSV, format_convergence
from headlab.sweep.division import DIVISION_CSV, format_division
from headlab.sweep.domains import DOMAIN_CSV, format_domain_accuracy
from headlab.sweep.interventions import EFFECTS_CSV, format_effects
from headlab.sweep.pruning import CONFIG_FILE as PRUNE_CSV, format_prune
from headlab.sweep.redundancy import CONFIG_FILE as REDUNDANCY_CSV, format_redundancy


def terminal_tables(written: list[Path]) -> list[str]:
    """The per-config tables a reader wants first, formatted, in a fixed order (those the sweep wrote)."""
    import pandas as pd

    formatters = {"sweep_summary.csv": format_results, DIVISION_CSV: format_division, CONVERGENCE_CSV: format_convergence,
                  EFFECTS_CSV: format_effects, DOMAIN_CSV: format_domain_accuracy, REDUNDANCY_CSV: format_redundancy,
                  PRUNE_CSV: format_prune}
    by_name = {p.name: p for p in written}
    return [format_table(pd.read_csv(by_name[name])) for name, format_table in formatters.items() if name in by_name]


def aggregate_report(result) -> list[str]:
    """Everything `headlab-aggregate` prints to stdout for one `AggregateResult`, line by line: each file
    written, how many runs were usable (and what each number is read from), the tables, the skipped jobs."""
    lines = [f"wrote {path}" for path in result.written]
    lines.append(f"{len(result.usable)} of {len(result.runs)} runs aggregated ({SOURCES})")
    lines += terminal_tables(result.written)
    lines += [f"skipped job {run.job} ({run.config}, seed {run.seed}): {run.status}: {run.reason}" for run in result.skipped]
    return lines
