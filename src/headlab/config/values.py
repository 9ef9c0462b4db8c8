"""Range and choice checks the schemas' `__post_init__` share: the type is the schema's job (OmegaConf
refuses a string for an int), the allowed range is named here in the same one-line ConfigError."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from headlab.errors import ConfigError


def check_int(key: str, value: Any, minimum: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or (minimum is not None and value < minimum):
        raise ConfigError(key, value, "an integer" + ("" if minimum is None else f" >= {minimum}"))


def check_threads(threads: Any) -> None:
    """`threads`: null (torch's default), an integer >= 1, or auto (headlab.tasks.threads says what each means)."""
    if threads is not None and threads != "auto" and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ConfigError("threads", threads, "null (torch's default), an integer >= 1, or auto")


def check_choice(key: str, value: Any, choices: Sequence[str]) -> None:
    if value not in choices:
        raise ConfigError(key, value, f"one of {', '.join(choices)}" if len(choices) > 2 else " or ".join(choices))


def check_device(key: str, device: Any) -> None:
    """A torch device string this machine has."""
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ConfigError(key, device, "a torch device: cpu, cuda, cuda:N or mps") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(key, device, "cpu on this machine (no CUDA device is available)")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(key, device, "cpu on this machine (no MPS device is available)")
