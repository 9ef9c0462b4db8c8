"""`headlab-importance RUN_DIR [--checkpoint last|best|all] [importance.KEY=VALUE ...]`: which heads matter.

For each chosen checkpoint of a finished run: every head ablated alone (change in loss, accuracy,
macro-F1), gradient importance (Michel et al. 2019), a random control, keep-top-k and
leave-one-layer-in curves, and the heads' roles on the run's probe set. Writes into RUN_DIR
`head_importance.parquet`, `importance_curves.parquet`, `importance.json`, `figures/importance.png`
and, when importance exists at two or more steps, `figures/importance_timeline.png` (rows of other
checkpoints already there are kept). Settings:
conf/importance.yaml. Exit 2 with one line for a bad run dir, checkpoint or setting (nothing written).

`headlab-importance SWEEP_DIR` (a Hydra multirun folder: it holds multirun.yaml) measures every
usable job of the sweep (jobs that did not complete are listed and left out), then runs
`headlab-aggregate` on the sweep, which averages importance over seeds (`headlab.sweep.importance`).
Every job is measured before the first file is written: one job that cannot be measured is one
line naming it, exit 2, nothing written.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from headlab.errors import ConfigError, HeadlabError

PROG = "headlab-importance"
EXIT_CONFIG = 2


@dataclass(frozen=True)
class ImportanceSettings:
    split: str = "val"
    batch_size: int = 128
    max_rows: int = 4096
    normalize_layers: bool = False
    random_seed: int = 0
    curves: bool = True
    figures: bool = True
    device: str = "cpu"
    threads: int | None = None
    redundancy_mass: float = 0.1  # headlab.analysis.redundancy.DEFAULT_MASS (not imported: it loads torch)

    def __post_init__(self) -> None:
        if isinstance(self.redundancy_mass, bool) or not isinstance(self.redundancy_mass, (int, float)) \
                or not 0.0 < self.redundancy_mass <= 1.0:
            raise ConfigError("importance.redundancy_mass", self.redundancy_mass, "a share of attention mass in (0, 1]")
        if self.split not in ("val", "test"):
            raise ConfigError("importance.split", self.split, "val or test")
        for key in ("batch_size", "max_rows"):
            _check_int(f"importance.{key}", getattr(self, key), 1)
        _check_int("importance.random_seed", self.random_seed, None)
        if self.threads is not None:
            _check_int("importance.threads", self.threads, 1)
        for key in ("normalize_layers", "curves", "figures"):
            if not isinstance(getattr(self, key), bool):
                raise ConfigError(f"importance.{key}", getattr(self, key), "true or false")
        check_device("importance.device", self.device)


def _check_int(key: str, value: Any, minimum: int | None) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or (minimum is not None and value < minimum):
        raise ConfigError(key, value, "an integer" + ("" if minimum is None else f" >= {minimum}"))


def check_device(key: str, device: Any) -> None:
    """A torch device string this machine has."""
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ConfigError(key, device, "a torch device: cpu, cuda, cuda:N or mps") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(key, device, "cpu on this machine (no CUDA device is available)")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(key, device, "cpu on this machine (no MPS device is available)")


def settings_from(cfg: Any, node: str, cls: type) -> Any:
    from omegaconf import OmegaConf

    return cls(**OmegaConf.to_container(cfg[node], resolve=True))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="a finished headlab-train run (holds .hydra/ and checkpoints/), "
                        "or a sweep folder (holds multirun.yaml): every usable job, then headlab-aggregate")
    parser.add_argument("--checkpoint", default="last", help="last (default), best, or all (every checkpoint, one per step)")
    parser.add_argument("overrides", nargs="*", help="importance.KEY=VALUE settings of conf/importance.yaml")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_intermixed_args(argv)
    if is_sweep_dir(args.run_dir):
        return sweep_main(args.run_dir, args.checkpoint, args.overrides)
    try:
        outcome = compute(args.run_dir, args.checkpoint, args.overrides)
    except HeadlabError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return EXIT_CONFIG
    for path in write_outputs(args.run_dir, outcome):
        print(f"wrote {path}")
    return 0


def is_sweep_dir(path: Path) -> bool:
    """A Hydra multirun folder (what `headlab-train -m` writes), not a run directory."""
    return (path / "multirun.yaml").is_file() and not (path / ".hydra" / "config.yaml").is_file()


def sweep_main(sweep_dir: Path, which: str, overrides: list[str]) -> int:
    """Every usable job of the sweep measured, then written, then the sweep aggregated (see the module docstring)."""
    from headlab.run.inputs import tool_config
    from headlab.sweep.runs import discover_runs

    try:
        settings = settings_from(tool_config("importance", overrides), "importance", ImportanceSettings)
        runs = discover_runs(sweep_dir)
        usable = [r for r in runs if r.usable]
        if not usable:
            raise HeadlabError(f"{sweep_dir}: no usable job in the sweep (none completed with readable files)")
        outcomes = []
        for run in usable:
            try:
                outcomes.append((run, compute(run.run_dir, which, overrides)))
            except HeadlabError as err:
                raise HeadlabError(f"job {run.job} ({run.config}, seed {run.seed}): {err}") from None
    except HeadlabError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return EXIT_CONFIG
    for run in runs:
        if not run.usable:
            print(f"skipped job {run.job} ({run.config}, seed {run.seed}): {run.status}: {run.reason}")
    for run, outcome in outcomes:
        for path in write_outputs(run.run_dir, outcome):
            print(f"wrote {path}")
    from headlab.sweep import aggregate_sweep

    result = aggregate_sweep(sweep_dir, figures=settings.figures)
    for path in result.written:
        print(f"wrote {path}")
    print(f"{PROG}: measured {len(outcomes)} of {len(runs)} jobs; aggregated into {result.out_dir}")
    return 0


@dataclass
class CheckpointImportance:
    checkpoint: str
    step: int
    epoch: int
    result: Any  # headlab.interventions.HeadImportance
    roles: list[list[str]]


@dataclass
class ImportanceOutcome:
    run_id: str
    settings: ImportanceSettings
    checkpoints: list[CheckpointImportance]
    redundancy: dict[str, Any] | None = None  # see `run_redundancy`


def compute(run_dir: Path, which: str, overrides: list[str]) -> ImportanceOutcome:
    """Everything the outputs need, computed before one file is written (so a failure writes nothing)."""
    from headlab.run.threads import set_torch_threads
    from headlab.run.inputs import build_datamodule, eval_batches, find_checkpoints, load_matching_network, run_config, tool_config

    settings = settings_from(tool_config("importance", overrides), "importance", ImportanceSettings)
    cfg = run_config(run_dir)
    checkpoints = find_checkpoints(run_dir, which)
    set_torch_threads(settings.threads)
    from headlab.interventions import measure_importance

    datamodule = build_datamodule(cfg)
    batches = eval_batches(datamodule, settings.split, settings.batch_size, settings.device)
    results = []
    for ckpt in checkpoints:
        net = load_matching_network(ckpt.path, cfg, datamodule).to(settings.device)
        result = measure_importance(net, batches, normalize=settings.normalize_layers, random_seed=settings.random_seed,
                                    curves=settings.curves, max_rows=settings.max_rows)
        results.append(CheckpointImportance(str(ckpt.path), ckpt.step, ckpt.epoch, result, probe_roles(net, datamodule, settings.device)))
    newest = max(c.step for c in results)
    return ImportanceOutcome(run_id_of(run_dir), settings, results, run_redundancy(run_dir, newest, settings.redundancy_mass))


def run_redundancy(run_dir: Path, step: int, mass: float) -> dict[str, Any] | None:
    """Near-duplicate head clusters per layer from the run's `head_pairs.parquet` (`js`), at the last
    measurement at or before `step`; None when the run has no pair table."""
    from headlab.analysis.redundancy import pair_table_redundancy
    from headlab.store import HEAD_PAIRS, read_table

    try:
        pairs = read_table(run_dir / HEAD_PAIRS)
    except FileNotFoundError:
        return None
    return pair_table_redundancy(pairs, mass, step)


def probe_roles(net: Any, datamodule: Any, device: str) -> list[list[str]]:
    """Each head's role on the run's fixed probe set, through the one measurement seam."""
    from headlab.measure import measure_probe, probe_chunks

    return measure_probe(net, probe_chunks(datamodule.probe_set(), 64, device), weight_metrics=False).roles


def run_id_of(run_dir: Path) -> str:
    summary = run_dir / "summary.json"
    if summary.is_file():
        try:
            return str(json.loads(summary.read_text(encoding="utf-8")).get("run_id") or run_dir.name)
        except json.JSONDecodeError:
            pass
    return run_dir.name


def write_outputs(run_dir: Path, outcome: ImportanceOutcome) -> list[Path]:
    import pandas as pd

    from headlab.run.info import configure_cache_dirs
    from headlab.interventions import HEAD_IMPORTANCE, IMPORTANCE_CURVES, curve_rows, importance_rows
    from headlab.store import replace_steps

    steps = {c.step for c in outcome.checkpoints}
    heads = pd.concat([importance_rows(outcome.run_id, c.step, c.epoch, c.result) for c in outcome.checkpoints])
    written = [replace_steps(run_dir / HEAD_IMPORTANCE, heads, steps)]
    if outcome.settings.curves:
        curves = pd.concat([curve_rows(outcome.run_id, c.step, c.epoch, c.result) for c in outcome.checkpoints])
        written.append(replace_steps(run_dir / IMPORTANCE_CURVES, curves, steps))
    written.append(write_report(run_dir / "importance.json", outcome))
    if outcome.settings.figures:
        configure_cache_dirs(run_dir)  # matplotlib's cache inside the run dir, never $HOME
        from headlab.plots.importance import plot_importance

        newest = max(outcome.checkpoints, key=lambda c: c.step)
        all_heads = pd.read_parquet(written[0])
        all_curves = pd.read_parquet(written[1]) if outcome.settings.curves else None
        written.append(plot_importance(all_heads, run_dir / "figures" / "importance.png", newest.step, newest.roles, all_curves))
        if outcome.redundancy is not None:
            from headlab.plots.importance import plot_redundancy

            written.append(plot_redundancy(outcome.redundancy, run_dir / "figures" / "redundancy.png"))
        written += write_timeline(run_dir, all_heads)
    return written


def write_timeline(run_dir: Path, head_importance: Any) -> list[Path]:
    """`figures/importance_timeline.png` when the run has importance at two or more steps (kept
    checkpoints measured here, or the callback's `grad_importance`), with the roles of head_metrics."""
    from headlab.plots.importance import importance_trajectory, plot_importance_timeline
    from headlab.store import HEAD_METRICS, read_table

    try:
        head_metrics = read_table(run_dir / HEAD_METRICS)
    except FileNotFoundError:
        head_metrics = None
    found = importance_trajectory(head_importance, head_metrics)
    if found is None:
        return []
    trajectory, metric = found
    return [plot_importance_timeline(trajectory, metric, run_dir / "figures" / "importance_timeline.png", head_metrics)]


def write_report(path: Path, outcome: ImportanceOutcome) -> Path:
    """importance.json: per checkpoint, the intact scores, how concentrated importance is, the top heads."""
    from headlab.interventions import RANKINGS, rank_heads
    from headlab.store import atomic_write_json

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
        }
    redundancy = None if outcome.redundancy is None else {k: v for k, v in outcome.redundancy.items() if k != "js"}
    atomic_write_json(path, {"run_id": outcome.run_id, "settings": asdict(outcome.settings),
                             "checkpoints": [entries[s] for s in sorted(entries)], "redundancy": redundancy,
                             "redundant_heads": None if redundancy is None else redundancy["redundant_heads"]})
    return path


if __name__ == "__main__":
    sys.exit(main())
