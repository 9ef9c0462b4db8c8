"""Accuracy per domain: `domain_accuracy.csv`, the article's claim 3.4 read from `sweep=domains`
(shared vs split Q/K/V) and `sweep=domains_routed`.

A run whose batches carry domain ids (`data=multidomain`, or `data=files` with a `domain` column)
records, for its best checkpoint, `val_acc_domain_<name>` and `test_acc_domain_<name>` in
summary.json (`headlab.lit.module`: accuracy over that domain's examples; val/test examples of a
domain absent from the train split are not in any domain's number). One row per (config, domain):
each accuracy as a mean with a 95 % t-interval over the config's seeds (`mean_ci`), and `n_seeds`,
the seeds that recorded it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from headlab.store import atomic_write_with
from headlab.sweep.runs import Run
from headlab.sweep.stats import mean_ci

DOMAIN_CSV = "domain_accuracy.csv"
SPLITS = ("val", "test")


def run_domain_accuracy(run: Run) -> dict[str, dict[str, float]]:
    """`{domain: {"val": acc, "test": acc}}` from the run's summary.json (empty without domains)."""
    out: dict[str, dict[str, float]] = {}
    for split in SPLITS:
        prefix = f"{split}_acc_domain_"
        for key, value in run.summary.items():
            if key.startswith(prefix) and value is not None:
                out.setdefault(key[len(prefix):], {})[split] = float(value)
    return out


def domain_table(runs_by_config: dict[str, list[Run]], tags: pd.DataFrame) -> pd.DataFrame:
    """One row per (config, domain) with val / test accuracy means and 95 % t-intervals over seeds."""
    rows = []
    for config in sorted(runs_by_config):
        runs = runs_by_config[config]
        per_run = [run_domain_accuracy(r) for r in runs]
        domains = sorted({d for accs in per_run for d in accs})
        first = tags[tags["job"] == runs[0].job].drop(columns=["job"])
        for domain in domains:
            row: dict[str, Any] = {"config": config, **(first.iloc[0].to_dict() if len(first) else {}), "domain": domain}
            for split in SPLITS:
                values = [accs.get(domain, {}).get(split) for accs in per_run]
                ci = mean_ci(values, bounds=(0.0, 1.0))
                row.update({f"{split}_acc_n_seeds": ci.n, f"{split}_acc_mean": ci.mean,
                            f"{split}_acc_ci95_low": ci.low, f"{split}_acc_ci95_high": ci.high})
            rows.append(row)
    return pd.DataFrame(rows)


def write_domain_accuracy(out_dir: Path, runs_by_config: dict[str, list[Run]], tags: pd.DataFrame) -> list[Path]:
    """Write `domain_accuracy.csv` into `out_dir`; none when no run recorded per-domain accuracy."""
    table = domain_table(runs_by_config, tags)
    if table.empty:
        return []
    path = Path(out_dir) / DOMAIN_CSV
    atomic_write_with(path, lambda tmp: table.to_csv(tmp, index=False))
    return [path]


def format_domain_accuracy(table: pd.DataFrame) -> str:
    """The table as aligned lines: per config and domain, test (and val) accuracy mean [95% CI]."""
    if table.empty:
        return "domain accuracy: no run recorded per-domain accuracy"
    label = "config_label" if "config_label" in table else "config"
    width = max(len("config"), *(len(str(v)) for v in table[label]))
    lines = ["accuracy per domain (best checkpoint; mean [95% CI] over seeds)",
             f"{'config':<{width}} {'domain':<12} {'seeds':>5} {'test acc':>22} {'val acc':>22}"]
    for _, r in table.iterrows():
        lines.append(f"{str(r[label]):<{width}} {str(r['domain']):<12} {int(r['val_acc_n_seeds']):>5} "
                     f"{_interval(r, 'test_acc'):>22} {_interval(r, 'val_acc'):>22}")
    return "\n".join(lines)


def _interval(row: pd.Series, name: str) -> str:
    mean, low, high = row[f"{name}_mean"], row[f"{name}_ci95_low"], row[f"{name}_ci95_high"]
    if pd.isna(mean):
        return "-"
    if pd.isna(low) or pd.isna(high):
        return f"{mean:.3f}"
    return f"{mean:.3f} [{low:.3f}, {high:.3f}]"
