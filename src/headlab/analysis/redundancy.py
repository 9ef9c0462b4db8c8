"""Near-duplicate heads: clusters of heads in one layer whose attention maps barely differ.

The distance is the Jensen-Shannon divergence between two heads' attention rows (nats, averaged
over probe queries: the `js` pair table, see `head_similarity`). The threshold is stated as
attention MASS: two distributions that agree except for a share `mass` placed on disjoint keys
have JS = mass * ln 2 exactly, so `js_threshold(0.1)` = 0.069 nats means "they agree up to about
10% of the attention mass". Clusters use complete linkage: EVERY pair inside a cluster is within
the threshold (single linkage would chain a-b-c into one cluster although a and c differ).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import pandas as pd
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial.distance import squareform


# The default share of attention mass two duplicate heads may place differently (headlab-importance's
# `importance.redundancy_mass`, and the bar of the sweep table sweep_redundancy.csv).
DEFAULT_MASS = 0.1


def js_threshold(mass: float) -> float:
    """JS (nats) of two distributions that differ only by `mass` moved to disjoint keys: mass * ln 2.

    >>> round(js_threshold(0.1), 4)
    0.0693
    """
    if not 0.0 < mass <= 1.0:
        raise ValueError(f"mass must be in (0, 1]; got {mass}")
    return mass * math.log(2.0)


def duplicate_clusters(js: np.ndarray, threshold: float) -> list[list[int]]:
    """Clusters (size >= 2) of heads whose pairwise JS are all <= `threshold`; `js` is `[head, head]`.

    >>> js = np.array([[0, .01, .5], [.01, 0, .5], [.5, .5, 0]])
    >>> duplicate_clusters(js, 0.05)
    [[0, 1]]
    """
    js = np.asarray(js, dtype=np.float64)
    if js.ndim != 2 or js.shape[0] != js.shape[1]:
        raise ValueError(f"expected a square [head, head] matrix; got shape {js.shape}")
    if js.shape[0] < 2:
        return []
    if not np.isfinite(js).all():
        raise ValueError("the JS matrix has NaN or infinite entries")
    distance = (js + js.T) / 2.0
    np.fill_diagonal(distance, 0.0)
    labels = fcluster(linkage(squareform(np.clip(distance, 0.0, None), checks=False), method="complete"),
                      t=threshold, criterion="distance")
    clusters = [sorted(np.flatnonzero(labels == c).tolist()) for c in np.unique(labels)]
    return sorted(c for c in clusters if len(c) > 1)


def redundant_heads(clusters: Sequence[Sequence[int]]) -> int:
    """Heads that duplicate another one: each cluster keeps one representative, the rest count.

    >>> redundant_heads([[0, 1, 2], [4, 5]])
    3
    """
    return sum(len(c) - 1 for c in clusters)


def pair_table_redundancy(pairs: pd.DataFrame, mass: float = DEFAULT_MASS, step: int | None = None) -> dict[str, Any] | None:
    """Near-duplicate clusters of every layer from a long `head_pairs` table (its `js` rows), at the last
    measurement at or before `step` (the last one when None); None when there is no such `js` row.

    Returns `step, mass, js_threshold, layers` (per layer: `layer, n_heads, clusters, redundant_heads`),
    `n_heads`, `redundant_heads` (all layers) and `duplicate_fraction` = redundant_heads / n_heads,
    and `js` (each layer's `[head, head]` matrix, for the figure).
    """
    js = pairs[pairs["metric"] == "js"]
    if step is not None:
        js = js[js["step"] <= step]
    if js.empty:
        return None
    at = int(js["step"].max())
    js = js[js["step"] == at]
    threshold = js_threshold(mass)
    layers, matrices = [], []
    for layer, rows in js.groupby("layer", sort=True):
        n = int(max(rows["head_a"].max(), rows["head_b"].max())) + 1
        matrix = np.zeros((n, n))
        matrix[rows["head_a"].to_numpy(int), rows["head_b"].to_numpy(int)] = rows["value"].to_numpy(float)
        clusters = duplicate_clusters(matrix, threshold)
        layers.append({"layer": int(layer), "clusters": clusters, "redundant_heads": redundant_heads(clusters), "n_heads": n})
        matrices.append(matrix)
    total = sum(entry["n_heads"] for entry in layers)
    n_redundant = sum(entry["redundant_heads"] for entry in layers)
    return {"step": at, "mass": mass, "js_threshold": threshold, "layers": layers, "n_heads": total,
            "redundant_heads": n_redundant, "duplicate_fraction": n_redundant / total, "js": [m.tolist() for m in matrices]}
