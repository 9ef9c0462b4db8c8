"""What the tools that compute on a finished run read from it: its config, data and checkpoints.

Everything here checks before anything is computed or written: a run dir without a config or
checkpoints, a checkpoint whose model does not match the run's config or data, an unknown tool
setting. Each problem is one `HeadlabError` line (exit 2 in the command lines).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from torch.utils.data import DataLoader, Subset

from headlab.reload.targets import refuse_foreign_targets
from headlab.errors import DataError
from headlab.model.lm import LMConfig
from headlab.reload.network import load_network
from headlab.config import instantiate
from headlab.store import RunDir
from headlab.store.checkpoint_file import CheckpointError, load_checkpoint, saved_model_config


REQUIRED_GROUPS = ("data", "model")
DATA_DIR_ENV = "HEADLAB_DATA_DIR"  # a folder holding a run's data files when they are no longer where it trained


def run_config(run: RunDir) -> DictConfig:
    """The training config of the run's newest segment, else Hydra's `.hydra/config.yaml` (`RunDir.config`),
    checked as data: readable YAML, with the groups the tools rebuild, and a `data` node that builds only
    headlab classes (`headlab.reload.targets`: a saved config never runs code)."""
    cfg = run.config(required=REQUIRED_GROUPS)
    source = run.config_path
    try:
        refuse_foreign_targets(cfg.data, source, "data.")
    except OmegaConfBaseException as err:
        raise DataError(source, f"its data group cannot be resolved ({' '.join(str(err).split())[:200]})") from None
    locate_data_files(run, cfg)
    return cfg


def locate_data_files(run: RunDir, cfg: DictConfig) -> None:
    """`cfg.data.files`' paths as files that exist now, whatever the current directory: a relative path
    (a run from before paths were recorded absolute) against the directory the run started in; a file no
    longer there by its name in $HEADLAB_DATA_DIR. Where the run recorded a file's sha256 (summary.json
    `data.files_sha256`), the file found must have it: the val split and probe would silently differ."""
    files = OmegaConf.select(cfg, "data.files", default=None, throw_on_resolution_failure=False)
    if files is None:
        return
    from headlab.data.files import FILE_KEYS, absolute_file_paths

    summary = run.summary
    digests = (summary.get("data") or {}).get("files_sha256") or {}
    base = summary.get("start_dir") or _hydra_start_dir(run) or os.getcwd()
    for key, path in {**{k: files.get(k) for k in FILE_KEYS}, **absolute_file_paths(files, base)}.items():
        if not isinstance(path, str) or not path:
            continue
        found = _find_data_file(Path(path), digests.get(key), key, run)
        if str(found) != files.get(key):
            files[key] = str(found)


def _find_data_file(path: Path, digest: str | None, key: str, run: RunDir) -> Path:
    from headlab.data.files import file_sha256

    moved = os.environ.get(DATA_DIR_ENV)
    candidates = [path] + ([Path(moved) / path.name] if moved else [])
    for candidate in candidates:
        if candidate.is_file():
            if digest is not None and file_sha256(candidate) != digest:
                if candidate == candidates[-1]:
                    raise DataError(candidate, f"differs from the data.files.{key} run {run.path} trained on "
                                               f"(sha256 {digest[:12]}...): its splits and probe would not be the run's")
                continue
            return candidate
    where = f" nor in {DATA_DIR_ENV}={moved}" if moved else ""
    raise DataError(path, f"data.files.{key} of run {run.path} is not there{where}: put the file back, or name the "
                          f"folder that holds it now: {DATA_DIR_ENV}=/that/folder headlab-...")


def _hydra_start_dir(run: RunDir) -> str | None:
    """`hydra.runtime.cwd` of the run's `.hydra/hydra.yaml`: where a run from before `start_dir` was recorded started."""
    path = run.hydra_file_path  # Hydra writes it before train() starts
    try:
        return str(OmegaConf.select(OmegaConf.load(path), "hydra.runtime.cwd", default=None) or "") or None
    except Exception:  # noqa: BLE001 - an unreadable or foreign file: no start dir known
        return None


def is_language_model(cfg: DictConfig) -> bool:
    """Whether the run trained a causal LM (`experiment=induction`): its model group builds `LMConfig`."""
    return cfg.model.get("_target_") == f"{LMConfig.__module__}.{LMConfig.__qualname__}"


def build_datamodule(cfg: DictConfig) -> Any:
    """The run's datamodule, set up: same source, split, vocabulary and probe as in training. Its warnings
    about the data (a probe shrunk to the val split) were the training's to give: a tool that rebuilds the
    data of every job of a sweep would repeat them once per job."""
    logger = logging.getLogger("headlab.data")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        data = instantiate(cfg.data)
        data.setup("fit")
    finally:
        logger.setLevel(level)
    return data


def load_matching_network(path: Path, cfg: DictConfig, datamodule: Any) -> Any:
    """`load_network(path)`, refused when its model differs from the run's config or data."""
    saved = saved_model_config(load_checkpoint(path, mmap=True), path)
    from_data = {"vocab_size": datamodule.vocab_size, "n_classes": getattr(datamodule, "n_classes", None)}
    expected = {k: v for k, v in {**OmegaConf.to_container(cfg.model, resolve=True), **from_data}.items() if k in saved}
    differ = {k: (saved[k], v) for k, v in expected.items() if saved.get(k) != v}
    if differ:
        detail = ", ".join(f"{k}: checkpoint {a!r} vs run {b!r}" for k, (a, b) in differ.items())
        raise CheckpointError(path, f"does not match the run's config and data ({detail})")
    try:
        return load_network(path)
    except RuntimeError as err:  # load_state_dict: missing / unexpected keys or shapes
        first = str(err).strip().splitlines()
        raise CheckpointError(path, f"its weights do not fit the model it describes: {first[1] if len(first) > 1 else first[0]}") from None


def eval_batches(datamodule: Any, split: str, batch_size: int, device: str,
                 positions: Sequence[int] | None = None) -> list[dict[str, Any]]:
    """Every example of the `val` or `test` split once (or only those at `positions` in the split's
    order), on `device`, batched by length (less padding, same sums: padded keys get exactly zero
    attention)."""
    loader = getattr(datamodule, f"{split}_dataloader")()
    dataset = loader.dataset
    order = sorted(range(len(dataset)) if positions is None else positions, key=lambda i: len(dataset[i][0]))
    loader = DataLoader(Subset(dataset, order), batch_size=batch_size, shuffle=False, collate_fn=loader.collate_fn)
    keys = ("input_ids", "attention_mask", "labels")  # an LM's batches have no labels (it predicts its input)
    batches = [{k: batch[k].to(device) for k in keys if k in batch} for batch in loader]
    if not batches:
        raise DataError(split, "the split is empty: importance needs examples to measure on")
    return batches
