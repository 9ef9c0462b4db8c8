"""Is the division of labour reproducible across seeds? Hungarian matching of heads (pure).

Heads of a layer are permutation symmetric, so "head 3 of seed 0" and "head 3 of seed 1" are
unrelated. `match_heads` pairs the heads of two runs by their standardised metric descriptors
(Hungarian assignment) and compares the matched distance and role agreement with a
random-permutation baseline. Arguments are tensors or array-likes; results are float64.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment
from torch import Tensor

from headlab.analysis._arrays import as_float64
from headlab.errors import DataError


@dataclass(frozen=True)
class HeadMatch:
    """Heads of run A matched to heads of run B within one layer.

    - `permutation [head]`: head i of A is matched with head `permutation[i]` of B.
    - `distance [head]`: descriptor distance of each matched pair (RMS over metrics, in
      standard deviations).
    - `mean_distance`: mean of `distance`; `random_baseline`: its expectation under a uniformly
      random permutation, exactly the mean of the cost matrix (every pair is equally likely).
    - `same_role`: fraction of matched pairs with equal roles; `same_role_baseline`: its
      expectation under a random permutation (NaN for both when no roles were given).
    """

    permutation: Tensor
    distance: Tensor
    mean_distance: float
    random_baseline: float
    same_role: float
    same_role_baseline: float


def descriptor_distances(desc_a, desc_b, scale=None) -> Tensor:
    """`[head_a, head_b]` RMS distance between standardised descriptors `desc_* [head, metric]`.

    Standardisation divides each metric by `scale [metric]`; by default the std of that metric
    over the heads of both runs pooled (a metric constant over them is left out by dividing by
    1: it contributes 0). RMS (not the plain L2 norm) keeps distances comparable when the
    number of metrics changes.
    """
    a, b = _checked_descriptors(desc_a, "desc_a"), _checked_descriptors(desc_b, "desc_b")
    if a.shape[1] != b.shape[1]:
        raise DataError("desc_b", f"expected {a.shape[1]} metrics like desc_a, got {b.shape[1]}")
    if scale is None:
        std = torch.cat([a, b]).std(0, unbiased=False)
    else:
        std = as_float64(scale).reshape(-1)
        if std.shape[0] != a.shape[1] or not bool(std.isfinite().all()) or bool((std < 0).any()):
            raise DataError("scale", f"expected {a.shape[1]} finite values >= 0, got {std.tolist()}")
    std = torch.where(std > 0, std, torch.ones_like(std))
    diff = (a[:, None, :] - b[None, :, :]) / std  # [head_a, head_b, metric]
    return diff.pow(2).mean(-1).sqrt()


def match_heads(desc_a, desc_b, roles_a=None, roles_b=None, scale=None) -> HeadMatch:
    """Hungarian matching of the heads of two runs' layer by descriptors `desc_* [head, metric]`.

    `roles_* [head]` (ids or names) are optional; `scale` as in `descriptor_distances`.

    >>> d = torch.tensor([[0.0, 1.0], [1.0, 0.0], [5.0, 5.0]])
    >>> m = match_heads(d, d[[2, 0, 1]], roles_a=[0, 1, 2], roles_b=[2, 0, 1])
    >>> m.permutation.tolist(), m.mean_distance, m.same_role
    ([1, 2, 0], 0.0, 1.0)
    """
    cost = descriptor_distances(desc_a, desc_b, scale)
    if cost.shape[0] != cost.shape[1]:
        raise DataError("desc_b", f"expected as many heads as desc_a ({cost.shape[0]}), got {cost.shape[1]}")
    rows, cols = linear_sum_assignment(cost.numpy())
    permutation = torch.as_tensor(cols[np.argsort(rows)], dtype=torch.long)
    distance = cost[torch.arange(cost.shape[0]), permutation]
    same, same_base = _role_agreement(roles_a, roles_b, permutation)
    return HeadMatch(permutation, distance, float(distance.mean()), float(cost.mean()), same, same_base)


def _role_agreement(roles_a, roles_b, permutation: Tensor) -> tuple[float, float]:
    """(fraction of matched pairs with equal roles, its expectation under a random permutation)."""
    if roles_a is None and roles_b is None:
        return math.nan, math.nan
    if roles_a is None or roles_b is None:
        raise DataError("roles", "pass roles for both runs or for neither")
    ra, rb = np.asarray(roles_a).reshape(-1), np.asarray(roles_b).reshape(-1)
    n = permutation.shape[0]
    if ra.shape[0] != n or rb.shape[0] != n:
        raise DataError("roles", f"expected {n} roles per run (one per head), got {ra.shape[0]} and {rb.shape[0]}")
    equal = ra[:, None] == rb[None, :]  # [head_a, head_b]
    return float(equal[np.arange(n), permutation.numpy()].mean()), float(equal.mean())


def _checked_descriptors(desc, name: str) -> Tensor:
    d = as_float64(desc)
    if d.ndim != 2 or 0 in d.shape:
        raise DataError(name, f"expected a non-empty [head, metric] array, got shape {list(d.shape)}")
    if not bool(d.isfinite().all()):
        raise DataError(name, "descriptors must be finite (drop metrics that are NaN for some head)")
    return d
