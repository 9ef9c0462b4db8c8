"""Accuracy per domain: `domain_accuracy.csv`, the article's claim 3.4 read from `sweep=domains`
(shared vs split Q/K/V) and `sweep=domains_routed`.

A run whose batches carry domain ids (`data=multidomain`, or `data=files` with a `domain` column)
records, for its best checkpoint, `val_acc_domain_<name>` and `test_acc_domain_<name>` in
summary.json (`headlab.lit.module`: accuracy over that domain's examples; val/test examples of a
domain absent from the train split are not in any domain's number). One row per (config, domain):
each accuracy as a mean with a 95 % t-interval over the config's seeds (`mean_ci`), and `n_seeds`,
the seeds that recorded it.

Roles per domain pipeline (`domain_roles.csv`, runs with `model.domain_split_layers` > 0): the
head metrics a run logs during training measure the MEAN of a split layer's pipelines (the probe
carries no domain id). Here each run's last checkpoint is measured again on its probe, once per
domain d through `PipelineView(net, d)` (every split layer on domain d's Q/K/V, or the router
one-hot on d), with the role rule of `headlab.measure.measure_probe`. `domain_roles_runs.csv`: one
row per (run, domain, layer, head) with the role; `domain_roles.csv`: per (config, domain, layer,
role) the number of heads with that role, mean and 95 % t-interval over seeds. This reads each
run's config, data and checkpoint (`headlab.tasks.inputs`): a few seconds per run on a CPU; a run
that cannot be measured is left out with a logged reason.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from headlab.analysis.roles import ROLES
from headlab.measure import measure_probe, probe_chunks
from headlab.model.domains import PipelineView
from headlab.store import atomic_write_csv
from headlab.sweep.runs import Run
from headlab.stats import mean_ci
from headlab.sweep.stats import TextColumn, config_column, format_interval, job_tags, text_table

log = logging.getLogger(__name__)

DOMAIN_CSV = "domain_accuracy.csv"
ROLES_RUNS_CSV = "domain_roles_runs.csv"
ROLES_CSV = "domain_roles.csv"
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
        first = job_tags(tags, runs[0].job)
        for domain in domains:
            row: dict[str, Any] = {"config": config, **first, "domain": domain}
            for split in SPLITS:
                values = [accs.get(domain, {}).get(split) for accs in per_run]
                ci = mean_ci(values, bounds=(0.0, 1.0))
                row.update({f"{split}_acc_n_seeds": ci.n, **ci.columns(f"{split}_acc")})
            rows.append(row)
    return pd.DataFrame(rows)


def pipeline_roles(net: Any, chunks: list[dict[str, Any]], domains: list[str]) -> pd.DataFrame:
    """One row per (domain, layer, head): the head's role on the probe `chunks` through that
    domain's pipeline (`PipelineView`); `domains[d]` names domain id d."""
    rows = []
    for domain, name in enumerate(domains):
        roles = measure_probe(PipelineView(net, domain), chunks, weight_metrics=False).roles
        rows += [{"domain": name, "layer": layer, "head": head, "role": role}
                 for layer, heads in enumerate(roles) for head, role in enumerate(heads)]
    return pd.DataFrame(rows)


def run_pipeline_roles(run: Run) -> pd.DataFrame:
    """`pipeline_roles` of the run's last checkpoint on its own probe; empty for a shared model."""
    # imported here: headlab.reload loads Lightning (through headlab.data), which importing headlab.sweep must not
    # (AggregateCommand, headlab-aggregate's schema, lives in this package: --help and a config mistake answer at once)
    from headlab.reload import build_datamodule, load_matching_network, run_config

    cfg = run_config(run.files)
    if not int(cfg.model.get("domain_split_layers") or 0):
        return pd.DataFrame()
    datamodule = build_datamodule(cfg)
    net = load_matching_network(run.files.find_checkpoints("last")[-1].path, cfg, datamodule).cpu()
    chunks = probe_chunks(datamodule.probe_set(), 64, "cpu")
    return pipeline_roles(net, chunks, datamodule.domain_names).assign(job=run.job, seed=run.seed)


def roles_table(per_run: pd.DataFrame, runs_by_config: dict[str, list[Run]], tags: pd.DataFrame) -> pd.DataFrame:
    """Per (config, domain, layer, role): heads with that role, mean and 95 % t-interval over the
    config's measured seeds (a seed without such a head counts 0)."""
    rows = []
    for config in sorted(runs_by_config):
        jobs = [r.job for r in runs_by_config[config]]
        mine = per_run[per_run["job"].isin(jobs)]
        if mine.empty:
            continue
        first = job_tags(tags, jobs[0])
        measured = sorted(mine["job"].unique())
        for (domain, layer), group in mine.groupby(["domain", "layer"], sort=True):
            for role in [r for r in ROLES if r in set(group["role"])]:
                counts = [int(((group["job"] == job) & (group["role"] == role)).sum()) for job in measured]
                ci = mean_ci(counts, bounds=(0.0, np.inf))
                rows.append({"config": config, **first, "domain": domain,
                             "layer": int(layer), "role": role, "n_seeds": len(measured), **ci.columns("heads")})
    return pd.DataFrame(rows)


def write_domain_accuracy(out_dir: Path, runs_by_config: dict[str, list[Run]], tags: pd.DataFrame) -> list[Path]:
    """Write `domain_accuracy.csv`, and for domain-split runs `domain_roles_runs.csv` and
    `domain_roles.csv`, into `out_dir`; none when no run recorded per-domain accuracy."""
    table = domain_table(runs_by_config, tags)
    if table.empty:
        return []
    written = [atomic_write_csv(Path(out_dir) / DOMAIN_CSV, table)]
    frames = []
    for runs in runs_by_config.values():
        for run in runs:
            try:
                frames.append(run_pipeline_roles(run))
            except Exception as err:  # a run we cannot re-measure: say why, keep the rest
                log.warning("domain roles: job %s left out (%s: %s)", run.job, type(err).__name__, err)
    per_run = pd.concat([f for f in frames if not f.empty], ignore_index=True) if any(not f.empty for f in frames) else None
    if per_run is not None:
        written.append(atomic_write_csv(Path(out_dir) / ROLES_RUNS_CSV, per_run[["job", "seed", "domain", "layer", "head", "role"]]))
        written.append(atomic_write_csv(Path(out_dir) / ROLES_CSV, roles_table(per_run, runs_by_config, tags)))
    return written


def format_domain_accuracy(table: pd.DataFrame) -> str:
    """The table as aligned lines: per config and domain, test (and val) accuracy mean [95% CI]."""
    if table.empty:
        return "domain accuracy: no run recorded per-domain accuracy"
    return text_table("accuracy per domain (best checkpoint; mean [95% CI] over seeds)", table, [
        config_column(table), TextColumn("domain", lambda r: str(r["domain"]), 12, left=True),
        TextColumn("seeds", lambda r: str(int(r["val_acc_n_seeds"])), 5),
        TextColumn("test acc", lambda r: format_interval(r, "test_acc", 3), 22),
        TextColumn("val acc", lambda r: format_interval(r, "val_acc", 3), 22)])
