"""How orthogonal are heads at init? Pairwise cosines of heads' weights against chance (pure).

`init_geometry` / `cosine_summary`: the distribution of pairwise cosines between heads' W_Q (and
W_Q W_K^T) against N(0, 1/d), the cosine of independent random directions in d dimensions.
Arguments are tensors or array-likes; results are small dataclasses of floats.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from headlab.analysis._arrays import as_float64
from headlab.analysis.weight_similarity import head_cosine, qk_cosine, random_cosine_std
from headlab.errors import DataError


@dataclass(frozen=True)
class CosineSummary:
    """Distribution of pairwise head cosines vs N(0, theory_std^2) for random directions.

    `std_ratio = std / theory_std`: ~1 at a random init, > 1 when heads have become more
    alike (or more opposed) than chance. `std` is the root mean square around 0 (the
    theoretical mean), so a shared offset counts as excess similarity too.
    """

    n_pairs: int
    mean: float
    std: float
    q05: float
    q50: float
    q95: float
    max_abs: float
    theory_std: float
    std_ratio: float


@dataclass(frozen=True)
class InitGeometry:
    """`q`: cosines of heads' W_Q (d = d_model * d_head); `qk`: of W_Q W_K^T (d ~ d_model^2)."""

    q: CosineSummary
    qk: CosineSummary | None


def offdiagonal(matrix) -> Tensor:
    """`[head * (head - 1) / 2]` the strict upper triangle of a `[head, head]` matrix (each pair once)."""
    m = as_float64(matrix)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise DataError("matrix", f"expected a square [head, head] matrix, got {list(m.shape)}")
    rows, cols = torch.triu_indices(m.shape[0], m.shape[0], offset=1)
    return m[rows, cols]


def cosine_summary(cosines, d: int | None) -> CosineSummary:
    """Summarise pair cosines `cosines [pair]` against the random-direction std 1/sqrt(d).

    `d = None` (dimension unknown) gives NaN for theory_std and std_ratio.

    >>> s = cosine_summary([0.125, -0.125], d=64)
    >>> s.std, s.theory_std, s.std_ratio
    (0.125, 0.125, 1.0)
    """
    c = as_float64(cosines).reshape(-1)
    c = c[c.isfinite()]
    theory = random_cosine_std(d) if d is not None else math.nan
    if c.numel() == 0:
        return CosineSummary(0, *([math.nan] * 6), theory, math.nan)
    std = float(c.pow(2).mean().sqrt())
    q05, q50, q95 = (float(x) for x in torch.quantile(c, torch.tensor([0.05, 0.5, 0.95], dtype=torch.float64)))
    return CosineSummary(int(c.numel()), float(c.mean()), std, q05, q50, q95, float(c.abs().max()), theory, std / theory)


def init_geometry(W_Q: Tensor, W_K: Tensor | None = None) -> InitGeometry:
    """Pairwise cosines of heads' `W_Q [head, d_model, d_head]` (and W_Q W_K^T given `W_K`).

    Theory: W_Q flattened has d = d_model * d_head entries, cosine std 1/sqrt(d). For the
    bilinear forms, <Q_a K_a^T, Q_b K_b^T> = sum_ij X_ij Y_ij with X = Q_a^T Q_b, Y = K_a^T K_b,
    d_head^2 uncorrelated terms of variance (d_model s^4)^2, over norms^2 d_model^2 d_head s^4
    each: std 1/d_model, i.e. d = d_model^2 (checked numerically in the tests).
    """
    if not isinstance(W_Q, Tensor) or W_Q.ndim != 3:
        raise DataError("W_Q", f"expected a tensor [head, d_model, d_head], got {getattr(W_Q, 'shape', type(W_Q).__name__)}")
    _, d_model, d_head = W_Q.shape
    q = cosine_summary(offdiagonal(head_cosine(W_Q)), d_model * d_head)
    qk = None if W_K is None else cosine_summary(offdiagonal(qk_cosine(W_Q, W_K)), d_model * d_model)
    return InitGeometry(q, qk)
