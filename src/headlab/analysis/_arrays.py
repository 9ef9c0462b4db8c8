"""Array-likes in, float64 tensors out: the one conversion the across-run analyses share.

Bifurcation, head matching, init geometry and the movement correlation take torch tensors or
anything `torch.as_tensor` takes (numpy arrays, lists) and compute in float64 on the CPU.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor


def as_float64(x) -> Tensor:
    """A float64 CPU tensor that owns its data (a read-only numpy view would warn and alias).

    >>> as_float64([1, 2]).dtype
    torch.float64
    """
    if isinstance(x, Tensor):
        return x.detach().to("cpu", torch.float64)
    return torch.from_numpy(np.array(x, dtype=np.float64))
