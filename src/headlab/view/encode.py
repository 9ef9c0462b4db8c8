"""Matrices as the page carries them: one byte per value, scaled by each matrix's own maximum.

JSON numbers cost about six characters each; the demo's token view alone is about 3 million
attention weights. One byte per weight (base64: 4/3 byte) keeps the page under its 10 MB budget,
and scaling by each matrix's maximum keeps a diffuse head's map readable: a weight w of a matrix
whose largest weight is m is stored as round(255 w / m) and read back within m / 510.
"""

from __future__ import annotations

import base64

import numpy as np


def quantize(matrices: np.ndarray, axes: int = 2) -> tuple[str, list[float]]:
    """`matrices [..., *shape]` (the last `axes` dims form one matrix) as base64 bytes (C order) and
    each matrix's maximum, flattened in the same order.

    >>> data, scale = quantize(np.array([[[0.5, 0.25], [0.0, 0.125]]]))
    >>> list(base64.b64decode(data)), scale
    ([255, 128, 0, 64], [0.5])
    """
    a = np.nan_to_num(np.asarray(matrices, dtype=np.float64), nan=0.0)
    lead = a.shape[: a.ndim - axes]
    flat = a.reshape(int(np.prod(lead, dtype=np.int64)), -1)
    scale = flat.max(axis=1, initial=0.0)
    safe = np.where(scale > 0, scale, 1.0)
    codes = np.clip(np.rint(flat / safe[:, None] * 255.0), 0, 255).astype(np.uint8)
    return base64.b64encode(codes.tobytes()).decode("ascii"), [float(s) for s in scale]


def dequantize(data: str, scale: list[float], shape: tuple[int, ...]) -> np.ndarray:
    """The inverse of `quantize` (what the page's script computes), for tests and checks."""
    codes = np.frombuffer(base64.b64decode(data), dtype=np.uint8).astype(np.float64)
    flat = codes.reshape(len(scale), -1) / 255.0 * np.asarray(scale)[:, None]
    return flat.reshape(shape)
