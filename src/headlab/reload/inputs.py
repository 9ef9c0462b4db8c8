"""What the tools that compute on a finished run read from it: its config, data and checkpoints.

Everything here checks before anything is computed or written: a run dir without a config or
checkpoints, a checkpoint whose model does not match the run's config or data, an unknown tool
setting. Each problem is one `HeadlabError` line (exit 2 in the command lines).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from torch.utils.data import DataLoader, Subset

from headlab.config.targets import refuse_foreign_targets
from headlab.errors import DataError
from headlab.model.lm import LMConfig
from headlab.reload.network import load_network
from headlab.config import instantiate
from headlab.store import RunDir
from headlab.store.checkpoint_file import CheckpointError, load_checkpoint, saved_model_config


REQUIRED_GROUPS = ("data", "model")


def run_config(run: RunDir) -> DictConfig:
    """The training config of the run's newest segment, else Hydra's `.hydra/config.yaml` (`RunDir.config`),
    checked as data: readable YAML, with the groups the tools rebuild, and a `data` node that builds only
    headlab classes (`headlab.config.targets`: a saved config never runs code)."""
    cfg = run.config(required=REQUIRED_GROUPS)
    source = run.config_path
    try:
        refuse_foreign_targets(cfg.data, source, "data.")
    except OmegaConfBaseException as err:
        raise DataError(source, f"its data group cannot be resolved ({' '.join(str(err).split())[:200]})") from None
    return cfg


def is_language_model(cfg: DictConfig) -> bool:
    """Whether the run trained a causal LM (`experiment=induction`): its model group builds `LMConfig`."""
    return cfg.model.get("_target_") == f"{LMConfig.__module__}.{LMConfig.__qualname__}"


def refuse_language_model(run: RunDir, cfg: DictConfig, command: str, reason: str) -> None:
    """One DataError line, before anything is computed, for a command with no language-model meaning yet."""
    if is_language_model(cfg):
        raise DataError(run.path, f"a language-model run (experiment=induction): {command} {reason}")


def build_datamodule(cfg: DictConfig) -> Any:
    """The run's datamodule, set up: same source, split, vocabulary and probe as in training."""
    data = instantiate(cfg.data)
    data.setup("fit")
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
    batches = [{k: batch[k].to(device) for k in ("input_ids", "attention_mask", "labels")} for batch in loader]
    if not batches:
        raise DataError(split, "the split is empty: importance needs examples to measure on")
    return batches
