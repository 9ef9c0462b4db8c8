"""Init geometry of head weights against the random-direction theory and numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from headlab.analysis import init_orthogonality as ig
from headlab.analysis.weight_similarity import random_cosine_std


def test_init_geometry_of_random_gaussian_weights_matches_theory():
    torch.manual_seed(0)
    n_heads, d_model, d_head = 64, 32, 8
    W_Q, W_K = torch.randn(n_heads, d_model, d_head), torch.randn(n_heads, d_model, d_head)
    geo = ig.init_geometry(W_Q, W_K)
    assert geo.q.n_pairs == n_heads * (n_heads - 1) // 2
    assert geo.q.theory_std == random_cosine_std(d_model * d_head) == 1 / 16
    assert geo.q.std == pytest.approx(1 / 16, rel=0.1)
    assert abs(geo.q.mean) < 0.2 * geo.q.theory_std
    assert geo.qk.theory_std == pytest.approx(1 / d_model)
    assert geo.qk.std == pytest.approx(1 / d_model, rel=0.15)
    # independent computation of the pair cosines with numpy
    flat = W_Q.reshape(n_heads, -1).double().numpy()
    unit = flat / np.linalg.norm(flat, axis=1, keepdims=True)
    pairs = (unit @ unit.T)[np.triu_indices(n_heads, 1)]
    assert geo.q.std == pytest.approx(np.sqrt(np.mean(pairs**2)), rel=1e-5)  # float32 weights
    assert geo.q.q50 == pytest.approx(np.median(pairs), abs=1e-6)


def test_init_geometry_detects_heads_sharing_a_direction():
    torch.manual_seed(1)
    shared = torch.randn(1, 32, 8)
    geo = ig.init_geometry(torch.randn(16, 32, 8) + shared)  # every pair has cosine ~0.5
    assert geo.q.std_ratio > 5 and geo.q.mean == pytest.approx(0.5, abs=0.1)
    assert geo.qk is None


def test_cosine_summary_edge_cases():
    s = ig.cosine_summary([], d=64)
    assert s.n_pairs == 0 and math.isnan(s.std) and s.theory_std == 0.125
    s = ig.cosine_summary([0.3, -0.4], d=None)
    assert s.std == pytest.approx(math.sqrt((0.09 + 0.16) / 2)) and math.isnan(s.std_ratio)
    assert ig.offdiagonal(np.arange(9.0).reshape(3, 3)).tolist() == [1.0, 2.0, 5.0]
