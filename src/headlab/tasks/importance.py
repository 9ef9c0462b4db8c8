"""Head importance of a finished run (or of every usable job of a sweep), computed, then written.

`compute` reads the run's saved config, data and checkpoints and measures every chosen checkpoint
(single-head ablation, gradient importance, a random control, keep-top-k and leave-one-layer-in
curves, the heads' roles on the probe set) before anything is written, so a failure writes nothing;
`write_outputs` adds the tables, importance.json and figures to the run directory (rows of other
checkpoints already there are kept). `headlab-importance` (`headlab.cli.importance`) is the command line;
its settings are `ImportanceCommand` (`--cfg job` prints them).
`headlab.reload` is imported in the functions that use it: it loads Lightning (through headlab.data), which
importing this module for its schema must not (`headlab-importance --help` and a config mistake answer at once).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

import pandas as pd
from omegaconf import MISSING

from headlab.analysis.redundancy import DEFAULT_MASS, pair_table_redundancy
from headlab.config.values import check_choice, check_device, check_int
from headlab.errors import ConfigError, HeadlabError
from headlab.analysis.lm_heads import lm_roles
from headlab.interventions import RANKINGS, curve_rows, importance_rows, measure_importance, rank_heads
from headlab.interventions.batches import is_lm_network
from headlab.analysis.task_roles import DECISION_QUERIES
from headlab.measure import TASK, measure_probe, model_decision, probe_chunks
from headlab.measure.lm_probe import measure_lm_probe
from headlab.tasks.threads import set_torch_threads
from headlab.store import RunDir, SweepDir, atomic_write_json, read_table, replace_steps
from headlab.store.run_dir import CHECKPOINT_CHOICES, IMPORTANCE_FIGURE, IMPORTANCE_TIMELINE_FIGURE, REDUNDANCY_FIGURE
from headlab.store.faults import require_writable
from headlab.store.run_info import configure_cache_dirs
from headlab.sweep.runs import Run, discover_runs


@dataclass
class ImportanceSettings:
    """headlab-importance's `importance:` node (docs/importance.md). OmegaConf checks the types when the
    command line is composed; the ranges and choices are checked here."""

    split: str = "val"  # val or test: the examples every head is measured on
    batch_size: int = 128  # examples per forward
    max_rows: int = 4096  # batched ablation: at most this many sequences per forward (batch x heads of a layer)
    normalize_layers: bool = False  # gradient ranking on per-layer L2-normalised scores (Michel et al. 2019, 4.2)
    random_seed: int = 0  # the random-ranking control
    curves: bool = True  # keep-top-k (per ranking) and leave-one-layer-in curves
    figures: bool = True  # figures/importance.png: importance heat maps beside the role map
    device: str = "cpu"  # cpu, cuda, cuda:1, mps
    threads: Optional[int] = None  # torch threads (null: torch's default)
    # near-duplicate heads (from head_pairs.parquet): two heads are duplicates when their attention JS
    # <= redundancy_mass * ln 2, the JS of maps that agree except for that share of mass
    redundancy_mass: float = DEFAULT_MASS

    def __post_init__(self) -> None:
        if not 0.0 < self.redundancy_mass <= 1.0:
            raise ConfigError("importance.redundancy_mass", self.redundancy_mass, "a share of attention mass in (0, 1]")
        check_choice("importance.split", self.split, ("val", "test"))
        for key in ("batch_size", "max_rows"):
            check_int(f"importance.{key}", getattr(self, key), 1)
        if self.threads is not None:
            check_int("importance.threads", self.threads, 1)
        check_device("importance.device", self.device)


@dataclass
class ImportanceCommand:
    """`headlab-importance run_dir=RUN [checkpoint=last|best|all] [importance.KEY=VALUE ...]`."""

    # a finished headlab-train run (holds its config and checkpoints/), or a sweep folder (holds
    # multirun.yaml): every usable job, then headlab-aggregate
    run_dir: str = MISSING
    checkpoint: str = "last"  # last, best, or all (every checkpoint, one per step)
    importance: ImportanceSettings = field(default_factory=ImportanceSettings)

    def __post_init__(self) -> None:
        check_choice("checkpoint", self.checkpoint, CHECKPOINT_CHOICES)


@dataclass
class CheckpointImportance:
    checkpoint: str
    step: int
    epoch: int
    result: Any  # headlab.interventions.HeadImportance
    roles: list[list[str]]
    # From the queries that feed the decision (None: a model without a classifier pooling): the task roles
    # `[layer][head]`, the queries in words, and per layer the `{metric}@task` values `[head]`.
    task_roles: list[list[str]] | None = None
    task_queries: str | None = None
    task_metrics: list[dict[str, Any]] | None = None


@dataclass
class ImportanceOutcome:
    run_id: str
    settings: ImportanceSettings
    checkpoints: list[CheckpointImportance]
    redundancy: dict[str, Any] | None = None  # see `run_redundancy`


def compute(run: RunDir, which: str, settings: ImportanceSettings) -> ImportanceOutcome:
    """Everything the outputs need, computed before one file is written (so a failure writes nothing);
    a run dir that cannot take the outputs is refused first, not after the computation."""
    from headlab.reload import build_datamodule, eval_batches, load_matching_network, run_config

    cfg = run_config(run)
    require_writable(run.path)
    if run.figures_dir.is_dir() and settings.figures:
        require_writable(run.figures_dir)
    checkpoints = run.find_checkpoints(which)
    set_torch_threads(settings.threads)
    datamodule = build_datamodule(cfg)
    batches = eval_batches(datamodule, settings.split, settings.batch_size, settings.device)
    results = []
    for ckpt in checkpoints:
        net = load_matching_network(ckpt.path, cfg, datamodule).to(settings.device)
        result = measure_importance(net, batches, normalize=settings.normalize_layers, random_seed=settings.random_seed,
                                    curves=settings.curves, max_rows=settings.max_rows)
        results.append(_with_probe_roles(CheckpointImportance(str(ckpt.path), ckpt.step, ckpt.epoch, result, []), net,
                                         datamodule, settings.device))
    newest = max(c.step for c in results)
    return ImportanceOutcome(run.run_id, settings, results, run_redundancy(run, newest, settings.redundancy_mass))


def run_redundancy(run: RunDir, step: int, mass: float) -> dict[str, Any] | None:
    """Near-duplicate head clusters per layer from the run's `head_pairs.parquet` (`js`), at the last
    measurement at or before `step`; None when the run has no pair table."""
    try:
        pairs = read_table(run.head_pairs_path)
    except FileNotFoundError:
        return None
    return pair_table_redundancy(pairs, mass, step)


def _with_probe_roles(entry: CheckpointImportance, net: Any, datamodule: Any, device: str) -> CheckpointImportance:
    """`entry` with each head's roles on the run's fixed probe set, through the one measurement seam: the
    all-query role, and the task role with its metrics from the decision's queries (what an important head
    reads for the decision, which the all-query role often cannot show). An LM's: its LM roles (previous,
    duplicate, induction, other) on its induction probe; it has no decision query."""
    if is_lm_network(net):  # the roles the LM's own measurement gives (the induction probe, headlab.analysis.lm_heads)
        m = measure_lm_probe(net, datamodule.probe.to(device), datamodule.probe_half_len)
        entry.roles = [lm_roles(layer) for layer in m.per_layer]
        return entry
    decision = model_decision(net)
    m = measure_probe(net, probe_chunks(datamodule.probe_set(), 64, device), weight_metrics=False, decision=decision)
    entry.roles = m.roles
    if m.task_roles is not None:
        entry.task_roles, entry.task_queries = m.task_roles, DECISION_QUERIES[decision]
        entry.task_metrics = [{k: v for k, v in layer.items() if k.endswith(f"@{TASK}")} for layer in m.head_metrics]
    return entry


def write_outputs(run: RunDir, outcome: ImportanceOutcome) -> list[Path]:
    steps = {c.step for c in outcome.checkpoints}
    heads = pd.concat([importance_rows(outcome.run_id, c.step, c.epoch, c.result) for c in outcome.checkpoints])
    written = [replace_steps(run.head_importance_path, heads, steps)]
    if outcome.settings.curves:
        curves = pd.concat([curve_rows(outcome.run_id, c.step, c.epoch, c.result) for c in outcome.checkpoints])
        written.append(replace_steps(run.importance_curves_path, curves, steps))
    written.append(write_report(run.importance_report_path, outcome))
    if outcome.settings.figures:
        configure_cache_dirs(run.path)  # matplotlib's cache inside the run dir, never $HOME
        from headlab.plots.importance import TaskView, plot_importance  # matplotlib only when figures are asked for

        newest = max(outcome.checkpoints, key=lambda c: c.step)
        all_heads = pd.read_parquet(written[0])
        all_curves = pd.read_parquet(written[1]) if outcome.settings.curves else None
        task = None if newest.task_roles is None else TaskView(newest.task_queries, newest.task_roles, newest.task_metrics)
        written.append(plot_importance(all_heads, run.figure(IMPORTANCE_FIGURE), newest.step, newest.roles, all_curves, task))
        if outcome.redundancy is not None:
            from headlab.plots.importance import plot_redundancy

            written.append(plot_redundancy(outcome.redundancy, run.figure(REDUNDANCY_FIGURE)))
        written += write_timeline(run, all_heads)
    return written


def write_timeline(run: RunDir, head_importance: Any) -> list[Path]:
    """`figures/importance_timeline.png` when the run has importance at two or more steps (kept
    checkpoints measured here, or the callback's `grad_importance`), with the roles of head_metrics."""
    from headlab.plots.importance import importance_trajectory, plot_importance_timeline  # matplotlib: figures only

    try:
        head_metrics = run.head_metrics()
    except FileNotFoundError:
        head_metrics = None
    found = importance_trajectory(head_importance, head_metrics)
    if found is None:
        return []
    trajectory, metric = found
    return [plot_importance_timeline(trajectory, metric, run.figure(IMPORTANCE_TIMELINE_FIGURE), head_metrics)]


def write_report(path: Path, outcome: ImportanceOutcome) -> Path:
    """importance.json: per checkpoint, the intact scores, how concentrated importance is, the top heads."""
    entries = {}
    if path.is_file():
        entries = {e["step"]: e for e in json.loads(path.read_text(encoding="utf-8")).get("checkpoints", [])}
    for c in outcome.checkpoints:
        r = c.result
        entries[c.step] = {
            "step": c.step, "epoch": c.epoch, "checkpoint": c.checkpoint, "split": outcome.settings.split,
            "base": r.base.row(0), "n_heads": int((~r.random.isnan()).sum()),
            "heads_for_half_ablation_effect": r.heads_for_half_effect(),
            "top_heads": {k: [f"L{l}H{h}" for l, h in rank_heads(r.scores(k))[:5]] for k in RANKINGS},
            "leave_one_layer_in_acc": None if r.layers is None else [round(float(a), 6) for a in r.layers.acc],
            "roles": c.roles,
            "task_roles": c.task_roles, "task_queries": c.task_queries,
        }
    redundancy = None if outcome.redundancy is None else {k: v for k, v in outcome.redundancy.items() if k != "js"}
    atomic_write_json(path, {"run_id": outcome.run_id, "settings": asdict(outcome.settings),
                             "checkpoints": [entries[s] for s in sorted(entries)], "redundancy": redundancy,
                             "redundant_heads": None if redundancy is None else redundancy["redundant_heads"]})
    return path


def compute_sweep(sweep: SweepDir, which: str, settings: ImportanceSettings) -> tuple[list[Run], list[tuple[Run, ImportanceOutcome]]]:
    """(every job of the sweep, [(usable job, its outcome)]): every job measured before the first file is
    written; one job that cannot be measured is a HeadlabError naming it."""
    require_writable(sweep.path)  # the aggregate is written there, after every job was measured
    runs = discover_runs(sweep)
    usable = [r for r in runs if r.usable]
    if not usable:
        raise HeadlabError(f"{sweep.path}: no usable job in the sweep (none completed with readable files)")
    outcomes = []
    for run in usable:
        try:
            outcomes.append((run, compute(run.files, which, settings)))
        except HeadlabError as err:
            raise HeadlabError(f"job {run.job} ({run.config}, seed {run.seed}): {err}") from None
    return runs, outcomes
