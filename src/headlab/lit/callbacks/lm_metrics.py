"""Measure every head of a causal LM on the fixed induction probe, and date its phase change.

Every `every_n_steps` optimiser steps (and at step 0 and fit end) `headlab.measure.measure_lm_probe`
gives each head's previous-token, duplicate, induction and OV copying scores, and the probe's
per-position loss and ICL score (with its standard error over the probe's sequences); with
`standard_probe_size` > 0 also each head's `rep_induction_score` on the standard test (repeated
random tokens, the copy a fixed distance back, `data.repeated_probe`) and the ICL score on that
probe. Per-head rows go to `head_metrics.parquet` (the run contract's long format), each layer's
head-by-head `js` and `corr` on the probe to `head_pairs.parquet` (near-duplicate heads,
`headlab.sweep.redundancy`); `lm/probe_loss`,
`lm/icl_score` (and `_se`), `lm/rep_icl_score` (and `_se`) and `heads/{metric}/L{l}H{h}` go to the
loggers (metrics.csv). At fit end `summary_facts()` puts into summary.json: each head's induction onset
(the START of its score's rise, `headlab.analysis.phase_change.rise_start`, counted only if the score
rises by `min_rise`; the old change-point midpoint beside it as `induction_midpoint_steps`), the
start of the loss drop on the probe's repeated block (the tokens only induction predicts) and of the
ICL jump (falling by `min_drop` nats; midpoints beside), how close the onsets sit to the loss drop
against onsets redrawn on the same grid (`headlab.analysis.coincidence`; the fixed `coincide_steps`
check is kept beside), each head's final LM role and the measurement time. `dense_every_n_steps`
over [`dense_from`, `dense_to`] measures finer where the transition is expected (off by default).
Each measurement also records every head's `cum_grad_norm` (its per-step gradient norm on its Q, K, V
and O slices, summed since step 0) and `dist_from_init` (how far those weights moved, relative to
their norm at init), as the classifier's callback does, so a sweep can ask whether the heads that
took large early gradients moved farther and ended up important (`headlab.sweep.heads`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np

from headlab.analysis.coincidence import grid_coincidence
from headlab.analysis.lm_heads import lm_roles
from headlab.analysis.phase_change import RISE_CONFIRM, RISE_MIN_BASELINE, onset_step, rise_start
from headlab.errors import ConfigError
from headlab.analysis import relative_distance_from_init
from headlab.measure.lm_probe import LMMeasurement, measure_lm_probe
from headlab.measure.weights import WEIGHT_NAMES, grad_norms, head_weight_snapshot, snapshot_weights
from headlab.model.hooks import capture_patterns
from headlab.store import RunDir, append_part, drop_parts_after
from headlab.store.run_dir import INDUCTION_GRID_FIGURE, INDUCTION_PHASE_FIGURE
from headlab.store.tables import head_metric_rows, head_pair_rows


class LMHeadMetricsCallback(L.Callback):
    """Per-head LM scores over training, and the phase change dated from them."""

    def __init__(self, output_dir: str | None = None, every_n_steps: int = 50, chunk_size: int = 64,
                 min_rise: float = 0.3, min_drop: float = 1.0, coincide_steps: int = 200,
                 log_to_loggers: bool = True, figures: bool = True, standard_probe_size: int = 256,
                 dense_every_n_steps: int | None = None, dense_from: int = 0, dense_to: int = 0,
                 view: bool = True) -> None:
        if not isinstance(every_n_steps, int) or every_n_steps < 1:
            raise ConfigError("callbacks.lm_metrics.every_n_steps", every_n_steps, "an integer >= 1")
        _check_dense(every_n_steps, dense_every_n_steps, dense_from, dense_to)
        self.dense_every_n_steps, self.dense_from, self.dense_to = dense_every_n_steps, dense_from, dense_to
        if not isinstance(standard_probe_size, int) or isinstance(standard_probe_size, bool) or standard_probe_size < 0:
            raise ConfigError("callbacks.lm_metrics.standard_probe_size", standard_probe_size, "an integer >= 0 (0: off)")
        if not isinstance(chunk_size, int) or chunk_size < 1:
            raise ConfigError("callbacks.lm_metrics.chunk_size", chunk_size, "an integer >= 1")
        for key, value in (("min_rise", min_rise), ("min_drop", min_drop)):
            if not isinstance(value, (int, float)) or not value > 0:
                raise ConfigError(f"callbacks.lm_metrics.{key}", value, "a number > 0")
        self.output_dir = Path(output_dir) if output_dir is not None else None
        self.every_n_steps, self.chunk_size = every_n_steps, chunk_size
        self.min_rise, self.min_drop, self.coincide_steps = float(min_rise), float(min_drop), int(coincide_steps)
        if not isinstance(view, bool):
            raise ConfigError("callbacks.lm_metrics.view", view, "true or false")
        self.log_to_loggers, self.figures = log_to_loggers, figures
        # view.html is written by headlab.tasks.train after summary.json holds this run's LM facts (onsets,
        # loss drop), which the page marks: at fit end they are not recorded yet
        self.view = view
        self.standard_probe_size = standard_probe_size
        self._repeated: Any = None  # the standard probe, drawn once from the datamodule
        self.history: list[dict[str, Any]] = []  # one entry per measurement: step, per-head induction, loss, icl
        self.last: LMMeasurement | None = None
        self.measure_s = 0.0
        # per-head weights at step 0 and gradient norms summed since (None: a run resumed from a checkpoint
        # that predates them, which then records neither rather than numbers that start mid-run)
        self._init_weights: list[dict[str, Any]] | None = None
        self._cum_grad: Any = None

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not self.history and trainer.global_step == 0:
            import torch

            self._init_weights = snapshot_weights(pl_module.net)
            self._cum_grad = torch.zeros(len(pl_module.net.blocks), max(pl_module.net.heads_per_layer), dtype=torch.float64)
        if self.output_dir is not None and self.history:  # resumed: parts after the checkpoint are re-measured
            run = RunDir(self.output_dir)
            for table in (run.head_metrics_path, run.head_pairs_path):
                drop_parts_after(table, self.history[-1]["step"])
        if not self.history or self.history[-1]["step"] < trainer.global_step:
            self._measure(trainer, pl_module)

    def on_after_backward(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._cum_grad is not None:
            self._cum_grad += grad_norms(pl_module.net).double()

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        if self.due(trainer.global_step):
            self._measure(trainer, pl_module)

    def due(self, step: int) -> bool:
        """Measure at this step: every `every_n_steps`, and every `dense_every_n_steps` inside
        [dense_from, dense_to] (the window where the transition is expected, dated finer)."""
        if step % self.every_n_steps == 0:
            return True
        return self.dense_every_n_steps is not None and self.dense_from <= step <= self.dense_to \
            and step % self.dense_every_n_steps == 0

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not self.history or self.history[-1]["step"] != trainer.global_step:
            self._measure(trainer, pl_module)
        if self.figures and trainer.is_global_zero and self.output_dir is not None:
            self.write_figures(pl_module.net, trainer.datamodule.probe)

    def write_figures(self, net: Any, probe: Any) -> list[Path]:
        """figures/induction_phase.png and figures/induction_grid.png (the head with the highest final score)."""
        import pandas as pd
        import torch

        from headlab.plots.induction import plot_induction_grid, plot_induction_phase  # matplotlib: only when drawing

        run = RunDir(self.output_dir)
        curve = pd.DataFrame([{k: e[k] for k in ("step", "probe_loss", "icl_score")} for e in self.history])
        facts = self.phase_change()
        written = [plot_induction_phase(pd.read_parquet(run.head_metrics_path), curve, run.figure(INDUCTION_PHASE_FIGURE),
                                        facts.get("induction_onset_steps"), facts.get("loss_drop_step"))]
        final = [np.asarray(layer) for layer in self.history[-1]["induction"]]
        layer = int(np.argmax([scores.max() for scores in final]))
        head = int(np.argmax(final[layer]))
        with torch.no_grad():
            was_training = net.training
            patterns = capture_patterns(net.eval(), probe, torch.ones_like(probe, dtype=torch.bool))
            net.train(was_training)
        title = f"L{layer}H{head} on the repeated probe (induction score {final[layer][head]:.2f})"
        written.append(plot_induction_grid(patterns[layer][:, head].mean(0).numpy(), run.figure(INDUCTION_GRID_FIGURE), title))
        return written

    def _measure(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.history and self.history[-1]["step"] == trainer.global_step:
            return
        started = time.perf_counter()
        data = trainer.datamodule
        if self.standard_probe_size and self._repeated is None:
            self._repeated = data.repeated_probe(self.standard_probe_size)
        measurement = measure_lm_probe(pl_module.net, data.probe, data.probe_half_len, self.chunk_size, self._repeated)
        self._add_movement(measurement, pl_module.net)
        step = int(trainer.global_step)
        self.last = measurement
        self.history.append({"step": step, "probe_loss": measurement.probe_loss, "icl_score": measurement.icl,
                             "repeat_loss": measurement.repeat_loss, "icl_score_se": measurement.icl_se,
                             "rep_icl_score": measurement.rep_icl, "rep_icl_score_se": measurement.rep_icl_se,
                             "induction": [layer["induction_score"].tolist() for layer in measurement.per_layer]})
        if trainer.is_global_zero and self.output_dir is not None:
            per_layer = [{k: v.numpy() for k, v in layer.items()} for layer in measurement.per_layer]
            run, epoch = RunDir(self.output_dir), int(trainer.current_epoch)
            append_part(run.head_metrics_path, step, head_metric_rows(self.output_dir.name, step, epoch, per_layer))
            if measurement.head_pairs is not None:
                pairs = [{k: v.numpy() for k, v in layer.items()} for layer in measurement.head_pairs]
                append_part(run.head_pairs_path, step, head_pair_rows(self.output_dir.name, step, epoch, pairs))
        if self.log_to_loggers and trainer.loggers:
            scalars = {"lm/probe_loss": measurement.probe_loss, "lm/icl_score": measurement.icl,
                       "lm/repeat_loss": measurement.repeat_loss, "lm/icl_score_se": measurement.icl_se}
            if measurement.rep_icl is not None:
                scalars.update({"lm/rep_icl_score": measurement.rep_icl, "lm/rep_icl_score_se": measurement.rep_icl_se})
            for layer, metrics in enumerate(measurement.per_layer):
                for name, values in metrics.items():
                    scalars.update({f"heads/{name}/L{layer}H{h}": float(v) for h, v in enumerate(values.tolist())})
            for logger in trainer.loggers:
                logger.log_metrics(scalars, step=step)
        self.measure_s += time.perf_counter() - started

    def _add_movement(self, measurement: LMMeasurement, net: Any) -> None:
        """Each layer's `cum_grad_norm` and `dist_from_init` `[head]` into the measurement's per-layer metrics."""
        if self._init_weights is None or self._cum_grad is None:
            return
        import torch

        for layer, block in enumerate(net.blocks):
            now = head_weight_snapshot(block.attn)
            moved = relative_distance_from_init([now[k] for k in WEIGHT_NAMES], [self._init_weights[layer][k] for k in WEIGHT_NAMES])
            measurement.per_layer[layer]["dist_from_init"] = torch.as_tensor(moved).float()
            measurement.per_layer[layer]["cum_grad_norm"] = self._cum_grad[layer, : block.attn.n_heads].float()

    def phase_change(self) -> dict[str, Any]:
        """Onsets (start of the rise) per head, the loss drop and ICL jump (start of the fall), their
        midpoints (the earlier dating), and how close the onsets sit to the drop against the grid's chance."""
        if len(self.history) < 2:
            return {}
        steps = [entry["step"] for entry in self.history]
        induction = np.array([np.concatenate([np.asarray(layer) for layer in e["induction"]]) for e in self.history])
        n_heads = len(self.history[0]["induction"][0])
        onsets, midpoints, max_scores = {}, {}, {}
        for index in range(induction.shape[1]):
            name = f"L{index // n_heads}H{index % n_heads}"
            onsets[name] = rise_start(steps, induction[:, index], self.min_rise)
            midpoints[name] = onset_step(steps, induction[:, index], self.min_rise)
            max_scores[name] = round(float(induction[:, index].max()), 4)
        repeat_loss = [e.get("repeat_loss", e["probe_loss"]) for e in self.history]
        icl = [e["icl_score"] for e in self.history]
        loss_drop = rise_start(steps, repeat_loss, self.min_drop, direction="down")
        formed = [step for step in onsets.values() if step is not None]
        learned_in_context = bool(formed) and min(icl) < 0
        coincide = None if loss_drop is None or not formed \
            else all(abs(s - loss_drop) <= self.coincide_steps for s in formed)
        facts = {"induction_onset_steps": onsets, "induction_midpoint_steps": midpoints,
                 "max_induction_score": max_scores, "max_induction_score_overall": max(max_scores.values()),
                 "loss_drop_step": loss_drop,
                 "loss_drop_midpoint_step": onset_step(steps, repeat_loss, self.min_drop, direction="down"),
                 # an ICL jump only where in-context learning happened: a head formed and the score went
                 # below 0 (late tokens better predicted than early ones); else a fall of a positive score is noise
                 "icl_jump_step": rise_start(steps, icl, self.min_drop, direction="down") if learned_in_context else None,
                 "icl_jump_midpoint_step": onset_step(steps, icl, self.min_drop, direction="down") if learned_in_context else None,
                 "onsets_coincide_with_loss_drop": coincide}
        candidates = steps[RISE_MIN_BASELINE:len(steps) - RISE_CONFIRM]
        if loss_drop is not None and formed and candidates:
            test = grid_coincidence(formed, loss_drop, candidates)
            facts.update({"onset_loss_drop_gap": round(test.gap, 1), "onset_loss_drop_null_gap": round(test.null_gap, 1),
                          "onset_loss_drop_p": round(test.p_value, 5)})
        return facts

    def summary_facts(self) -> dict[str, Any]:
        """What summary.json gets under `lm` (and `measure_s`, the time measuring took)."""
        facts: dict[str, Any] = {"measure_s": round(self.measure_s, 3), "n_measurements": len(self.history)}
        lm = self.phase_change()
        if self.last is not None:
            lm["final_roles"] = [lm_roles(layer) for layer in self.last.per_layer]
            lm["final_icl_score"] = round(self.last.icl, 4)
            lm["final_icl_score_se"] = _rounded(self.last.icl_se)  # None: a one-sequence probe has none
            if self.last.rep_icl is not None:
                lm["final_rep_icl_score"] = round(self.last.rep_icl, 4)
                lm["final_rep_icl_score_se"] = _rounded(self.last.rep_icl_se)
                lm["final_rep_induction_score"] = [[round(v, 4) for v in layer["rep_induction_score"].tolist()]
                                                   for layer in self.last.per_layer]
            lm["final_probe_loss"] = round(self.last.probe_loss, 4)
        facts["lm"] = lm
        return facts

    def state_dict(self) -> dict[str, Any]:
        return {"history": self.history, "measure_s": self.measure_s, "init_weights": self._init_weights,
                "cum_grad": self._cum_grad}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """A resume restores the history; evaluating the best checkpoint after fit (in the same
        process, history already there) must not roll it back to that checkpoint's."""
        if self.history:
            return
        self.history, self.measure_s = list(state.get("history", [])), float(state.get("measure_s", 0.0))
        self._init_weights, self._cum_grad = state.get("init_weights"), state.get("cum_grad")


def _rounded(value: float | None) -> float | None:
    """4 decimals, None for NaN (summary.json holds no NaN)."""
    return None if value is None or not np.isfinite(value) else round(float(value), 4)


def _check_dense(every: int, dense_every: int | None, start: Any, end: Any) -> None:
    """The dense window: off (None), or a cadence finer than `every` over an ordered step range."""
    if dense_every is None:
        return
    if not isinstance(dense_every, int) or isinstance(dense_every, bool) or not 1 <= dense_every < every:
        raise ConfigError("callbacks.lm_metrics.dense_every_n_steps", dense_every,
                          f"an integer from 1 to every_n_steps - 1 ({every - 1}), or null (off)")
    if not (isinstance(start, int) and isinstance(end, int) and 0 <= start < end):
        raise ConfigError("callbacks.lm_metrics.dense_from/dense_to", f"{start}/{end}",
                          "integers with 0 <= dense_from < dense_to (the steps measured densely)")
