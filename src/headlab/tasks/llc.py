"""The local learning coefficient of a finished run at its saved checkpoints: whole model and every head.

`plan` checks the run dir and picks the checkpoints before anything heavy runs (a bad run dir is one
`HeadlabError`, nothing written); `compute` samples each chosen checkpoint with devinterp's SGLD
(`headlab.interventions.llc`); `write_outputs` writes, only after every estimate exists:
- `head_metrics.parquet`: rows `rllc` and `rllc_std` per (step, layer, head), one part file per step
  beside the training's parts. A rerun replaces the run's earlier LLC parts (a part file is overwritten
  in place where the step is the same, so a crash leaves each step's old or new rows, never both) and
  never touches a part with other metrics. The whole model's LLC is no head's: it lives in llc.parquet,
  where tools that read head_metrics.parquet as heads (sweep aggregation, the view) never see it.
- `llc.parquet`: one row per estimate (whole model at layer = head = -1) with its spread over chains,
  devinterp's own estimator, the largest drift and the `flat` diagnostic; `llc.json`: settings, the
  checkpoints used and why, seconds per estimate; `figures/llc.png`.
`headlab-llc` (`headlab.cli.llc`) is the command line; its settings are `LLCCommand` (`--cfg job` prints
them).
`headlab.reload` and `headlab.data` are imported in the functions that use them: they load Lightning (headlab.data's
package), which importing this module for its schema must not (`headlab-llc --help` and a config mistake answer at once).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, List, Optional

import numpy as np
import pandas as pd
import torch
from omegaconf import MISSING

from headlab.config.values import check_choice, check_device, check_int
from headlab.errors import ConfigError, DataError
from headlab.interventions.llc import SGLDSettings, classifier_rows, estimate_head_llcs, head_metric_frame, llc_rows
from headlab.store import RunDir, atomic_write_json
from headlab.store.atomic import atomic_write_with
from headlab.store.faults import require_writable
from headlab.store.run_dir import RunCheckpointFile
from headlab.store.tables import append_part
from headlab.tasks.threads import set_torch_threads

LLC_FILE, LLC_REPORT, LLC_FIGURE = "llc.parquet", "llc.json", "llc.png"
HEAD_METRICS_WRITTEN = ("rllc", "rllc_std")  # what headlab-llc adds to head_metrics.parquet (and only it)


@dataclass
class LLCSettings(SGLDSettings):
    """headlab-llc's `llc:` node (docs/language_models.md, "Per-head refined LLC"): the sampler's settings
    (`SGLDSettings`: its keys, defaults, their calibration and range checks; `seed` also draws the sequences)
    and which checkpoints and sequences it samples. OmegaConf checks the types when the command line is
    composed; the ranges and choices are checked here."""

    # which checkpoints: at most `checkpoints` of the run's saved ones, spread evenly in log(step) (dense
    # early, where heads form), the newest always among them; `steps` names them instead (each must be saved)
    checkpoints: int = 6
    steps: Optional[List[int]] = None
    whole_model: bool = True  # the whole model's LLC (rows layer = head = -1) beside every head's rLLC
    split: str = "train"  # the sequences the loss is sampled on: train (the LLC's L_n), val or test
    max_sequences: int = 512  # at most this many of the split (a seeded draw, `seed`)
    figures: bool = True  # figures/llc.png
    device: str = "cpu"
    threads: Optional[int] = 1  # torch threads (null: torch's default); 1 is fastest for these small models

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("llc.checkpoints", self.checkpoints, 1)
        if self.steps is not None and (not self.steps or any(s < 0 for s in self.steps)):
            raise ConfigError("llc.steps", list(self.steps), "null or a non-empty list of saved steps (integers >= 0)")
        check_choice("llc.split", self.split, ("train", "val", "test"))
        check_int("llc.max_sequences", self.max_sequences, 1)
        if self.batch_size > self.max_sequences:
            raise ConfigError("llc.batch_size", self.batch_size, f"at most llc.max_sequences={self.max_sequences}")
        check_device("llc.device", self.device)
        if self.threads is not None:
            check_int("llc.threads", self.threads, 1)


@dataclass
class LLCCommand:
    """`headlab-llc run_dir=RUN [llc.KEY=VALUE ...]`."""

    run_dir: str = MISSING  # a finished headlab-train run (its config and checkpoints/)
    llc: LLCSettings = field(default_factory=LLCSettings)


@dataclass
class CheckpointLLC:
    step: int
    epoch: int
    checkpoint: str
    estimates: list  # headlab.interventions.llc.LLCEstimate, whole model first
    seconds: float


@dataclass
class LLCPlan:
    run: RunDir
    cfg: Any
    language_model: bool
    saved: list[RunCheckpointFile]  # every checkpoint the run kept, one per step
    chosen: list[RunCheckpointFile]
    note: str  # which checkpoints and why, in words


@dataclass
class LLCOutcome:
    run_id: str
    settings: LLCSettings
    plan: LLCPlan
    checkpoints: list[CheckpointLLC] = field(default_factory=list)
    n_sequences: int = 0


def log_spaced(steps: Sequence[int], k: int) -> list[int]:
    """At most `k` of the sorted `steps`, spread evenly in log(1 + step): dense early, where heads form,
    sparse late; the first and last always among them.

    >>> log_spaced([100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 2000, 3000], 4)
    [100, 300, 1000, 3000]
    """
    steps = sorted(set(int(s) for s in steps))
    if len(steps) <= k:
        return steps
    if k == 1:
        return [steps[-1]]
    logs = np.log1p(np.asarray(steps, dtype=float))
    chosen: list[int] = []
    for target in np.linspace(logs[0], logs[-1], k):
        free = [i for i in range(len(steps)) if i not in chosen]
        chosen.append(min(free, key=lambda i: abs(logs[i] - target)))
    return [steps[i] for i in sorted(chosen)]


def plan(run: RunDir, settings: LLCSettings) -> LLCPlan:
    """The run's config and the checkpoints to sample, checked before anything heavy runs: not a run dir,
    no checkpoints, a `llc.steps` entry the run did not save, a run dir that cannot be written: one error."""
    from headlab.reload import is_language_model, run_config

    cfg = run_config(run)
    saved = run.find_checkpoints("all")
    by_step = {c.step: c for c in saved}
    if settings.steps is not None:
        missing = sorted(set(settings.steps) - set(by_step))
        if missing:
            raise DataError(run.checkpoints_dir, f"has no checkpoint at llc.steps {missing} (saved steps: "
                                                 f"{', '.join(map(str, sorted(by_step)))})")
        steps = sorted(set(settings.steps))
        why = f"{len(steps)} of {len(saved)} saved checkpoints, as llc.steps names them"
    else:
        steps = log_spaced(sorted(by_step), settings.checkpoints)
        why = (f"all {len(saved)} saved checkpoints" if len(steps) == len(saved)
               else f"{len(steps)} of {len(saved)} saved checkpoints, log-spaced in step (llc.checkpoints={settings.checkpoints})")
        if len(saved) == 1:
            why += ("; the run kept only one, so there is no curve: train with "
                    "+callbacks.checkpoint.keep_every_n_train_steps=N to keep one every N steps")
    require_writable(run.path)
    if settings.figures and run.figures_dir.is_dir():
        require_writable(run.figures_dir)
    chosen = [by_step[s] for s in steps]
    return LLCPlan(run, cfg, is_language_model(cfg), saved, chosen, f"{why}: steps {', '.join(map(str, steps))}")


def sampling_rows(datamodule: Any, language_model: bool, settings: LLCSettings) -> Any:
    """The rows SGLD draws its batches from: `llc.max_sequences` of the split (a draw seeded by
    `llc.seed`), an LM's token windows as they are, a classifier's examples packed (`classifier_rows`)."""
    from headlab.data.tokenizer import PAD_ID

    generator = torch.Generator().manual_seed(settings.seed)
    if language_model:
        tokens = datamodule.splits[settings.split]
        keep = torch.randperm(tokens.size(0), generator=generator)[:settings.max_sequences]
        return tokens[keep.sort().values]
    dataset = getattr(datamodule, f"{settings.split}_dataloader")().dataset
    keep = torch.randperm(len(dataset), generator=generator)[:settings.max_sequences].sort().values
    return classifier_rows([dataset[int(i)] for i in keep], PAD_ID)


def compute(llc_plan: LLCPlan, settings: LLCSettings, progress: Callable[[str], None] = lambda line: None) -> LLCOutcome:
    """Every chosen checkpoint's estimates (whole model unless `llc.whole_model=false`, then each head),
    before anything is written."""
    from headlab.reload import build_datamodule, load_matching_network

    set_torch_threads(settings.threads)
    run = llc_plan.run
    datamodule = build_datamodule(llc_plan.cfg)
    rows = sampling_rows(datamodule, llc_plan.language_model, settings)
    if rows.size(0) < settings.batch_size:
        raise DataError(run.path, f"its {settings.split} split has {rows.size(0)} sequences, fewer than llc.batch_size="
                                  f"{settings.batch_size}")
    outcome = LLCOutcome(run.run_id, settings, llc_plan, n_sequences=int(rows.size(0)))
    for ckpt in llc_plan.chosen:
        net = load_matching_network(ckpt.path, llc_plan.cfg, datamodule).to(settings.device)
        if any(block.attn.domain_qkv is not None for block in net.blocks):
            raise DataError(ckpt.path, "has per-domain Q/K/V pipelines (model.domain_split_layers): a head's weights "
                                       "are not one slice, headlab-llc samples shared heads only")
        start = time.perf_counter()
        estimates = estimate_head_llcs(net, rows, settings, whole_model=settings.whole_model)
        seconds = time.perf_counter() - start
        outcome.checkpoints.append(CheckpointLLC(ckpt.step, ckpt.epoch, str(ckpt.path), estimates, seconds))
        progress(f"step {ckpt.step}: {describe(estimates)} ({seconds:.0f} s)")
    return outcome


def describe(estimates: Sequence[Any]) -> str:
    """One line: the whole model's LLC and the heads' rLLC range, with how many chains look unsettled."""
    heads = [e for e in estimates if e.metric == "rllc"]
    parts = [f"LLC {e.value:.2f} +- {e.std:.2f}" for e in estimates if e.metric == "llc"]
    if heads:
        top = max(heads, key=lambda e: e.value)
        parts.append(f"rLLC {min(e.value for e in heads):.3f}..{top.value:.3f} (highest L{top.layer}H{top.head})")
    unsettled = sum(not e.flat for e in estimates)
    if unsettled:
        parts.append(f"{unsettled} of {len(estimates)} not flat")
    return ", ".join(parts)


def estimate_frame(outcome: LLCOutcome) -> pd.DataFrame:
    """llc.parquet: one row per estimate (`llc_rows` plus run_id, epoch and seconds)."""
    frames = []
    for c in outcome.checkpoints:
        rows = llc_rows(c.step, c.estimates)
        rows.insert(0, "run_id", outcome.run_id)
        rows.insert(2, "epoch", c.epoch)
        rows["seconds"] = [e.seconds for e in c.estimates]
        frames.append(rows)
    return pd.concat(frames, ignore_index=True)


def write_outputs(run: RunDir, outcome: LLCOutcome) -> list[Path]:
    parts = {c.step: head_metric_frame(outcome.run_id, c.step, c.epoch, c.estimates) for c in outcome.checkpoints}
    written = replace_llc_parts(run.head_metrics_path, {s: p for s, p in parts.items() if not p.empty})
    table, estimates = run.path / LLC_FILE, estimate_frame(outcome)
    # a rerun replaces the run's LLC estimates as a whole (one set of settings per run), atomically
    atomic_write_with(table, lambda tmp: estimates.to_parquet(tmp, index=False))
    written.append(table)
    written.append(write_report(run.path / LLC_REPORT, outcome))
    if outcome.settings.figures:
        from headlab.plots.llc import plot_llc
        from headlab.store.run_info import configure_cache_dirs

        configure_cache_dirs(run.path)  # matplotlib's cache inside the run dir, never $HOME
        lm = run.summary.get("lm") or {}
        written.append(plot_llc(estimates, run.figure(LLC_FIGURE), onsets=lm.get("induction_onset_steps"),
                                loss_drop_step=lm.get("loss_drop_step"), roles=lm.get("final_roles")))
    return written


def replace_llc_parts(table_dir: Path, parts: dict[int, pd.DataFrame]) -> list[Path]:
    """Write each step's LLC rows as its own part of the head_metrics dataset folder; earlier LLC parts
    (parts holding only `HEAD_METRICS_WRITTEN` metrics) are overwritten in place at the same step and
    removed at other steps. Parts with any other metric are never touched."""
    import pyarrow.parquet as pq

    if table_dir.is_file():  # a single-file table (an older layout): rewrite it with the new rows
        old = pd.read_parquet(table_dir)
        kept = old[~old["metric"].isin(HEAD_METRICS_WRITTEN)]
        frame = pd.concat([kept, *parts.values()], ignore_index=True)
        atomic_write_with(table_dir, lambda tmp: frame.to_parquet(tmp, index=False))
        return [table_dir]
    earlier: dict[int, list[Path]] = {}
    if table_dir.is_dir():
        for path in sorted(table_dir.glob("part-*.parquet")):
            metrics = set(pq.read_table(path, columns=["metric"]).column("metric").to_pylist())
            if metrics and metrics <= set(HEAD_METRICS_WRITTEN):
                earlier.setdefault(int(path.name.split("-")[1]), []).append(path)
    written = []
    for step, rows in sorted(parts.items()):
        old = earlier.pop(step, [])
        if old:
            atomic_write_with(old[0], lambda tmp, rows=rows: rows.to_parquet(tmp, index=False))
            written.append(old[0])
            for extra in old[1:]:
                extra.unlink()
        else:
            written.append(append_part(table_dir, step, rows))
    for paths in earlier.values():  # steps this run no longer samples
        for path in paths:
            path.unlink()
    return [table_dir] if written else []


def write_report(path: Path, outcome: LLCOutcome) -> Path:
    """llc.json: the settings, which checkpoints and why, the sequences, seconds per checkpoint and estimate."""
    settings = asdict(outcome.settings)
    report = {
        "run_id": outcome.run_id, "settings": settings, "checkpoints_used": outcome.plan.note,
        "saved_steps": [c.step for c in outcome.plan.saved], "split": outcome.settings.split,
        "n_sequences": outcome.n_sequences, "model": "causal LM" if outcome.plan.language_model else "classifier",
        "checkpoints": [{"step": c.step, "epoch": c.epoch, "checkpoint": Path(c.checkpoint).name,
                         "seconds": round(c.seconds, 2),
                         "seconds_whole_model": _round([e.seconds for e in c.estimates if e.metric == "llc"]),
                         "seconds_per_head": _round([e.seconds for e in c.estimates if e.metric == "rllc"]),
                         "not_flat": [_label(e) for e in c.estimates if not e.flat]}
                        for c in outcome.checkpoints],
    }
    atomic_write_json(path, report)
    return path


def _round(values: list[float]) -> float | None:
    return round(float(np.mean(values)), 2) if values else None


def _label(e: Any) -> str:
    return "whole model" if e.metric == "llc" else f"L{e.layer}H{e.head}"
