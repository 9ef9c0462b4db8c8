"""What `summary.json` says about a finished run, and which model each number comes from.

Keys (`headlab.tasks.record.RunRecord` writes the file; sweeps aggregate the top-level ones):

- `status`: running | completed | interrupted | diverged | failed; `error`, `signal`, `diverged_step` say why.
- `best`: the best checkpoint by val/acc: `step`, `checkpoint`, `val_acc`, `val_f1`, `val_loss`,
  `test_acc`, `test_f1`, `test_loss` (test only with `test=true`); with domain ids in the batches
  also `val_acc_domain_<name>`, `test_acc_domain_<name>` (accuracy on that domain's examples); a distilled
  student also `test_teacher_acc`, `test_teacher_f1` (its teacher on the same test batches).
- `last`: the newest state: `step`, `checkpoint` (checkpoints/last.ckpt), `val_acc`, `val_f1`,
  `val_loss` of the last validation during fit, `roles` (each head's role at the last measurement).
- Top level, for sweeps (`headlab-aggregate`): `val_acc`, `val_f1`, `val_loss`, `test_acc`, `test_f1`,
  `test_loss`, `best_step`, `best_checkpoint` = the BEST checkpoint's; `final_roles` = `last.roles`,
  `final_task_roles` (the roles from the queries that feed the decision, `task_queries` says which),
  `last_checkpoint`, `global_step`, `epochs` = the LAST state's; `redundant_heads` and
  `redundant_clusters` (near-duplicate heads per layer at the last measurement, docs/importance.md#redundancy).
- `wall_s`, `measure_s` and the callback's other timings, `n_params`, `head_dim`, `data`, `probe_digest`,
  `swept` (the values sweeps vary), `config_digest`, `overrides`, `resumed_from`, `config_history`,
  `start_dir` (where the run started). `data` (the datamodule's `stats`) holds `label_names` and, for
  `data=files`, the files absolute (`files`) with their sha256 (`files_sha256`): what a moved run folder
  needs to find its data again (`headlab.reload.locate_data_files`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from headlab.analysis.redundancy import DEFAULT_MASS, duplicate_clusters, js_threshold, redundant_heads
from headlab.analysis.task_roles import DECISION_QUERIES
from headlab.model import count_parameters
from headlab.store import RunDir

_LAST_VAL = {"val_acc": "val/acc", "val_f1": "val/f1", "val_loss": "val/loss"}


def last_state(trainer: Any, last_checkpoint: str | None) -> dict[str, Any]:
    """The newest state right after fit (before any evaluation of the best checkpoint replaces the
    trainer's metrics): its step, checkpoint and last validation metrics."""
    last: dict[str, Any] = {"step": int(trainer.global_step), "checkpoint": last_checkpoint}
    for key, name in _LAST_VAL.items():
        value = trainer.callback_metrics.get(name)
        if value is not None:
            last[key] = float(value)
    return last


def overfitting_line(summary: dict[str, Any]) -> str | None:
    """A warning when validation loss rose after the best checkpoint, which came in the first half of
    the run (the model learned the training text by heart afterwards); None otherwise. The best
    checkpoint is what every later command reads, so the run is still usable: the line says so."""
    best, last = summary.get("best") or {}, summary.get("last") or {}
    best_step, steps = summary.get("best_step"), summary.get("global_step")
    best_loss, last_loss = best.get("val_loss"), last.get("val_loss")
    if not all(isinstance(v, (int, float)) for v in (best_step, steps, best_loss, last_loss)):
        return None
    if steps < 2 or best_step > steps / 2 or last_loss <= best_loss:
        return None
    return (f"overfitting: validation loss was lowest at step {best_step} of {steps} ({best_loss:.3g}) and ended at "
            f"{last_loss:.3g}; later commands read the best checkpoint (step {best_step}); for more than that, give the "
            "run more data, fewer steps or more dropout / weight decay")


def evaluate_best(cfg: DictConfig, trainer: Any, module: Any, datamodule: Any) -> dict[str, Any]:
    """Validation (and test) metrics of the best checkpoint: the `best` block and its top-level copies."""
    ckpt = getattr(trainer.checkpoint_callback, "best_model_path", "") or None
    if ckpt is not None:  # a resumed run that was moved or copied: its callback state names the old folder
        ckpt = str(RunDir(cfg.paths.output_dir).own_checkpoint(ckpt) or ckpt)
    best: dict[str, Any] = {"step": _step_from_checkpoint(ckpt), "checkpoint": ckpt}
    val = trainer.validate(module, datamodule=datamodule, ckpt_path=ckpt, verbose=False, weights_only=True)[0]
    best.update(val_acc=val.get("val/acc"), val_f1=val.get("val/f1"), val_loss=val.get("val/loss"))
    best.update(_top_level(val, "/acc_domain_"))
    if cfg.get("test", True):
        test = trainer.test(module, datamodule=datamodule, ckpt_path=ckpt, verbose=False, weights_only=True)[0]
        best.update(test_acc=test.get("test/acc"), test_f1=test.get("test/f1"), test_loss=test.get("test/loss"))
        best.update(_top_level(test, "/acc_domain_"))
        best.update(_top_level(test, "/teacher_"))
    top = {k: v for k, v in best.items() if k not in ("step", "checkpoint")}
    return {"best": best, **top, "best_checkpoint": ckpt, "best_step": best["step"]}


def _top_level(metrics: dict[str, Any], marker: str) -> dict[str, float]:
    """The metrics whose name holds `marker`, as top-level keys: `val/acc_domain_<name>` ->
    `val_acc_domain_<name>` (runs whose batches carry domain ids), `test/teacher_f1` -> `test_teacher_f1`
    (a distilled student's run: its teacher on the same batches)."""
    return {key.replace("/", "_", 1): float(value) for key, value in metrics.items() if marker in key}


def _step_from_checkpoint(path: str | None) -> int | None:
    match = re.search(r"step(\d+)", Path(path).name) if path else None
    return int(match.group(1)) if match else None


def run_facts(trainer: Any) -> dict[str, Any]:
    """Steps, sizes, data statistics and the head-metrics callback's timings and final roles."""
    if trainer is None:
        return {}
    facts: dict[str, Any] = {"global_step": int(trainer.global_step), "epochs": int(trainer.current_epoch),
                             "world_size": int(trainer.world_size)}
    module, datamodule = trainer.lightning_module, trainer.datamodule
    if datamodule is not None and hasattr(datamodule, "stats"):
        facts["data"] = datamodule.stats
        facts["probe_digest"] = datamodule.stats.get("probe_digest")
    if module is not None:
        facts["n_params"] = count_parameters(module.net, non_embedding=False)
        facts["n_params_non_embedding"] = count_parameters(module.net, non_embedding=True)
        facts["head_dim"] = module.net.config.head_dim
    for callback in trainer.callbacks:
        if callable(getattr(callback, "summary_facts", None)):  # e.g. an intervention: what it did, when
            facts.update(callback.summary_facts())
        timing = getattr(callback, "timing", None)
        if timing is not None:
            facts.update(measure_s=round(timing.capture_s + timing.metrics_s, 3), measure_capture_s=round(timing.capture_s, 3),
                         measure_metrics_s=round(timing.metrics_s, 3), n_measurements=_n_measurements(callback, timing.n),
                         n_measurements_this_start=timing.n,
                         head_metrics_s=round(timing.hooks_s, 3), head_metrics_grad_norm_s=round(timing.grad_norm_s, 3),
                         head_metrics_write_s=round(timing.write_s, 3), figures_s=round(timing.figures_s, 3))
            if callback.last_measurement is not None:
                facts["final_roles"] = callback.last_measurement.roles
                facts.update(task_role_facts(callback.last_measurement))
                facts.update(final_redundancy(callback.last_measurement.head_pairs))
    return facts


def task_role_facts(measurement: Any) -> dict[str, Any]:
    """`final_task_roles` (each head's role from the queries that feed the decision, names) and
    `task_queries` (those queries in words: "[CLS]", "every token"); nothing for a measurement without them."""
    if getattr(measurement, "task_roles", None) is None:
        return {}
    return {"final_task_roles": measurement.task_roles, "task_queries": DECISION_QUERIES[measurement.decision]}


def _n_measurements(callback: Any, this_start: int) -> int:
    """Measurement points of the whole run, every start included (a resumed run's callback counts only its
    own): the distinct steps of the run's head_metrics table, else this start's count."""
    output_dir = getattr(callback, "output_dir", None)
    if output_dir is None:
        return this_start

    try:
        return int(RunDir(output_dir).head_metrics()["step"].nunique())
    except (FileNotFoundError, KeyError, ValueError, OSError):
        return this_start


def final_redundancy(head_pairs: list[dict[str, Any]]) -> dict[str, Any]:
    """`redundant_heads` (heads that duplicate another of their layer at the last measurement, at the
    bar of `headlab.analysis.redundancy.DEFAULT_MASS`) and `redundant_clusters` (per layer, the clusters)."""
    if not head_pairs or any("js" not in layer for layer in head_pairs):
        return {}
    clusters = [duplicate_clusters(layer["js"], js_threshold(DEFAULT_MASS)) for layer in head_pairs]
    return {"redundant_heads": sum(redundant_heads(c) for c in clusters), "redundant_clusters": clusters}
