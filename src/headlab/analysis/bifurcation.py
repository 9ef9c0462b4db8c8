"""When is a head's role decided? The bifurcation step of each head (pure: torch / numpy).

`role_bifurcation_steps`, `metric_bifurcation_steps`: the first measurement step from which a
head's role label (or its metric vector, within a tolerance) stays at its final value until the
last measurement. A head that settles only at the very end, or never, gets NaN, so "settled late"
and "never settled" stay apart. Arguments are tensors or array-likes; results are float64 tensors.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from headlab.analysis._arrays import as_float64
from headlab.errors import ConfigError, DataError

# A metric vector counts as settled when every metric is within this fraction of its scale
# (default scale: the metric's range over the layer's heads and steps) of its final value.
METRIC_TOLERANCE = 0.05
# The final value must be held at this many measurement points (the last included) to count as
# settled; with 1, a head whose role flipped at the very last measurement would count as settled.
MIN_SETTLED_POINTS = 2


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
    vals = as_float64(values)
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
        span = as_float64(scale).reshape(-1)
        if span.shape[0] != vals.shape[-1] or bool((span < 0).any()) or not bool(span.isfinite().all()):
            raise DataError("scale", f"expected {vals.shape[-1]} finite values >= 0 (one per metric), got {span.tolist()}")
    return torch.where(span > 0, span, torch.ones_like(span))


def _checked_steps(steps) -> Tensor:
    steps_t = as_float64(steps).reshape(-1)
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
    xt = as_float64(x)
    xt = xt.unsqueeze(1) if xt.ndim == 1 else xt
    if xt.ndim != 2 or xt.shape[0] != t or xt.shape[1] == 0:
        raise DataError(name, f"expected [t, head] with t = {t} (one row per step), got {list(xt.shape)}")
    return xt
