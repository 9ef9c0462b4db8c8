"""Iterative head pruning of a finished run: computed, then written into the run directory.

`compute` prunes the run's checkpoint round by round (`headlab.interventions.pruning`), optionally
fine-tuning, and times the pruned network against the unpruned one, all before anything is
written; `write_outputs` adds `prune_curve.parquet`, `prune.json`, `pruned/<label>.ckpt` and
`figures/prune_curve.png`. `headlab-prune` (`headlab.cli.prune`) is the command line.

`prune.selection` says which examples steer the loop: `val` (the whole validation split ranks the
heads and decides the stop; the drop it reports is read on those same examples) or `val_half`
(`val_halves`: half A, the even positions of the validation split in the order the datamodule
gives it, ranks and stops; half B, the odd positions, and the test split are only scored for the
record, so their drops are held-out readings).

The command's settings are `PruneCommand` (`--cfg job` prints them).
`headlab.reload` is imported in the functions that use it: it loads Lightning (through headlab.data), which
importing this module for its schema must not (`headlab-prune --help` and a config mistake answer at once).
"""

from __future__ import annotations

import functools
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

import pandas as pd
import torch
from omegaconf import MISSING

from headlab.config.values import check_choice, check_device, check_int
from headlab.errors import ConfigError, DataError
from headlab.interventions.pruning import PRUNE_RANKINGS, PRUNE_SELECTIONS, finetune_steps, iterative_prune
from headlab.interventions.timing import measure_speedup
from headlab.model.encoder import count_parameters
from headlab.tasks.threads import set_torch_threads
from headlab.store import RunDir, SweepDir, atomic_write_json, atomic_write_with
from headlab.store.run_dir import PRUNE_CURVE_FIGURE
from headlab.store.run_info import configure_cache_dirs
from headlab.sweep.importance import METRIC, seed_averaged_importance
from headlab.sweep.runs import discover_runs

SPLITS = ("val", "test")
# selection=val_half: the split names of validation half A (ranks the heads, decides the stop) and half B (held out)
HALF_A, HALF_B = "val_a", "val_b"
HALVES_RULE = "even / odd positions of the validation split in the datamodule's order (half A: 0, 2, 4, ...; half B: 1, 3, 5, ...)"


@dataclass
class PruneSettings:
    """headlab-prune's `prune:` node (docs/importance.md#headlab-prune). OmegaConf checks the types when the
    command line is composed; the ranges and choices are checked here."""

    ranking: str = "ablation"  # ablation, gradient, random (the control), or seed_avg (a sweep job: ablation averaged over its config's seeds)
    fraction_per_step: float = 0.1  # remove this share of the REMAINING heads per round (at least one), in (0, 1)
    max_drop: float = 0.01  # stop before val accuracy falls more than this below the unpruned model's (0.01 = 1 point)
    selection: str = "val"  # val: the whole val split ranks and stops; val_half: its half A does, half B and test are held out
    finetune_steps: int = 0  # AdamW steps on the train split after each round (0: no fine-tune)
    finetune_lr: float = 1e-4  # a low lr: recover, not retrain
    recompute: bool = True  # re-rank the remaining heads after every round (always, when fine-tuning)
    normalize_layers: bool = True  # gradient ranking: per-layer L2-normalised scores, as Michel et al. prune
    random_seed: int = 0  # the random ranking's scores, and the fine-tune batch order and dropout
    checkpoint: str = "last"  # last or best: the checkpoint to prune
    batch_size: int = 128  # examples per forward
    max_rows: int = 4096  # batched ablation: sequences per forward
    figures: bool = True  # figures/prune_curve.png
    device: str = "cpu"
    threads: Optional[int] = None
    speedup: bool = True  # time the pruned network against the unpruned one (batch 1 and 64, seq data.max_len) into prune.json
    speedup_rounds: int = 30  # timed rounds per batch size, interleaved; the speed-up is the ratio of the medians

    def __post_init__(self) -> None:
        check_choice("prune.ranking", self.ranking, PRUNE_RANKINGS)
        check_choice("prune.selection", self.selection, PRUNE_SELECTIONS)
        if not 0.0 < self.fraction_per_step < 1.0:
            raise ConfigError("prune.fraction_per_step", self.fraction_per_step, "a number in (0, 1), e.g. 0.1")
        if self.max_drop < 0:
            raise ConfigError("prune.max_drop", self.max_drop, "an accuracy drop >= 0, e.g. 0.01 for one point")
        if self.finetune_lr <= 0:
            raise ConfigError("prune.finetune_lr", self.finetune_lr, "a learning rate > 0")
        check_int("prune.finetune_steps", self.finetune_steps, 0)
        for key in ("batch_size", "max_rows", "speedup_rounds"):
            check_int(f"prune.{key}", getattr(self, key), 1)
        if self.threads is not None:
            check_int("prune.threads", self.threads, 1)
        check_choice("prune.checkpoint", self.checkpoint, ("last", "best"))
        check_device("prune.device", self.device)

    @property
    def label(self) -> str:
        """`<ranking>-ft<steps>` (selection=val) or `<ranking>-valhalf-ft<steps>` (val_half): one pruned checkpoint
        and one curve per ranking, selection and fine-tune length."""
        return f"{self.ranking}{'-valhalf' if self.selection == 'val_half' else ''}-ft{self.finetune_steps}"


@dataclass
class PruneCommand:
    """`headlab-prune run_dir=RUN [prune.KEY=VALUE ...]`."""

    run_dir: str = MISSING  # a finished headlab-train run (holds its config and checkpoints/)
    prune: PruneSettings = field(default_factory=PruneSettings)


@dataclass
class PruneOutcome:
    run_id: str
    settings: PruneSettings
    checkpoint: Any  # headlab.store.RunCheckpointFile
    result: Any  # headlab.interventions.pruning.PruneResult
    n_params: int
    speedup: dict[str, Any] | None = None  # prune.json's `speedup` (None: prune.speedup=false)
    halves: dict[str, Any] | None = None  # selection=val_half: prune.json's `val_halves` (rule, n_a, n_b)

    @property
    def select(self) -> str:
        """The split that ranked the heads and decided the stop (a key of each step's `scores`)."""
        return selected_split(self.settings.selection)


def selected_split(selection: str) -> str:
    return HALF_A if selection == "val_half" else "val"


def val_halves(n: int) -> tuple[list[int], list[int]]:
    """Positions of validation half A (even) and half B (odd) among the split's `n` examples: disjoint,
    covering, sizes ceil(n/2) and floor(n/2). The split is already a seeded, stratified shuffle
    (`headlab.data.split`), so alternate positions are two random halves with the class mix kept.

    >>> val_halves(5)
    ([0, 2, 4], [1, 3])
    """
    return list(range(0, n, 2)), list(range(1, n, 2))


def eval_splits(datamodule: Any, settings: PruneSettings) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The batched splits the loop scores: `val`, `test` (selection=val), or `val_a`, `val_b`, `test`
    (val_half), with val_half's `val_halves` record (None for val)."""
    from headlab.reload import eval_batches

    batches = functools.partial(eval_batches, datamodule, batch_size=settings.batch_size, device=settings.device)
    if settings.selection == "val":
        return {name: batches(name) for name in SPLITS}, None
    n = len(datamodule.val_dataloader().dataset)
    if n < 2:
        raise DataError("val", f"prune.selection=val_half needs two or more val examples to halve; the split has {n}")
    half_a, half_b = val_halves(n)
    splits = {HALF_A: batches("val", positions=half_a), HALF_B: batches("val", positions=half_b), "test": batches("test")}
    return splits, {"rule": HALVES_RULE, "n_a": len(half_a), "n_b": len(half_b)}


def compute(run: RunDir, settings: PruneSettings) -> PruneOutcome:
    """The pruned network, its curve and its measured speed-up, computed before anything is written."""
    from headlab.reload import build_datamodule, eval_batches, load_matching_network, run_config

    cfg = run_config(run)
    (checkpoint,) = run.find_checkpoints(settings.checkpoint)[-1:]
    threads = set_torch_threads(settings.threads)
    datamodule = build_datamodule(cfg)
    splits, halves = eval_splits(datamodule, settings)
    net = load_matching_network(checkpoint.path, cfg, datamodule).to(settings.device)
    finetune = None  # None: prune without fine-tuning
    if settings.finetune_steps > 0:
        train = eval_batches(datamodule, "train", settings.batch_size, settings.device)
        finetune = functools.partial(finetune_steps, batches=train, steps=settings.finetune_steps,
                                     lr=settings.finetune_lr, seed=settings.random_seed)

    fixed = seed_avg_scores(run, net.heads_per_layer) if settings.ranking == "seed_avg" else None
    n_params = count_parameters(net, non_embedding=False)
    result = iterative_prune(net, splits, ranking=settings.ranking, fraction_per_step=settings.fraction_per_step,
                             max_drop=settings.max_drop, recompute=settings.recompute, normalize=settings.normalize_layers,
                             random_seed=settings.random_seed, finetune=finetune, max_rows=settings.max_rows,
                             count_parameters=lambda m: count_parameters(m, non_embedding=False), fixed_scores=fixed,
                             select=selected_split(settings.selection))
    speedup = None
    if settings.speedup:
        speedup = measured_speedup(net, result.net, int(cfg.data.max_len), settings.speedup_rounds, settings.device, threads)
    return PruneOutcome(run.run_id, settings, checkpoint, result, n_params, speedup, halves)


SPEEDUP_BATCHES = (1, 64)


def measured_speedup(unpruned: Any, pruned: Any, seq: int, rounds: int, device: str, threads: int) -> dict[str, Any]:
    """prune.json's `speedup`: unpruned / pruned median ms per forward at batch 1 and 64 (`batch_<n>`), with
    the medians (`ms_batch_<n>`: [unpruned, pruned]). Nothing pruned: 1.0 by definition, not timed (`rounds` 0)."""
    seq = min(seq, unpruned.config.max_len)
    out: dict[str, Any] = {"rounds": rounds, "threads": threads, "seq": seq, "device": device}
    if sum(pruned.heads_per_layer) == sum(unpruned.heads_per_layer):
        return {**out, "rounds": 0, **{f"batch_{b}": 1.0 for b in SPEEDUP_BATCHES},
                **{f"ms_batch_{b}": None for b in SPEEDUP_BATCHES}}
    for batch in SPEEDUP_BATCHES:
        found = measure_speedup(unpruned, pruned, batch, seq, unpruned.config.vocab_size, rounds, device=device)
        out[f"batch_{batch}"] = found.ratio
        out[f"ms_batch_{batch}"] = [found.reference_ms, found.candidate_ms]
    return out


def seed_avg_scores(run: RunDir, heads_per_layer: list[int]) -> Any:
    """`[layer, head]` ablation importance of the run's heads averaged over the seeds of its sweep
    config (the run's parent is the sweep folder; heads matched as in `headlab-aggregate`).
    A run outside a sweep, or a config whose seeds lack `head_importance.parquet`: one ConfigError line."""
    run_dir = run.path.resolve()
    not_in_sweep = f"a run inside a sweep folder (a job dir 0/, 1/, ... of a Hydra multirun); {run_dir} is not one"
    try:
        runs = discover_runs(SweepDir(run_dir.parent)) if run_dir.name.isdigit() else []
    except DataError:
        runs = []
    this = [r for r in runs if r.job == run_dir.name and r.usable]
    if not this:
        raise ConfigError("prune.ranking", "seed_avg", not_in_sweep)
    seeds = [r for r in runs if r.usable and r.config == this[0].config]
    averaged = seed_averaged_importance(seeds, this[0].job)
    if averaged.empty:
        raise ConfigError("prune.ranking", "seed_avg", f"two or more seeds of this run's sweep config ({this[0].config}) with "
                          f"head_importance.parquet and head metrics, every layer matched (run headlab-importance on each seed)")
    scores = torch.full((len(heads_per_layer), max(heads_per_layer)), float("nan"), dtype=torch.float64)
    for row in averaged.itertuples(index=False):
        if row.layer < len(heads_per_layer) and row.head < heads_per_layer[row.layer]:
            scores[row.layer, row.head] = getattr(row, f"{METRIC}_mean")
    if any(torch.isnan(scores[layer, :n]).any() for layer, n in enumerate(heads_per_layer)):
        raise ConfigError("prune.ranking", "seed_avg", "seed-averaged importance for every head of the network; "
                          f"{RunDir(run_dir).head_importance_path} does not cover them all")
    return scores


def curve_frame(outcome: PruneOutcome) -> Any:
    """Long rows: one per (prune round, split metric), with the round's heads and parameter counts, and
    the `selection` that steered the loop. Under val_half each round also has the held-out drops from
    the unpruned network, `val_b_acc_drop` and `test_acc_drop` (before - after: positive = worse)."""
    s, records = outcome.settings, []
    base = outcome.result.steps[0]
    total_heads = base.n_heads
    for step in outcome.result.steps:
        common = (outcome.run_id, outcome.checkpoint.step, outcome.checkpoint.epoch, s.ranking, s.finetune_steps,
                  s.selection, step.index, step.n_heads, 1 - step.n_heads / total_heads, step.n_params,
                  1 - step.n_params / outcome.n_params, ",".join(f"L{l}H{h}" for l, h in step.removed), step.accepted)
        for split, scores in step.scores.items():
            records += [(*common, f"{split}_{m}", float(getattr(scores, m)[0])) for m in ("loss", "acc", "f1")]
        if s.selection == "val_half":
            records += [(*common, f"{split}_acc_drop", _drop(base, step, split)) for split in (HALF_B, "test")]
    columns = ["run_id", "step", "epoch", "ranking", "finetune_steps", "selection", "prune_step", "n_heads",
               "fraction_heads_pruned", "n_params", "fraction_params_pruned", "removed", "accepted", "metric", "value"]
    return pd.DataFrame(records, columns=columns)


def _drop(before: Any, after: Any, split: str) -> float:
    """Accuracy of `split` at round `before` minus at round `after` (PruneSteps)."""
    return float(before.scores[split].acc[0]) - float(after.scores[split].acc[0])


def write_outputs(run: RunDir, outcome: PruneOutcome) -> list[Path]:
    from headlab.reload import save_pruned

    s = outcome.settings
    path = run.prune_curve_path
    rows = curve_frame(outcome)
    if path.is_file():
        old = pd.read_parquet(path)
        if "selection" not in old.columns:  # a curve written before prune.selection existed: all of it was val
            old.insert(old.columns.get_loc("finetune_steps") + 1, "selection", "val")
        same = ((old["ranking"] == s.ranking) & (old["finetune_steps"] == s.finetune_steps)
                & (old["selection"] == s.selection) & (old["step"] == outcome.checkpoint.step))
        rows = pd.concat([old[~same], rows], ignore_index=True)
    atomic_write_with(path, lambda tmp: rows.to_parquet(tmp, index=False))
    pruned = save_pruned(run.pruned_checkpoint(s.label), outcome.result.net, outcome.result.removed,
                          step=outcome.checkpoint.step, epoch=outcome.checkpoint.epoch,
                          pruned_from=run.relative(outcome.checkpoint.path), settings=asdict(s))
    written = [path, pruned]
    report_path = run.prune_report_path
    report = json.loads(report_path.read_text(encoding="utf-8")) if report_path.is_file() else {}
    kept = [st for st in outcome.result.steps if st.accepted][-1]
    base, select = outcome.result.steps[0], outcome.select
    report[s.label] = {
        "checkpoint": run.relative(outcome.checkpoint.path), "step": outcome.checkpoint.step, "settings": asdict(s),
        "pruned_checkpoint": run.relative(written[1]), "heads_removed": [f"L{l}H{h}" for l, hs in enumerate(outcome.result.removed) for h in sorted(hs)],
        "n_heads": [base.n_heads, kept.n_heads], "n_params": [outcome.n_params, kept.n_params],
        "fraction_heads_pruned": 1 - kept.n_heads / base.n_heads, "fraction_params_pruned": 1 - kept.n_params / outcome.n_params,
        "val_acc": [float(base.scores[select].acc[0]), float(kept.scores[select].acc[0])],
        "test_acc": [float(base.scores["test"].acc[0]), float(kept.scores["test"].acc[0])],
        "selection": s.selection, "test_acc_drop": _drop(base, kept, "test"),
        "heldout_acc": None, "heldout_acc_drop": None,
    }
    if s.selection == "val_half":  # val_acc is half A's (what the stop read); half B is the held-out reading
        report[s.label].update({"heldout_acc": [float(base.scores[HALF_B].acc[0]), float(kept.scores[HALF_B].acc[0])],
                                "heldout_acc_drop": _drop(base, kept, HALF_B), "val_halves": outcome.halves})
    if outcome.speedup is not None:
        report[s.label]["speedup"] = outcome.speedup
    atomic_write_json(report_path, report)
    written.append(report_path)
    if s.figures:
        configure_cache_dirs(run.path)
        from headlab.plots.importance import plot_prune_curve  # matplotlib after its cache dir is set, figures only

        shown = rows[rows["selection"] == s.selection]  # the accuracy the stop rule read: val_acc or val_a_acc
        written.append(plot_prune_curve(shown, run.figure(PRUNE_CURVE_FIGURE), metric=f"{outcome.select}_acc"))
    return written


def summary_lines(outcome: PruneOutcome) -> list[str]:
    """What the command prints after the files: heads and parameters removed, accuracy, speed-up."""
    kept, base, select = [s for s in outcome.result.steps if s.accepted][-1], outcome.result.steps[0], outcome.select
    lines = [f"removed {sum(map(len, outcome.result.removed))} of {base.n_heads} heads "
             f"({1 - kept.n_params / outcome.n_params:.1%} of parameters); "
             f"{'val' if select == 'val' else 'val half A'} acc {kept.scores[select].acc[0]:.4f} "
             f"vs {base.scores[select].acc[0]:.4f} unpruned"]
    if select != "val":
        lines.append(f"held out: val half B acc {kept.scores[HALF_B].acc[0]:.4f} vs {base.scores[HALF_B].acc[0]:.4f}, "
                     f"test acc {kept.scores['test'].acc[0]:.4f} vs {base.scores['test'].acc[0]:.4f} unpruned")
    sp = outcome.speedup
    if sp is not None and sp["rounds"] == 0:
        lines.append("speed-up 1.0 (no head removed: not timed)")
    elif sp is not None:
        lines.append(f"speed-up (unpruned / pruned, median of {sp['rounds']} rounds, seq {sp['seq']}, "
                     f"{sp['threads']} threads): {sp['batch_1']:.3f}x at batch 1, {sp['batch_64']:.3f}x at batch 64")
    return lines
