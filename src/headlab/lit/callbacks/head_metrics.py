"""Measure every head on the fixed probe set during training.

When: at step 0, at early steps up to `early_steps` (the founding article argues roles are
decided in the first few hundred steps), at the end of every training epoch, and at the end of
fit. The early steps are `every_n_steps` apart (`early_spacing="linear"`), or doubling from
`every_n_steps` on (`"log"`: n, 2n, 4n, ..., as Pythia spaces its early checkpoints), which
resolves when a role forms to within a factor of two for a fraction of the measurements.

Two schedules can land a few steps apart (an epoch of 250 steps ends at 250, the log cadence
measures again at 256). Both are kept by default: the sweeps' tables (linear, every 20 up to 200)
and every recorded run must come out unchanged, and a measurement costs about a second on CPU.
`min_gap_steps=N` (opt-in) skips an early-cadence or epoch-end measurement that falls fewer than
N steps after the previous one; step 0 and the fit-end measurement are always taken. The rule
reads only the steps already measured, which the checkpoint stores, so a resumed run skips
exactly what the uninterrupted run skipped.

How: `headlab.measure.measure_probe` runs the probe through the weight path in eval mode under
`no_grad`, chunk by chunk, and `headlab.analysis` reduces each chunk to per-head sums, so memory
does not grow with the probe size. Training itself never materialises attention. This callback
keeps only the schedule, the state a resume needs (initial weights, gradient norms, measured
steps) and the writes.

`query_tokens` adds a conditional view: for each listed token, every per-head attention metric
and the role over the queries *at that token* only, as `{metric}@{token}` (e.g. `prev_score@y`,
`role@[CLS]`). A head that does one thing from one kind of token (a marker reading the token
before it, [CLS] gathering the sentence) is diluted in the all-query mean; Clark et al. (2019)
score syntactic heads the same way, on the tokens that hold the relation. Always measured too:
the task-aware view, `{metric}@task` and `role@task` from the queries that feed the decision
(the [CLS] row under cls pooling, every row under mean pooling; `headlab.analysis.task_roles`).

Under DDP (`trainer.strategy=ddp trainer.devices=N`) only rank zero measures and writes, through
the unwrapped network (`pl_module.net`, never the DDP wrapper, so no collective runs inside a
measurement); the other ranks wait at a barrier. Every rank keeps the same schedule state, so a
checkpoint written by rank zero resumes every rank alike.

Where: one part file per measurement in `head_metrics.parquet/` and `head_pairs.parquet/`
(see `headlab.store.tables`), `heads/{metric}/L{l}H{h}` scalars to every Lightning logger (W&B
also gets the attention-map grid and the head table, `headlab.lit.wandb_panels`), and
at fit end `attention_maps.npz` plus the figures in `figures/`, and the head report
(`headlab.report`: one line per head in plain words) in the training log.
"""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

import lightning as L
import torch

from headlab.analysis.task_roles import DECISION_QUERIES
from headlab.errors import ConfigError
from headlab.interventions import gradient_importance
from headlab.measure import Measurement, add_query_masks, grad_norms, measure_probe, model_decision, probe_chunks
from headlab.measure import TASK, query_token_ids
from headlab.measure import snapshot_weights
from headlab.store import HEAD_METRICS, HEAD_PAIRS, RunDir, append_part, drop_parts_after, write_attention_maps
from headlab.lit.callbacks.probe_patterns import ProbePatterns
from headlab.lit.wandb_panels import define_head_panels, head_scalars, log_head_panels, wandb_loggers
from headlab.store.tables import head_metric_rows, head_pair_rows

EARLY_SPACINGS = ("linear", "log")
log = logging.getLogger("headlab.train")


@dataclass
class _Timing:
    """Where the callback spent its time in this process (seconds)."""

    capture_s: float = 0.0
    metrics_s: float = 0.0
    n: int = 0
    steps: list[int] = field(default_factory=list)
    # wall time inside the training hooks (measurements, gradient norms, writes, logger scalars),
    # the figures excluded: what the callback adds to training, accounted from inside the process
    hooks_s: float = 0.0
    grad_norm_s: float = 0.0
    write_s: float = 0.0
    figures_s: float = 0.0


class HeadMetricsCallback(L.Callback):
    """Per-head attention and weight-space metrics on a fixed probe set, over training.

    Args:
        output_dir: the run directory (default: the trainer's `default_root_dir`).
        run_id: written in every table row (default: the run directory's name).
        every_n_steps, early_steps, early_spacing: early cadence; measure at step 0 and at
            n, 2n, 3n, ... <= early_steps ("linear") or n, 2n, 4n, 8n, ... <= early_steps ("log").
        measure_epoch_end: also measure after every training epoch.
        chunk_size: probe sequences per forward pass (bounds memory).
        map_len: positions kept in the mean attention maps for the heat-map figure.
        log_to_loggers: send `heads/{metric}/L{l}H{h}` scalars to every Lightning logger, and to a
            W&B logger the attention-map grid and the head table too (`headlab.lit.wandb_panels`).
        figures: draw the run figures at fit end.
        min_gap_steps: skip an early-cadence or epoch-end measurement fewer than this many steps
            after the previous measurement (0, the default: keep every one).
        query_tokens: vocabulary tokens (characters, or "[CLS]") whose queries also get their
            own metrics and role, `{metric}@{token}`; each must be in the run's vocabulary.
        probe_patterns, probe_pattern_len: store every head's attention on the first `probe_patterns`
            probe sentences, cut to `probe_pattern_len` positions, at each measurement (headlab-view's
            token view, `headlab.lit.callbacks.probe_patterns`); 0 stores none.
        view: write `view.html` (headlab-view) at fit end.
        importance: also the `grad_importance` metric (Michel et al. E|dL/dgate| over the labelled
            probe, `headlab.interventions.gradient_importance`): one extra backward per measurement.
    """

    def __init__(
        self,
        output_dir: str | None = None,
        run_id: str | None = None,
        every_n_steps: int = 20,
        early_steps: int = 200,
        early_spacing: str = "linear",
        measure_epoch_end: bool = True,
        chunk_size: int = 64,
        map_len: int = 32,
        log_to_loggers: bool = True,
        figures: bool = True,
        query_tokens: Sequence[str] | None = None,
        min_gap_steps: int = 0,
        importance: bool = False,
        probe_patterns: int = 8,
        probe_pattern_len: int = 64,
        view: bool = True,
    ) -> None:
        super().__init__()
        key = "callbacks.head_metrics"
        # one string is one token (query_tokens=y), never its characters
        query_tokens = [query_tokens] if isinstance(query_tokens, str) else list(query_tokens or [])
        bad = [t for t in query_tokens if not isinstance(t, str) or not t]
        if bad or len(set(query_tokens)) != len(query_tokens):
            raise ConfigError(f"{key}.query_tokens", query_tokens, "a list of distinct, non-empty vocabulary tokens, "
                              "e.g. [y] or ['[CLS]'] (quote digits: ['1'])")
        if TASK in query_tokens:
            raise ConfigError(f"{key}.query_tokens", query_tokens, f"tokens other than {TASK!r}: "
                              f"{{metric}}@{TASK} holds the task-aware metrics, from the decision's queries")
        if every_n_steps <= 0:
            raise ConfigError(f"{key}.every_n_steps", every_n_steps, "an integer > 0")
        if early_steps < 0:
            raise ConfigError(f"{key}.early_steps", early_steps, "an integer >= 0 (0 disables the early cadence)")
        if early_spacing not in EARLY_SPACINGS:
            raise ConfigError(f"{key}.early_spacing", early_spacing, f"one of {list(EARLY_SPACINGS)}")
        if chunk_size <= 0:
            raise ConfigError(f"{key}.chunk_size", chunk_size, "an integer > 0")
        if not isinstance(min_gap_steps, int) or min_gap_steps < 0:
            raise ConfigError(f"{key}.min_gap_steps", min_gap_steps, "an integer >= 0 (0 keeps every measurement)")
        if map_len < 2:
            raise ConfigError(f"{key}.map_len", map_len, "an integer >= 2")
        self.output_dir = Path(output_dir) if output_dir else None
        self.run_id = run_id
        self.every_n_steps, self.early_steps, self.early_spacing = every_n_steps, early_steps, early_spacing
        self.measure_epoch_end, self.chunk_size, self.map_len = measure_epoch_end, chunk_size, map_len
        self.log_to_loggers, self.figures = log_to_loggers, figures
        self.query_tokens = query_tokens
        self.min_gap_steps = min_gap_steps
        if not isinstance(importance, bool):
            raise ConfigError(f"{key}.importance", importance, "true or false")
        self.importance = importance
        if not isinstance(view, bool):
            raise ConfigError(f"{key}.view", view, "true or false")
        self.patterns, self.view = ProbePatterns(probe_patterns, probe_pattern_len, key), view
        self._labeled_probe: list[dict[str, torch.Tensor]] = []  # with labels, for grad_importance
        self._probe: list[dict[str, Any]] = []
        self._init_weights: list[dict[str, torch.Tensor]] | None = None
        self._last_grad: torch.Tensor | None = None  # [layer, head]
        self._cum_grad: torch.Tensor | None = None  # [layer, head]
        self._measured: set[int] = set()
        self._first: Measurement | None = None
        self._last: Measurement | None = None
        self.timing = _Timing()

    @property
    def last_measurement(self) -> Measurement | None:
        """The most recent measurement of this process (None before the first)."""
        return self._last

    # ------------------------------------------------------------------ schedule
    def is_early_step(self, step: int) -> bool:
        """Whether `step` is on the early cadence (step 0 always is).

        >>> cb = HeadMetricsCallback(every_n_steps=16, early_steps=256, early_spacing="log")
        >>> [s for s in range(300) if cb.is_early_step(s)]
        [0, 16, 32, 64, 128, 256]
        """
        if step > self.early_steps or step % self.every_n_steps:
            return False
        multiple = step // self.every_n_steps
        return self.early_spacing == "linear" or multiple & (multiple - 1) == 0  # 0 or a power of two

    def too_close(self, step: int) -> bool:
        """Whether `step` falls fewer than `min_gap_steps` after the last measurement before it.

        >>> cb = HeadMetricsCallback(min_gap_steps=8)
        >>> cb._measured = {0, 128, 250}
        >>> [cb.too_close(s) for s in (256, 258, 130)]
        [True, False, True]
        """
        earlier = [s for s in self._measured if s < step]
        return bool(earlier) and step - max(earlier) < self.min_gap_steps

    @contextmanager
    def _timed(self, *parts: str) -> Iterator[None]:
        """Add the block's wall time to each `timing.<part>_s`."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - t0
            for part in parts:
                setattr(self.timing, f"{part}_s", getattr(self.timing, f"{part}_s") + elapsed)

    # ------------------------------------------------------------------ Lightning hooks
    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if self.output_dir is None:
            self.output_dir = Path(trainer.default_root_dir)
        if self.run_id is None:
            self.run_id = self.output_dir.name

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        probe = trainer.datamodule.probe_set()
        self._probe = probe_chunks(probe, self.chunk_size, pl_module.device)
        if self.importance:
            self._labeled_probe = [{k: b[k].to(pl_module.device) for k in ("input_ids", "attention_mask", "labels")}
                                   for b in probe.batches(self.chunk_size, by_length=True)]
        if self.query_tokens:
            add_query_masks(self._probe, query_token_ids(self.query_tokens, getattr(trainer.datamodule, "tokenizer", None)))
        self.patterns.select(probe, getattr(getattr(trainer.datamodule, "tokenizer", None), "tokens", None), pl_module.device)
        n_layers, n_heads = len(pl_module.net.blocks), pl_module.net.config.n_heads
        if self._init_weights is None:
            self._init_weights = snapshot_weights(pl_module.net)
        if self.log_to_loggers and trainer.is_global_zero:
            for logger in wandb_loggers(trainer):
                define_head_panels(logger)
        if self._cum_grad is None:
            self._cum_grad = torch.zeros(n_layers, n_heads)
            self._last_grad = torch.zeros(n_layers, n_heads)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # A resumed run re-measures what its checkpoint does not record as measured (an
        # epoch-end measurement lands after the checkpoint of that step): drop those parts first.
        step = trainer.global_step
        self._measured = {s for s in self._measured if s <= step}
        keep_through = step if step in self._measured else step - 1
        if trainer.is_global_zero:
            for table in (HEAD_METRICS, HEAD_PAIRS):
                drop_parts_after(self.output_dir / table, keep_through)
            self.patterns.drop_after(self.output_dir, keep_through)
        # Measure here only what an uninterrupted run measured at this step: step 0, or the end of
        # the epoch the checkpoint closed (recorded with that epoch). A resume from a mid-epoch
        # checkpoint (periodic or SIGTERM) adds no measurement point the uninterrupted run lacks.
        batches = trainer.num_training_batches
        per_epoch = -(-batches // trainer.accumulate_grad_batches) if isinstance(batches, int) else None
        if step == 0:
            self._measure_once(trainer, pl_module)
        elif self.measure_epoch_end and isinstance(per_epoch, int) and per_epoch > 0 and step % per_epoch == 0:
            self._measure_once(trainer, pl_module, epoch=step // per_epoch - 1, scheduled=True)

    def on_after_backward(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        with self._timed("hooks", "grad_norm"):
            norms = grad_norms(pl_module.net)
            self._last_grad = norms
            self._cum_grad += norms

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self.is_early_step(trainer.global_step):
            self._measure_once(trainer, pl_module, scheduled=True)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.measure_epoch_end:
            self._measure_once(trainer, pl_module, scheduled=True)

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._measure_once(trainer, pl_module)
        if trainer.is_global_zero and self._last is not None:
            with self._timed("hooks", "write"):
                self._write_attention_maps()
        if trainer.is_global_zero and self._last is not None and self.figures:
            from headlab.plots import write_run_figures  # plotting is imported only when used

            with self._timed("figures"):
                write_run_figures(self.output_dir)
        if trainer.is_global_zero and self._last is not None and self.view:
            from headlab.view import write_view  # the page of the run (headlab-view), written last

            write_view(RunDir(self.output_dir))
        if trainer.is_global_zero and self._last is not None:
            log.info("%s", self._report())

    def _report(self) -> str:
        """Which head does what at the end of fit (`headlab-report`'s lines, without importance: none yet)."""
        from headlab.report import report_lines
        from headlab.report.folder import last_sentences

        summary = {"task_queries": DECISION_QUERIES[self._last.decision]} if self._last.decision else {}
        run = RunDir(self.output_dir)
        lines = report_lines(run.head_metrics(), None, summary, last_sentences(run))
        return f"which head does what (headlab-report {self.output_dir}):\n" + "\n".join("  " + line for line in lines)

    def state_dict(self) -> dict[str, Any]:
        return {"init_weights": self._init_weights, "cum_grad": self._cum_grad, "last_grad": self._last_grad,
                "measured": sorted(self._measured)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._init_weights = state_dict["init_weights"]
        self._cum_grad = state_dict["cum_grad"]
        # a re-measured step after resume reports the same grad_norm as the uninterrupted run
        last = state_dict.get("last_grad")
        self._last_grad = torch.zeros_like(self._cum_grad) if last is None else last
        self._measured = set(state_dict["measured"])

    # ------------------------------------------------------------------ measurement
    def _measure_once(self, trainer: L.Trainer, pl_module: L.LightningModule, epoch: int | None = None,
                      scheduled: bool = False) -> None:
        """Measure this step unless done already; a `scheduled` one also respects `min_gap_steps`."""
        step = int(trainer.global_step)
        if step in self._measured or trainer.sanity_checking:
            return
        if scheduled and step > 0 and self.too_close(step):
            return
        self._measured.add(step)
        if trainer.is_global_zero:  # under DDP: rank zero measures, through the unwrapped network
            with self._timed("hooks"):
                result = self.measure(pl_module, step=step, epoch=int(trainer.current_epoch) if epoch is None else epoch)
                if self._first is None:
                    self._first = result
                self._last = result
                with self._timed("write"):
                    self._write(result)
                    self.patterns.write(self.output_dir, pl_module.net, result.step, result.mean_patterns)
                    if self.log_to_loggers:
                        self._log(trainer, result)
        if trainer.world_size > 1:  # the other ranks wait here, so no rank trains past a measurement point
            trainer.strategy.barrier("head_metrics")

    def measure(self, pl_module: L.LightningModule, step: int, epoch: int) -> Measurement:
        """Measure `pl_module.net` on this callback's probe (`headlab.measure.measure_probe`) and time it."""
        result = measure_probe(pl_module.net, self._probe, map_len=self.map_len, step=step, epoch=epoch,
                               init_weights=self._init_weights, grad_norm=self._last_grad, cum_grad_norm=self._cum_grad,
                               decision=model_decision(pl_module.net))
        if self.importance:  # per-example gate gradients; no parameter's .grad is touched
            grad = gradient_importance(pl_module.net, self._labeled_probe)
            for layer, per_head in enumerate(result.head_metrics):
                per_head["grad_importance"] = grad[layer].numpy()
        self.timing.capture_s += result.capture_s
        self.timing.metrics_s += result.metrics_s
        self.timing.n += 1
        self.timing.steps.append(step)
        return result

    # ------------------------------------------------------------------ outputs
    def _write(self, result: Measurement) -> None:
        append_part(self.output_dir / HEAD_METRICS, result.step,
                    head_metric_rows(self.run_id, result.step, result.epoch, result.head_metrics))
        append_part(self.output_dir / HEAD_PAIRS, result.step,
                    head_pair_rows(self.run_id, result.step, result.epoch, result.head_pairs))

    def _log(self, trainer: L.Trainer, result: Measurement) -> None:
        """`heads/{metric}/L{l}H{h}` scalars to every logger; W&B also gets the map grid and head table."""
        scalars = head_scalars(result)
        for logger in trainer.loggers:
            logger.log_metrics(scalars, step=result.step)
        for logger in wandb_loggers(trainer):
            log_head_panels(logger, result)

    def _write_attention_maps(self) -> None:
        write_attention_maps(RunDir(self.output_dir).attention_maps_path, self._last, self._first)
