"""headlab-train's own config: its top-level keys (`TrainKeys`) and `validate_config`, the check of the
composed config before any data is loaded or file written (Hydra's CheckConfig callback runs it, named in
conf/hydra/default.yaml; the CheckedSweeper runs it on every job of a -m).

Its groups have no schema of their own: every `_target_` node is checked against its target's signature
(keys and types, headlab.config.signature), a key of a node no class takes (optim's flat knobs) must be
read by an interpolation, missing values and broken interpolations are named by key, and the value
ranges are checked by building the objects whose constructors own them (ModelConfig, the datamodule,
the callbacks, Lightning's Trainer).
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, List, Literal, Optional, Union

from omegaconf import DictConfig, ListConfig, OmegaConf

from headlab.config import config_groups
from headlab.config.messages import as_typed, first_line, schema_fields, unknown_key
from headlab.config.signature import SUPPLIED, UNRESOLVED, check_target, check_value, locate
from headlab.config.values import check_threads
from headlab.errors import ConfigError

# Groups whose targets are cheap constructors that check their own values: built here (Lightning's Trainer
# refuses trainer.devices=0 and the like in its constructor, before a run folder exists).
_BUILT_TO_CHECK = ("data", "model", "callbacks", "optim", "trainer")
# Stand-ins for what the code passes itself (the data's sizes): the smallest values the network takes.
_STAND_INS = {"vocab_size": 4, "n_classes": 2}
_MISSING_EXAMPLES = {"data.files.train": "data=files data.files.train=/path/to/train.csv (CSV or JSONL with text, label)"}


@dataclass
class TrainKeys:
    """train.yaml's own keys and their types (`validate_config` checks the values)."""

    seed: int = 42
    resume: Union[bool, Literal["auto"]] = False
    test: bool = True
    figures: bool = True  # the per-run figures at fit end (each measuring callback's `figures` reads it)
    sweep_name: Optional[str] = None
    threads: Union[int, Literal["auto"], None] = None
    tags: List[str] = field(default_factory=list)
    resume_allow: List[str] = field(default_factory=list)
    overwrite: bool = False  # a fresh start in a run dir that holds a run replaces it (else refused)


def top_level_keys(present: Iterable[str]) -> list[str]:
    """The keys headlab-train's top level may hold, those `present` first in their order: train.yaml's own
    (TrainKeys), the module, each config group's node (also one not selected: `debugg=` names `debug`), and
    the teacher run headlab-distill's group (conf/distill/) adds."""
    allowed = ["module", *(f.name for f in dataclasses.fields(TrainKeys)), "teacher", *config_groups()]
    return list(dict.fromkeys([*(k for k in present if k in allowed), *allowed]))


def validate_config(cfg: DictConfig) -> None:
    """Raise `ConfigError` for the first mistake in the composed config; return if none."""
    _check_top_level(cfg)  # keys no code reads first: their values need not resolve
    sources: dict[str, str] = {}
    hints = schema_fields(TrainKeys)
    plain: dict[str, Any] = {}
    # train.yaml's own keys first: a wrong `figures` is named as itself, not as the callback key that reads it
    for key in sorted((k for k in cfg.keys() if k != "hydra"), key=lambda k: k not in hints):
        plain[key] = _plain(_leaf(cfg, key, key), key, sources)
        if key in hints:
            check_value(key, plain[key], hints[key])
    try:
        for key, node in plain.items():
            if key != "paths":
                _check_targets(key, node)
        _refuse_unread_knobs(cfg)  # after the types: `optim.lr={a: 1}` is a wrong value, not keys
        _check_ranges(plain)
    except ConfigError as err:
        source = _source(err.key, sources)
        if source == err.key:
            raise
        raise ConfigError(source, err.value, err.allowed) from None


def _check_top_level(cfg: DictConfig) -> None:
    """A top-level key no code reads (`+seeed=1`) is refused, naming the close key (`top_level_keys`)."""
    order = [str(k) for k in cfg.keys() if k != "hydra"]
    known = top_level_keys(order)
    for key in order:
        if key not in known:
            raise unknown_key(key, as_typed(cfg, key), known)


# Read by code, not by an interpolation (the run check makes the folder; Hydra's run dir names it).
_READ_BY_CODE = ("paths.log_dir",)


def _refuse_unread_knobs(cfg: DictConfig) -> None:
    """A key of a node no class takes (`optim.lr`, `intervention.knockout.step`) exists to be interpolated
    into one that does; a key no `${...}` reads (`+optim.lr_max=1`) is a mistake, named with the close key."""
    read = set(re.findall(r"\$\{([\w.]+)", OmegaConf.to_yaml(cfg)))

    def walk(node: DictConfig, path: str) -> None:
        for key in node.keys():
            full, child = f"{path}{key}", node._get_node(key)  # noqa: SLF001 - the node, its value unresolved
            if isinstance(child, DictConfig):
                if "_target_" not in child and key != "hydra":
                    walk(child, f"{full}.")
            elif path and child._value() is not None and full not in read and full not in _READ_BY_CODE:
                known = [str(k) for k in node.keys() if f"{path}{k}" in read or f"{path}{k}" in _READ_BY_CODE]
                raise unknown_key(full, as_typed(node, key), known)

    walk(cfg, "")


def _check_targets(path: str, node: Any) -> None:
    """Every `_target_` node, checked against its target's signature."""
    if isinstance(node, dict):
        if "_target_" in node:
            check_target(path, node)
            return
        for key, value in node.items():
            _check_targets(f"{path}.{key}", value)


# ---- the config as plain data --------------------------------------------------------------------------
def _plain(node: Any, path: str, sources: dict[str, str]) -> Any:
    """The config as plain dicts and lists, each leaf resolved alone, so that a missing value or a
    broken interpolation is reported with its own key (and `${hydra:...}` outside a run is skipped).
    Collects `sources` (`key -> referenced key` for plain `${key}` values)."""
    if isinstance(node, DictConfig):
        plain = {}
        for key in node.keys():
            child = f"{path}.{key}" if path else str(key)
            reference = re.fullmatch(r"\$\{([\w.]+)\}", str(as_typed(node, key)))
            if reference:
                sources[child] = reference.group(1)
            plain[str(key)] = _plain(_leaf(node, key, child), child, sources)
        return plain
    if isinstance(node, ListConfig):
        return [_plain(_leaf(node, i, f"{path}[{i}]"), f"{path}[{i}]", sources) for i in range(len(node))]
    return node


def _leaf(node: DictConfig | ListConfig, key: Any, path: str) -> Any:
    from omegaconf.errors import InterpolationResolutionError, MissingMandatoryValue

    if OmegaConf.is_missing(node, key):
        example = _MISSING_EXAMPLES.get(path, f"{path}=<value>")
        raise ConfigError(path, "???", f"a value: the key is mandatory (??? marks it unset), e.g. {example}")
    try:
        return node[key]
    except (MissingMandatoryValue, InterpolationResolutionError) as err:
        text = str(err)
        if "HydraConfig was not set" in text or "Missing mandatory value: hydra." in text:
            return UNRESOLVED  # Hydra sets these in a run; outside one (a pre-check) they stay unset
        raw = as_typed(node, key)
        if isinstance(err, MissingMandatoryValue):
            missing = getattr(err, "full_key", None) or path
            raise ConfigError(path, raw, f"an interpolation to a set value ({missing} is unset)") from None
        raise ConfigError(path, raw, f"an interpolation that resolves ({first_line(err)})") from None


def _source(path: str, sources: dict[str, str]) -> str:
    """`optim.optimizer.lr` (`${optim.lr}`) -> `optim.lr`: the key the user sets."""
    seen = {path}
    while path in sources and sources[path] not in seen:
        path = sources[path]
        seen.add(path)
    return path


# ---- ranges and cross-key rules (each checked once, by the code that owns it) -------------------------
def _check_ranges(plain: dict[str, Any]) -> None:
    seed = plain.get("seed")
    if isinstance(seed, int) and seed < 0:
        raise ConfigError("seed", seed, "an integer >= 0")
    check_threads(plain.get("threads"))
    for group in ("optim", "model"):  # inf / nan trains and diverges (or never ends): refused as a class
        _check_finite(group, plain.get(group))
    lr = (plain.get("optim") or {}).get("lr")
    if isinstance(lr, (int, float)) and not lr > 0:
        raise ConfigError("optim.lr", lr, "a learning rate > 0")
    _check_trainer(plain.get("trainer") or {}, plain.get("callbacks") or {})
    if (plain.get("data") or {}).get("train_unlabelled") is True:  # rows labelled -1: only a module that says it takes them
        module = locate("module._target_", str((plain.get("module") or {}).get("_target_")))
        if not getattr(module, "trains_on_unlabelled", False):
            raise ConfigError("data.train_unlabelled", True, "false: only headlab-distill trains on unlabelled rows")
    for group in _BUILT_TO_CHECK:
        _build_to_check(group, plain.get(group))


def _check_finite(path: str, node: Any) -> None:
    """Every number under `path` is finite."""
    import math

    if isinstance(node, dict):
        for key, value in node.items():
            _check_finite(f"{path}.{key}", value)
    elif isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            _check_finite(f"{path}.{i}", value)
    elif isinstance(node, float) and not math.isfinite(node):
        raise ConfigError(path, node, "a finite number")


def _check_accelerator(trainer: dict[str, Any]) -> None:
    """`trainer.accelerator=gpu` on a machine without one: one line before a run dir is kept."""
    accelerator = str(trainer.get("accelerator") or "auto").lower()
    if accelerator not in ("gpu", "cuda", "mps"):
        return
    import torch

    found = torch.backends.mps.is_available() if accelerator == "mps" else torch.cuda.is_available()
    if not found:
        raise ConfigError("trainer.accelerator", accelerator, f"an accelerator this machine has (no {accelerator.upper()} "
                          "found): cpu or auto")


def _check_trainer(trainer: dict[str, Any], callbacks: dict[str, Any]) -> None:
    _check_accelerator(trainer)
    max_epochs, max_steps = trainer.get("max_epochs"), trainer.get("max_steps", -1)
    if max_steps in (-1, None) and isinstance(max_epochs, int) and max_epochs < 1:
        raise ConfigError("trainer.max_epochs", max_epochs, "an integer >= 1 (or set trainer.max_steps)")
    if trainer.get("enable_progress_bar") is False:
        from lightning.pytorch.callbacks import ProgressBar

        for name, node in callbacks.items():
            target = locate(name, node["_target_"]) if isinstance(node, dict) and "_target_" in node else None
            if inspect.isclass(target) and issubclass(target, ProgressBar):
                raise ConfigError("trainer.enable_progress_bar", False,
                                  f"true while callbacks.{name} is set: for no progress bar, also pass callbacks.{name}=null")


def _build_to_check(group: str, node: Any) -> None:
    """Build the group's objects once and drop them: their constructors check the value ranges."""
    if not isinstance(node, dict):
        return
    members = {group: node} if "_target_" in node else {f"{group}.{k}": v for k, v in node.items()}
    for path, member in members.items():
        if not isinstance(member, dict) or "_target_" not in member or member.get("_partial_"):
            continue
        kwargs = {k: (None if v is UNRESOLVED else v) for k, v in member.items() if not k.startswith("_")}
        target = locate(f"{path}._target_", member["_target_"])
        try:
            takes = inspect.signature(target).parameters
        except (TypeError, ValueError):
            continue  # no signature to build it by
        kwargs.update({k: _STAND_INS[k] for k in SUPPLIED.get(member["_target_"], ()) if k in _STAND_INS and k in takes})
        if not all(p.name in kwargs for p in takes.values()
                   if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)):
            continue  # completed by train() (an optimiser's params, the data's vocab_size): not built here
        quiet = logging.getLogger("lightning.pytorch")  # its "GPU available" lines are the run's to print
        level = quiet.level
        quiet.setLevel(logging.WARNING)
        try:
            target(**kwargs)
        except ConfigError:
            raise
        except Exception as err:  # noqa: BLE001 - e.g. Lightning's MisconfigurationException: a bad value
            text = str(err)  # the key it names as `key=value` first (`Trainer(devices=0)` also says "accelerator")
            key = next((k for k in kwargs if f"{k}=" in text), next((k for k in kwargs if k in text), None))
            raise ConfigError(f"{path}.{key}" if key else path, kwargs.get(key, member["_target_"]),
                              f"a value {target.__module__}.{target.__qualname__} accepts ({first_line(err)})") from None
        finally:
            quiet.setLevel(level)
