"""Claim C1 measured directly: how orthogonal random 64-d directions, and the query directions of
freshly initialised heads, are (article 2.1: cosine std about 1/sqrt(64) = 0.125, "most" angles
within 83-97 degrees).

Two measurements, one value per seed (the claim's statistics average over seeds):

- ``random_vectors``: cosines of pairs of independent N(0, I_d) vectors;
- ``initialised_queries``: for random inputs x, the cosine between two heads' queries x W_Q[a] and
  x W_Q[b] of one headlab attention layer initialised as training initialises it (Xavier per head,
  gain = ``init_scale``): the "direction" each head looks in at step 0.
"""

from __future__ import annotations

import math
from typing import Callable

import torch

from headlab.model.attention import MultiHeadSelfAttention
from headlab.model.init import init_weights

BAND_DEGREES = (83.0, 97.0)


def cosine_summary(cos: torch.Tensor) -> dict[str, float]:
    """`cos_std` (root mean square around 0) and `in_band` (share of angles within 83-97 degrees).

    >>> cosine_summary(torch.tensor([0.0, 0.5]))["in_band"]
    0.5
    """
    angles = torch.rad2deg(torch.arccos(cos.clamp(-1.0, 1.0)))
    in_band = ((angles >= BAND_DEGREES[0]) & (angles <= BAND_DEGREES[1])).double().mean()
    return {"cos_std": float(cos.double().pow(2).mean().sqrt()), "in_band": float(in_band)}


def random_vectors(seed: int, d: int = 64, n_pairs: int = 20000) -> dict[str, float]:
    """`cosine_summary` of `random_cosines`."""
    return cosine_summary(random_cosines(seed, d, n_pairs))


def random_cosines(seed: int, d: int = 64, n_pairs: int = 20000) -> torch.Tensor:
    """Cosines of `n_pairs` pairs of independent standard normal vectors in `d` dimensions."""
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randn(n_pairs, d, generator=g, dtype=torch.float64), torch.randn(n_pairs, d, generator=g, dtype=torch.float64)
    return torch.nn.functional.cosine_similarity(a, b, dim=-1)


def initialised_queries(seed: int, d_model: int = 768, n_heads: int = 12, init_scale: float = 1.0,
                        n_inputs: int = 256) -> dict[str, float]:
    """`cosine_summary` of `initialised_query_cosines`."""
    return cosine_summary(initialised_query_cosines(seed, d_model, n_heads, init_scale, n_inputs))


def initialised_query_cosines(seed: int, d_model: int = 768, n_heads: int = 12, init_scale: float = 1.0,
                              n_inputs: int = 256) -> torch.Tensor:
    """Cosines between every pair of heads' queries for `n_inputs` random inputs (d_head = d_model / n_heads)."""
    torch.manual_seed(seed)
    attn = MultiHeadSelfAttention(d_model, n_heads)
    init_weights(attn, init_scale)
    return query_cosines(attn.head_weights().W_Q, seed, n_inputs)  # W_Q [head, d_model, d_head]


def query_cosines(W_Q: torch.Tensor, seed: int, n_inputs: int = 256) -> torch.Tensor:
    """Cosines between every pair of heads' queries x W_Q[a], x W_Q[b] of one layer (`W_Q [head,
    d_model, d_head]`, e.g. a checkpoint's at step 0) for `n_inputs` random N(0, I) inputs: the
    measurement of `initialised_query_cosines` on weights given rather than freshly initialised."""
    W_Q = W_Q.detach().double()
    n_heads, d_model = W_Q.shape[0], W_Q.shape[1]
    x = torch.randn(n_inputs, d_model, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64)
    q = torch.nn.functional.normalize(torch.einsum("nd,hde->hne", x, W_Q), dim=-1)
    a, b = torch.triu_indices(n_heads, n_heads, offset=1)
    return (q[a] * q[b]).sum(-1).reshape(-1)


def angle_figure(path, seed: int = 0):
    """figures/angle_histogram.png of C1: both measurements' angles (seed `seed`) against the 83-97 degree band."""
    from headlab.plots.directions import plot_angle_histograms

    angles = {name: torch.rad2deg(torch.arccos(cos(seed).clamp(-1.0, 1.0))).numpy()
              for name, cos in (("random N(0, I_64) pairs", random_cosines),
                                ("queries of an initialised 768-d, 12-head layer", initialised_query_cosines))}
    return plot_angle_histograms(angles, BAND_DEGREES, path)


MEASUREMENTS: dict[str, Callable[..., dict[str, float]]] = {
    "random_vectors": random_vectors,
    "initialised_queries": initialised_queries,
}
FIGURES = {"angle_histogram.png": angle_figure}  # a computed claim's `evidence.figure` -> what draws it


def theory_cos_std(d: int) -> float:
    """1 / sqrt(d): the std of the cosine of two independent random directions in d dimensions."""
    return 1.0 / math.sqrt(d)
