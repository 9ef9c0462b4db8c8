"""How heads diverge over training and across seeds (pure: torch / numpy / scipy).

Four questions, one function (family) each:

- **When is a head's role decided?** `role_bifurcation_steps`, `metric_bifurcation_steps`: the
  first measurement step from which a head's role label (or its metric vector, within a
  tolerance) stays at its final value until the last measurement.
- **Is the division of labour reproducible across seeds?** Heads of a layer are permutation
  symmetric, so "head 3 of seed 0" and "head 3 of seed 1" are unrelated. `match_heads` pairs the
  heads of two runs by their standardised metric descriptors (Hungarian assignment) and compares
  the matched distance and role agreement with a random-permutation baseline.
- **How orthogonal are heads at init?** `init_geometry` / `cosine_summary`: the distribution of
  pairwise cosines between heads' W_Q (and W_Q W_K^T) against N(0, 1/d) for independent random
  directions.
- **Do winners move farther?** `movement_importance_correlation`: Spearman and Pearson
  correlation of how far / how hard a head was pushed with its final importance proxy.

Arguments are torch tensors or anything `torch.as_tensor` takes (numpy arrays, lists); results
are float64 tensors or small dataclasses of floats.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import torch
from scipy import stats
from scipy.optimize import linear_sum_assignment
from torch import Tensor

from headlab.analysis.weight_similarity import head_cosine, qk_cosine, random_cosine_std
from headlab.errors import ConfigError, DataError

# A metric vector counts as settled when every metric is within this fraction of its scale
# (default scale: the metric's range over the layer's heads and steps) of its final value.
METRIC_TOLERANCE = 0.05
# The final value must be held at this many measurement points (the last included) to count as
# settled; with 1, a head whose role flipped at the very last measurement would count as settled.
MIN_SETTLED_POINTS = 2


# ---------------------------------------------------------------- bifurcation steps
def role_bifurcation_steps(steps, roles, min_points: int = MIN_SETTLED_POINTS) -> Tensor:
    """`[head]` first step from which each head's role equals its final role until the end.

    `steps [t]` strictly increasing measurement steps; `roles [t, head]` role ids or names (or a
    `[t]` sequence for one head, which returns `[1]`). A head that holds its final role for fewer than
    `min_points` measurements (including a one-point trajectory when `min_points >= 2`) has not
    visibly settled: NaN, never the last step, so "settled late" and "never settled" stay apart.

    >>> role_bifurcation_steps([0, 20, 40, 60], [[5, 1], [2, 1], [2, 1], [2, 5]]).tolist()
    [20.0, nan]
    """
    steps_t = _checked_steps(steps)
    roles_t = _per_head_series(_role_codes(roles), steps_t.shape[0], "roles")
    stays = roles_t == roles_t[-1:]  # [t, head]; NaN ids never equal: unsettled
    return _settle_steps(steps_t, stays, min_points)


def metric_bifurcation_steps(
    steps, values, tol: float = METRIC_TOLERANCE, scale=None, min_points: int = MIN_SETTLED_POINTS
) -> Tensor:
    """`[head]` first step from which each head's metric vector stays within `tol` of its final one.

    `values [t, head, metric]`. Distance to the final vector is the max-norm of per-metric
    differences in units of `scale [metric]`: settled when every metric is within `tol * scale`
    of its final value. Default scale: each metric's range (max - min) over all steps and heads
    of `values`, so metrics in tokens and in probabilities weigh alike; a constant metric
    (range 0) is ignored. NaN values never count as settled; `min_points` as in
    `role_bifurcation_steps` (NaN = not settled within the measured window).

    >>> v = torch.tensor([[[0.0]], [[0.9]], [[1.0]], [[1.0]]])   # one head, one metric
    >>> metric_bifurcation_steps([0, 10, 20, 30], v, tol=0.15).tolist()
    [10.0]
    """
    steps_t = _checked_steps(steps)
    vals = _as_float(values)
    if vals.ndim != 3 or vals.shape[0] != steps_t.shape[0] or 0 in vals.shape[1:]:
        raise DataError("values", f"expected [t, head, metric] with t = {steps_t.shape[0]}, got {list(vals.shape)}")
    if not (isinstance(tol, (int, float)) and tol >= 0):
        raise ConfigError("tol", tol, "a tolerance >= 0 (fraction of each metric's scale)")
    scale_t = _metric_scale(vals, scale)
    deviation = (vals - vals[-1:]).abs() / scale_t  # [t, head, metric]
    stays = (deviation <= tol).all(-1)  # NaN -> False
    return _settle_steps(steps_t, stays, min_points)


def _settle_steps(steps: Tensor, stays: Tensor, min_points: int) -> Tensor:
    """`[head]` step at the start of the final run of True in `stays [t, head]`, NaN if shorter than `min_points`."""
    if isinstance(min_points, bool) or not isinstance(min_points, int) or min_points < 1:
        raise ConfigError("min_points", min_points, "an integer >= 1")
    # Length of the trailing run of True per head: count of True after the last False.
    t = stays.shape[0]
    index = torch.arange(t).unsqueeze(1).expand_as(stays)
    last_break = torch.where(~stays, index, torch.full_like(index, -1)).amax(0)  # [head]
    run = t - 1 - last_break
    start = (last_break + 1).clamp(max=t - 1)
    out = steps[start].to(torch.float64)
    return torch.where(run >= min_points, out, torch.full_like(out, math.nan))


def _metric_scale(vals: Tensor, scale) -> Tensor:
    """`[metric]` positive scale; a zero range (constant metric) becomes 1 (its deviation is 0)."""
    if scale is None:
        finite = torch.where(vals.isfinite(), vals, torch.nan)
        flat = finite.flatten(0, 1)  # [t * head, metric]
        span = flat.nan_to_num(-math.inf).amax(0) - flat.nan_to_num(math.inf).amin(0)
        span = torch.where(span.isfinite(), span, torch.ones_like(span))
    else:
        span = _as_float(scale).reshape(-1)
        if span.shape[0] != vals.shape[-1] or bool((span < 0).any()) or not bool(span.isfinite().all()):
            raise DataError("scale", f"expected {vals.shape[-1]} finite values >= 0 (one per metric), got {span.tolist()}")
    return torch.where(span > 0, span, torch.ones_like(span))


def _as_float(x) -> Tensor:
    """A float64 CPU tensor that owns its data (a read-only numpy view would warn and alias)."""
    if isinstance(x, Tensor):
        return x.detach().to("cpu", torch.float64)
    return torch.from_numpy(np.array(x, dtype=np.float64))


def _checked_steps(steps) -> Tensor:
    steps_t = _as_float(steps).reshape(-1)
    if steps_t.numel() == 0:
        raise DataError("steps", "expected at least one measurement step")
    if not bool(steps_t.isfinite().all()) or bool((steps_t.diff() <= 0).any()):
        raise DataError("steps", f"expected strictly increasing finite steps, got {steps_t.tolist()[:10]}")
    return steps_t


def _role_codes(roles) -> np.ndarray:
    """Role names become integer codes (equal names, equal codes); numeric ids pass through."""
    if isinstance(roles, Tensor):
        return roles.detach().cpu().numpy()
    labels = np.asarray(roles)
    if labels.dtype.kind in "biuf":
        return labels
    _, codes = np.unique(labels.astype(str), return_inverse=True)
    return codes.reshape(labels.shape)


def _per_head_series(x, t: int, name: str) -> Tensor:
    """`[t, head]` float64 from `[t]` (one head) or `[t, head]`."""
    xt = _as_float(x)
    xt = xt.unsqueeze(1) if xt.ndim == 1 else xt
    if xt.ndim != 2 or xt.shape[0] != t or xt.shape[1] == 0:
        raise DataError(name, f"expected [t, head] with t = {t} (one row per step), got {list(xt.shape)}")
    return xt


# ---------------------------------------------------------------- cross-seed matching
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
        std = _as_float(scale).reshape(-1)
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
    d = _as_float(desc)
    if d.ndim != 2 or 0 in d.shape:
        raise DataError(name, f"expected a non-empty [head, metric] array, got shape {list(d.shape)}")
    if not bool(d.isfinite().all()):
        raise DataError(name, "descriptors must be finite (drop metrics that are NaN for some head)")
    return d


# ---------------------------------------------------------------- init geometry
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
    m = _as_float(matrix)
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
    c = _as_float(cosines).reshape(-1)
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


# ---------------------------------------------------------------- winners move farther
@dataclass(frozen=True)
class Correlation:
    """Spearman (rank) and Pearson correlation with two-sided p-values over `n` finite pairs.

    NaN when fewer than 3 pairs or either side is constant (no correlation is defined).
    """

    n: int
    spearman: float
    spearman_p: float
    pearson: float
    pearson_p: float


def movement_importance_correlation(movement, importance) -> Correlation:
    """Correlate per-head `movement [head]` (cumulative grad norm or distance from init) with a
    final `importance [head]` proxy (e.g. attention specificity 1 - entropy_norm).

    "Winners move farther" predicts a positive correlation. Pairs with a NaN on either side are
    dropped.

    >>> c = movement_importance_correlation([1.0, 2.0, 3.0, 4.0], [0.1, 0.3, 0.2, 0.9])
    >>> round(c.spearman, 3), round(c.pearson, 3)
    (0.8, 0.826)
    """
    x = _as_float(movement).reshape(-1).numpy()
    y = _as_float(importance).reshape(-1).numpy()
    if x.shape != y.shape:
        raise DataError("importance", f"expected {x.shape[0]} values (one per head, like movement), got {y.shape[0]}")
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return Correlation(int(x.size), math.nan, math.nan, math.nan, math.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.ConstantInputWarning)
        rho = stats.spearmanr(x, y)
        r = stats.pearsonr(x, y)
    return Correlation(int(x.size), float(rho.statistic), float(rho.pvalue), float(r.statistic), float(r.pvalue))
