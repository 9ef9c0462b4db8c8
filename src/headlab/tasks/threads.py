"""Torch threads per job, set from the job's own `threads` (`headlab.config.threads` says what it
means), so a joblib worker never keeps what an earlier job in the same process left behind."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from headlab.config.threads import available_cores, resolve_threads

log = logging.getLogger("headlab.job")


def set_torch_threads(threads: int | str | None, launcher: Mapping[str, Any] | None = None) -> int:
    """`threads`: None = leave torch as it is; an int >= 1; "auto" = `auto_threads(launcher)`.

    Returns the thread count torch uses afterwards.
    """
    import torch

    wanted = resolve_threads(threads, launcher, available_cores())
    if wanted is not None and wanted != torch.get_num_threads():
        torch.set_num_threads(wanted)
    log.info("torch threads: %d (threads=%s)", torch.get_num_threads(), threads)
    return torch.get_num_threads()
