"""Every segment of a run keeps its config: `segments/0/` is the first start, `segments/<n>/` the n-th resume.

Hydra rewrites `.hydra/` of `hydra.run.dir` at every start, so a resume (refused or not) would
otherwise erase what the run was trained with. Each start copies its `.hydra/` files (or, outside
a Hydra run, the composed config) to `segments/<n>/` with `segment.json` (the step it started at
and its overrides), and `.hydra/` is put back to the first start's. `resume=true` compares the
config against the newest segment's (`resolved.json`).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from headlab.data.files import FILE_KEYS
from headlab.store import RunDir, atomic_write_json, atomic_write_with
from headlab.store.run_dir import CONFIG_FILE, HYDRA_FILES, SEGMENT_INFO
from headlab.store.run_dir import SEGMENT_SETTINGS as RESOLVED


def experiment_settings(cfg: DictConfig) -> dict[str, Any]:
    """The resolved config as flat `key: value` pairs, without output paths and resume switches:
    equal settings = the same experiment (also the input of `run_info.config_digest`)."""
    container = OmegaConf.to_container(cfg, resolve=True)
    for key in ("paths", "hydra", "resume", "resume_allow", "overwrite"):
        container.pop(key, None)
    for group, path_key in (("callbacks", "output_dir"), ("callbacks", "dirpath"), ("logger", "save_dir")):
        for member in (container.get(group) or {}).values():
            if isinstance(member, dict):
                member.pop(path_key, None)
    return _flatten(container)


def _flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, dict) and node:
        flat: dict[str, Any] = {}
        for key, value in node.items():
            flat.update(_flatten(value, f"{prefix}{key}."))
        return flat
    return {prefix[:-1]: node}


def record_segment(run: RunDir, cfg: DictConfig, start_step: int, overrides: list[str]) -> Path:
    """Keep this start's config as `segments/<n>/`, then put `.hydra/` back to the first start's."""
    segment = run.segments_dir / str(len(run.segment_dirs()))
    segment.mkdir(parents=True)
    hydra_dir = run.hydra_dir
    if run.hydra_config_path.is_file():
        for name in HYDRA_FILES:
            if (hydra_dir / name).is_file():
                shutil.copy2(hydra_dir / name, segment / name)
        _same_data_paths(segment / CONFIG_FILE, cfg)
    else:  # train(cfg) called outside a Hydra run
        atomic_write_with(segment / CONFIG_FILE, lambda tmp: Path(tmp).write_text(OmegaConf.to_yaml(cfg), encoding="utf-8"))
    atomic_write_json(segment / RESOLVED, experiment_settings(cfg))
    atomic_write_json(segment / SEGMENT_INFO, {"segment": int(segment.name), "start_step": start_step, "overrides": overrides})
    restore_first_hydra(run)
    return segment


def _same_data_paths(path: Path, cfg: DictConfig) -> None:
    """Hydra's copy of the config holds `data.files` as typed (relative to where the run started): write
    the run's absolute paths (`headlab.tasks.record.absolute_data_paths`) into it, so importance, prune,
    predict, ... find the data from any directory and after the run folder moved."""
    if OmegaConf.select(cfg, "data", default=None) is None or not path.is_file():
        return
    saved = OmegaConf.load(path)
    changed = False
    for key in ("data.tokenizer", *(f"data.files.{k}" for k in FILE_KEYS)):  # a tokenizer.json is made absolute too
        value = OmegaConf.select(cfg, key, default=None, throw_on_resolution_failure=False)
        before = OmegaConf.select(saved, key, default=None, throw_on_resolution_failure=False)
        if isinstance(value, str) and before is not None and before != value:
            OmegaConf.update(saved, key, value, force_add=True)
            changed = True
    if changed:
        atomic_write_with(path, lambda tmp: Path(tmp).write_text(OmegaConf.to_yaml(saved), encoding="utf-8"))


def restore_first_hydra(run: RunDir) -> None:
    """`.hydra/` = the first start's files again (after Hydra rewrote them for a resume)."""
    segments = run.segment_dirs()
    if not segments or not run.hydra_dir.is_dir():
        return
    for name in HYDRA_FILES:
        if (segments[0] / name).is_file():
            shutil.copy2(segments[0] / name, run.hydra_dir / name)
