"""Do heads' refined-LLC curves sort them by role, and where does a curve's stage lie? (pure: numpy/scipy)

Issue 32 item 7 asks two things of the per-head rLLC curves `headlab-llc` writes (rows `rllc` of
head_metrics.parquet, one value per sampled checkpoint):

- Separation: cluster the curves (`cluster_curves`: each curve divided by its largest |value|, so the
  clusters follow shape, not size; Ward linkage, scipy) into k groups and score the clusters against the
  heads' roles with the adjusted Rand index (`adjusted_rand_index`, Hubert & Arabie 1985: 1 = the same
  partition, 0 = chance). Eight heads make a coarse ARI, so each seed's ARI is compared with its own
  shuffled baseline (`ari_null`: the roles permuted over the same heads, every permutation when few) and
  the seeds are pooled by `combined_ari_p` (the sum of the seeds' ARIs against sums of independent null
  draws), never by pooling heads across seeds.
- Stages: `steepest_rise_step` dates a curve's stage boundary as the middle of the interval between
  sampled checkpoints where it rises fastest per step (the rise lies somewhere inside that interval, so
  its middle is the unbiased date on that grid); `half_rise_step` is the sensitivity check, the first
  step (interpolated) at which the curve has covered half its rise from its first value to its maximum.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.cluster.hierarchy import fcluster, linkage

from headlab.errors import DataError

N_DRAWS = 10_000


def normalised_curves(curves: np.ndarray) -> np.ndarray:
    """`[head, step]` -> each row divided by its largest |value| (a row of zeros stays zeros): the shape
    of a head's curve, so a head with a large rLLC does not form a cluster of its own by size alone."""
    x = _curves(curves)
    scale = np.abs(x).max(axis=1, keepdims=True)
    return np.divide(x, scale, out=np.zeros_like(x), where=scale > 0)


def cluster_curves(curves: np.ndarray, k: int, *, normalise: bool = True) -> np.ndarray:
    """Cluster labels 0..k-1 of the `[head, step]` curves: Ward linkage on Euclidean distances, cut into
    (at most) k clusters (scipy.cluster.hierarchy.fcluster `maxclust`). Deterministic: no random start."""
    x = normalised_curves(curves) if normalise else _curves(curves)
    if not 1 <= k <= x.shape[0]:
        raise DataError("clusters", f"k must be between 1 and the number of curves ({x.shape[0]}), got {k}")
    if k == 1 or x.shape[0] == 1:
        return np.zeros(x.shape[0], dtype=np.int64)
    labels = fcluster(linkage(x, method="ward"), t=k, criterion="maxclust")
    return _codes(labels)


def adjusted_rand_index(a: Sequence, b: Sequence) -> float:
    """Hubert & Arabie's adjusted Rand index of two labelings of the same items (labels of any type):
    (index - expected) / (max - expected) on the pair counts of their contingency table. Two trivial
    partitions that agree (all in one group, or all apart) score 1, as in sklearn."""
    x, y = _codes(a), _codes(b)
    if x.size != y.size:
        raise DataError("ari", f"two labelings of different length ({x.size} and {y.size})")
    table = np.zeros((x.max() + 1, y.max() + 1), dtype=np.int64)
    np.add.at(table, (x, y), 1)
    pairs = _pairs(table)
    expected, top = _chance(x, y)
    if top == expected:  # both partitions trivial (one group, or every item alone): nothing to adjust
        return 1.0
    return (pairs - expected) / (top - expected)


def ari_null(labels: Sequence, roles: Sequence, n_draws: int = N_DRAWS, seed: int = 0) -> np.ndarray:
    """ARI of `labels` against `roles` permuted over the same items: every permutation when n! <=
    `n_draws` (the exact null), else `n_draws` uniform ones (numpy seed `seed`)."""
    x, y = _codes(labels), _codes(roles)
    if x.size != y.size:
        raise DataError("ari", f"two labelings of different length ({x.size} and {y.size})")
    if math.factorial(x.size) <= n_draws:
        orders = np.array(list(itertools.permutations(range(x.size))), dtype=np.int64).reshape(-1, x.size)
    else:
        rng = np.random.default_rng(seed)
        orders = np.stack([rng.permutation(x.size) for _ in range(n_draws)])
    # a permutation keeps both labelings' group sizes, so only the agreeing pairs change: count them per row
    ny = int(y.max()) + 1
    cells = x[None, :] * ny + y[orders]
    counts = np.zeros((orders.shape[0], (int(x.max()) + 1) * ny), dtype=np.int64)
    np.add.at(counts, (np.arange(orders.shape[0])[:, None], cells), 1)
    expected, top = _chance(x, y)
    if top == expected:
        return np.ones(orders.shape[0])
    return ((counts * (counts - 1) // 2).sum(axis=1) - expected) / (top - expected)


@dataclass(frozen=True)
class RoleSeparation:
    """One model's curves against its heads' roles: `ari` of the k = `k` clusters (`labels`), the
    shuffled-role baseline's mean and 95th percentile, `p_value` = share of shuffles with an ARI at least
    as high (the observed order among them), and `layer_ari`: the ARI a clustering by layer alone gets
    (what a curve that only told the layers apart would score). `null` holds the shuffled ARIs."""

    ari: float
    null_mean: float
    null_q95: float
    p_value: float
    k: int
    n_heads: int
    labels: tuple[int, ...]
    layer_ari: float
    null: np.ndarray


def role_separation(curves: np.ndarray, roles: Sequence[str], layers: Sequence[int] | None = None, *,
                    k: int | None = None, normalise: bool = True, n_draws: int = N_DRAWS,
                    seed: int = 0) -> RoleSeparation:
    """Cluster the `[head, step]` curves into k groups (default: the number of distinct `roles`) and score
    them against `roles` (one per row), with the shuffled baseline (`ari_null`)."""
    x = _curves(curves)
    if len(roles) != x.shape[0]:
        raise DataError("roles", f"{len(roles)} roles for {x.shape[0]} curves")
    k = len(set(roles)) if k is None else k
    labels = cluster_curves(x, k, normalise=normalise)
    ari = adjusted_rand_index(labels, roles)
    null = ari_null(labels, roles, n_draws=n_draws, seed=seed)
    layer_ari = adjusted_rand_index(layers, roles) if layers is not None else math.nan
    return RoleSeparation(ari, float(null.mean()), float(np.quantile(null, 0.95)),
                          float((null >= ari - 1e-12).mean()), k, x.shape[0], tuple(int(v) for v in labels),
                          layer_ari, null)


def combined_ari_p(observed: Sequence[float], nulls: Sequence[np.ndarray], n_draws: int = N_DRAWS,
                   seed: int = 0) -> float:
    """Over seeds: the share of draws in which the sum of one shuffled ARI per seed (each from that seed's
    own null) reaches the sum of the observed ARIs (plus-one corrected: the observed counts once). Seeds
    are the units; each keeps its own number of heads and roles."""
    if len(observed) != len(nulls) or not observed:
        raise DataError("ari", f"need one null per seed, got {len(observed)} ARIs and {len(nulls)} nulls")
    rng = np.random.default_rng(seed)
    total = np.zeros(n_draws)
    for null in nulls:
        total += rng.choice(np.asarray(null, dtype=np.float64), size=n_draws, replace=True)
    hits = int((total >= float(np.sum(observed)) - 1e-9).sum())
    return (hits + 1) / (n_draws + 1)


def steepest_rise_step(steps: Sequence[float], curve: Sequence[float]) -> float:
    """The middle of the interval between consecutive sampled steps over which `curve` rises fastest per
    step (the first such interval on a tie); NaN if it never rises."""
    s, y = _series(steps, curve)
    slope = np.diff(y) / np.diff(s)
    if not np.any(slope > 0):
        return math.nan
    i = int(np.argmax(slope))
    return float((s[i] + s[i + 1]) / 2)


def half_rise_step(steps: Sequence[float], curve: Sequence[float]) -> float:
    """The first step (linear interpolation between sampled steps) at which `curve` has covered half its
    rise from its first value to its maximum; NaN if it never rises above its first value."""
    s, y = _series(steps, curve)
    top = float(y.max())
    if top <= y[0]:
        return math.nan
    bar = y[0] + (top - y[0]) / 2
    i = int(np.argmax(y >= bar))  # first index at or above the bar (i >= 1: y[0] < bar)
    return float(s[i - 1] + (bar - y[i - 1]) * (s[i] - s[i - 1]) / (y[i] - y[i - 1]))


def _curves(curves: np.ndarray) -> np.ndarray:
    x = np.asarray(curves, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] < 2:
        raise DataError("curves", f"expected [head, step] with at least 2 steps, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise DataError("curves", "a curve has a missing (NaN) or infinite value: every head needs every step")
    return x


def _series(steps: Sequence[float], curve: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    s, y = np.asarray(steps, dtype=np.float64), np.asarray(curve, dtype=np.float64)
    if s.shape != y.shape or s.ndim != 1 or s.size < 2 or not np.all(np.diff(s) > 0):
        raise DataError("curve", f"expected increasing steps and one value each (at least 2), got {s.size} and {y.size}")
    if not np.isfinite(y).all():
        raise DataError("curve", "a missing (NaN) or infinite value")
    return s, y


def _chance(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """The ARI's expected agreeing pairs under chance and its maximum, from the two labelings' group sizes."""
    rows, cols = _pairs(np.bincount(x)), _pairs(np.bincount(y))
    total = x.size * (x.size - 1) / 2
    return (rows * cols / total if total else 0.0), (rows + cols) / 2


def _pairs(counts: np.ndarray) -> float:
    """sum of C(c, 2) over the counts (exact in integers)."""
    return float((counts * (counts - 1) // 2).sum())


def _codes(labels: Sequence) -> np.ndarray:
    """Labels of any type -> integer codes 0..m-1 in order of first appearance."""
    values = list(np.asarray(labels).tolist()) if not isinstance(labels, list) else labels
    seen: dict = {}
    return np.array([seen.setdefault(v, len(seen)) for v in values], dtype=np.int64)
