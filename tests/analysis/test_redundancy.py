"""Duplicate-head clusters on hand-made JS matrices with known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from headlab.analysis.redundancy import duplicate_clusters, js_threshold, redundant_heads


def _blocks(sizes, within=0.01, between=0.4):
    n = sum(sizes)
    js = np.full((n, n), between)
    start = 0
    for size in sizes:
        js[start : start + size, start : start + size] = within
        start += size
    np.fill_diagonal(js, 0.0)
    return js


def test_block_matrix_gives_its_blocks():
    js = _blocks([3, 1, 2, 1, 1])
    assert duplicate_clusters(js, 0.05) == [[0, 1, 2], [4, 5]]
    assert redundant_heads(duplicate_clusters(js, 0.05)) == 3


def test_complete_linkage_does_not_chain():
    js = np.array([[0.0, 0.05, 0.3], [0.05, 0.0, 0.05], [0.3, 0.05, 0.0]])  # a~b, b~c, a far from c
    clusters = duplicate_clusters(js, 0.06)
    assert len(clusters) == 1 and len(clusters[0]) == 2
    assert duplicate_clusters(js, 0.31) == [[0, 1, 2]]


def test_no_duplicates_and_edge_cases():
    assert duplicate_clusters(_blocks([1, 1, 1, 1]), 0.05) == []
    assert duplicate_clusters(np.zeros((1, 1)), 0.05) == []
    assert duplicate_clusters(np.zeros((4, 4)), 0.05) == [[0, 1, 2, 3]]
    with pytest.raises(ValueError, match="square"):
        duplicate_clusters(np.zeros((2, 3)), 0.05)


def test_threshold_is_the_js_of_moving_that_mass_to_disjoint_keys():
    """The documented reason for the threshold, checked against a direct JS computation."""
    mass = 0.1
    p = np.array([0.9, 0.1, 0.0, 0.0])
    q = np.array([0.9, 0.0, 0.1, 0.0])  # agrees with p except for 10% of the mass on another key

    def js(a, b):
        m = (a + b) / 2
        kl = lambda x: sum(xi * math.log(xi / mi) for xi, mi in zip(x, m) if xi > 0)  # noqa: E731
        return (kl(a) + kl(b)) / 2

    assert js(p, q) == pytest.approx(js_threshold(mass), abs=1e-12)
