"""`resume=true|auto`: where a run continues from, refused when the model or the settings changed.

A resume continues `checkpoints/last.ckpt` of the run dir. It is refused (one `ConfigError` line,
and `.hydra/` put back to the run's own) when the model's shape differs from the checkpoint's, or
when any setting differs from the run's newest segment (`headlab.tasks.history`), except
`trainer.max_epochs` / `trainer.max_steps` going up (extending training), settings that do not
change the experiment (`NOT_A_CONDITION`), and keys the user lists in `resume_allow`
(e.g. `resume_allow=[optim.lr]`; a group name allows all of its keys). A key the run's settings
lack that this command does not set (one a newer headlab added, at its default) is not a change.
`resume=auto` on a run that completed with exactly these settings does nothing (`finished_run`).
"""

from __future__ import annotations

import os

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from headlab.errors import ConfigError, HeadlabError
from headlab.tasks.history import experiment_settings, restore_first_hydra
from headlab.store import RunDir
from headlab.store.checkpoint_file import load_checkpoint, saved_model_config
from headlab.store.run_info import job_override_list

# Settings that change how a run is shown or how fast it goes, never what it computes.
NOT_A_CONDITION = ("threads", "test", "tags", "sweep_name", "logger", "trainer.enable_progress_bar",
                   "trainer.enable_model_summary", "callbacks.progress_bar", "callbacks.head_metrics.figures", "callbacks.lm_metrics.figures",
                   "figures")
EXTENDABLE = ("trainer.max_epochs", "trainer.max_steps")
_DATA_SHAPE = {"vocab_size": "vocab_size", "n_classes": "n_classes", "max_len": "data.max_len"}


@dataclass(frozen=True)
class ResumePoint:
    path: str
    step: int
    model_config: dict[str, Any]

    def check_data_shape(self, model_config: Any) -> None:
        """The data-dependent sizes (vocabulary, classes, max_len) must match the checkpoint too; an LM's
        config has no classes, and neither has its checkpoint."""
        differ = {k: (self.model_config.get(k), getattr(model_config, k, None)) for k in _DATA_SHAPE
                  if self.model_config.get(k) != getattr(model_config, k, None)}
        if differ:
            _refuse_shape(Path(self.path), differ, hint="the data, data.max_len or data.min_freq changed")


def find_resume(cfg: DictConfig, run: RunDir) -> ResumePoint | None:
    """`resume=true`: the run dir's last.ckpt, checked against this config. `resume=auto`: the same
    when last.ckpt exists, else None (a fresh start, for requeued jobs). `.hydra/` is restored on refusal."""
    value = cfg.get("resume")
    if value in (False, None):
        return None
    if value not in (True, "auto"):
        raise ConfigError("resume", value, "true, false or auto")
    last = run.last_checkpoint_path
    if not last.is_file():
        if value == "auto":
            return None
        raise ConfigError("resume", True, f"a run dir with checkpoints/last.ckpt; {last} does not exist "
                          "(point hydra.run.dir at the run to continue)")
    try:
        checkpoint = load_checkpoint(last, mmap=True)  # only its metadata here: fit reads the weights
        saved = saved_model_config(checkpoint, last)
        model = OmegaConf.to_container(cfg.model, resolve=True)
        differ = {k: (saved[k], v) for k, v in model.items() if k in saved and k not in _DATA_SHAPE and saved[k] != v}
        if differ:
            _refuse_shape(last, differ)
        _refuse_pruned(last, checkpoint, model)
        _refuse_changed_settings(cfg, run)
    except HeadlabError:  # a refused setting, an unreadable saved one: .hydra/ back to the run's own
        restore_first_hydra(run)
        raise
    return ResumePoint(str(last), int(checkpoint.get("global_step", 0)), saved)


def finished_run(cfg: DictConfig, run: RunDir) -> dict[str, Any] | None:
    """`resume=auto` (or `resume=true`) on a run that already completed with exactly these settings: its
    summary, so a re-launched sweep (make reproduce-quick, a requeued array) skips it instead of training
    again, and nothing is appended (a resumed fit of a finished run would log its final val and test
    rows to metrics.csv a second time). None when anything is left to do: no completed summary,
    unknown or changed settings, or more epochs / steps asked for (that is a resume)."""
    if cfg.get("resume") not in ("auto", True):
        return None
    summary = run.summary
    if summary.get("status") != "completed" or run.latest_settings() is None:
        return None
    if _changed_settings(cfg, run, extendable=False):
        return None
    if cfg.get("resume") is True:
        find_resume(cfg, run)  # resume=true still refuses a last.ckpt of another network (a pruned one)
    return summary


def _refuse_changed_settings(cfg: DictConfig, run: RunDir) -> None:
    changed = _changed_settings(cfg, run, extendable=True)
    if changed:
        diffs = ", ".join(f"{k}: run {a!r} vs now {b!r}" for k, (a, b) in changed.items())
        raise ConfigError("resume", True, f"the settings the run was trained with ({diffs}); resume with them, "
                          f"or list the keys to change: resume_allow=[{','.join(changed)}]")


def _changed_settings(cfg: DictConfig, run: RunDir, extendable: bool) -> dict[str, tuple[Any, Any]]:
    """Settings that differ from the run's newest segment, beyond what a resume may change."""
    before = run.latest_settings()
    if before is None:
        return {}  # a run from before segments were kept: only its model shape can be checked
    now = experiment_settings(cfg)
    allowed = tuple(str(k) for k in (cfg.get("resume_allow") or ())) + NOT_A_CONDITION
    follows = _interpolated_keys(cfg)  # e.g. optim.optimizer.lr = ${optim.lr}: its source is compared itself
    given = {o.split("=", 1)[0].lstrip("+~") for o in job_override_list()}
    changed = {}
    for key in sorted(set(before) | set(now)):
        old, new = before.get(key, "<unset>"), now.get(key, "<unset>")
        if old == new or key in follows or _matches(key, allowed) or (extendable and key in EXTENDABLE and _extends(old, new)):
            continue
        if key.startswith("data.files.") and isinstance(old, str) and isinstance(new, str) and os.path.abspath(old) == new:
            continue  # a run from before data paths were recorded absolute, resumed from where it started
        if key not in before and key not in given:  # added to headlab since, at its default
            continue
        changed[key] = (old, new)
    return changed


def _interpolated_keys(node: Any, prefix: str = "") -> set[str]:
    """Dotted keys whose value is an interpolation of another key in this config."""
    keys: set[str] = set()
    if isinstance(node, DictConfig):
        for key in node.keys():
            if OmegaConf.is_interpolation(node, key):
                keys.add(f"{prefix}{key}")
            else:
                keys |= _interpolated_keys(node._get_node(key), f"{prefix}{key}.")
    return keys


def _matches(key: str, prefixes: tuple[str, ...]) -> bool:
    return any(key == p or key.startswith(p + ".") for p in prefixes)


def _extends(old: Any, new: Any) -> bool:
    """max_epochs / max_steps going up (-1 or None: unlimited)."""
    unlimited = (-1, None)
    if new in unlimited:
        return True
    return isinstance(old, int) and isinstance(new, int) and old not in unlimited and new >= old


def _refuse_shape(path: Path, differ: dict[str, tuple[Any, Any]], hint: str | None = None) -> None:
    first, (old, new) = next(iter(differ.items()))
    key = _DATA_SHAPE.get(first, f"model.{first}")
    diffs = ", ".join(f"{k}: checkpoint {a!r} vs config {b!r}" for k, (a, b) in differ.items())
    raise ConfigError(key, new, f"the value the resumed checkpoint {path} was trained with ({diffs}); "
                      f"{hint or 'resume with the original model overrides, or start a new run'}")


def _refuse_pruned(path: Path, checkpoint: dict[str, Any], model: dict[str, Any]) -> None:
    """A headlab-prune checkpoint keeps the trained ModelConfig; its `pruned_heads` say it is smaller."""
    pruned = (checkpoint.get("hyper_parameters") or {}).get("pruned_heads")
    if not pruned or not any(pruned):
        return
    kept = [model["n_heads"] - len(heads) for heads in pruned]
    raise ConfigError("resume", True, f"a training checkpoint; {path} was pruned by headlab-prune (heads per layer: "
                      f"checkpoint {kept} vs config {[model['n_heads']] * len(pruned)}); resume from the run's own "
                      "last.ckpt, or read the pruned network with headlab.reload.load_network")


def refuse_fresh_over_run(cfg: DictConfig, run: RunDir) -> None:
    """A fresh start (`resume=false`) in a folder that holds a run would replace its checkpoints and
    tables: refused (and `.hydra/` put back to the run's own), unless `overwrite=true` asks for it, which
    deletes the old run's files first so nothing of it mixes into the new one."""
    if cfg.get("resume") not in (False, None):
        return
    found = run.run_files()
    if not found:
        return
    if not cfg.get("overwrite"):
        restore_first_hydra(run)
        status = run.summary.get("status")
        held = f"a run (status {status})" if status else f"a run's files ({', '.join(found[:4])})"
        raise ConfigError("hydra.run.dir", str(run.path), f"a new or empty folder for a fresh start; it holds {held}: "
                          "resume=true to continue it, overwrite=true to replace it, or another hydra.run.dir")
    import shutil

    for name in found:
        path = run.path / name
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    run.forget_summary()
