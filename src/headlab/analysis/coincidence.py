"""Do induction onsets coincide with the loss drop more than chance would? (pure: numpy)

Two dates read off the same measurement grid lie close together by construction: on a 100-step grid
with a +/-200 tolerance, five of every 31 steps "coincide" with any drop. So the closeness is
compared with a shuffled baseline that keeps the grid and the number of onsets:

- `grid_coincidence` (one run): the mean |onset - drop| over the heads that formed, against the
  same mean with each onset drawn uniformly from the steps where an onset could have been dated.
- `seed_coincidence` (a sweep): the mean |onset_s - drop_s| over seeds s, against the same mean with
  the drops shuffled across seeds (every permutation when there are few, else `n_draws` of them).

p = the share of shuffles at least as close (the observed order counted once): small when the
onsets sit nearer their own drop than shuffled ones do. Seeded numpy RNG, so the p-value is reproducible.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from headlab.errors import DataError

N_DRAWS = 10_000


@dataclass(frozen=True)
class Coincidence:
    """`gap`: mean |onset - drop| observed; `null_gap`: its mean under the shuffle; `p_value`; `n` pairs."""

    gap: float
    null_gap: float
    p_value: float
    n: int


def grid_coincidence(onsets: Sequence[float], drop: float, candidates: Sequence[float],
                     n_draws: int = N_DRAWS, seed: int = 0) -> Coincidence:
    """One run's onsets (formed heads) against its drop; the null draws each onset from `candidates`."""
    x = _finite("onsets", onsets)
    grid = _finite("candidates", candidates)
    if not math.isfinite(drop):
        raise DataError("coincidence", f"drop step must be finite, got {drop!r}")
    draws = np.random.default_rng(seed).choice(grid, size=(_draws(n_draws), x.size), replace=True)
    null = np.abs(draws - drop).mean(axis=1)
    return _result(float(np.abs(x - drop).mean()), null, x.size)


def seed_coincidence(onsets: Sequence[float], drops: Sequence[float], n_draws: int = N_DRAWS,
                     seed: int = 0) -> Coincidence:
    """Seed s's onset against seed s's drop (pairs with a missing value dropped); null: drops shuffled."""
    pairs = np.array([(o, d) for o, d in zip(onsets, drops, strict=True)
                      if o is not None and d is not None and math.isfinite(o) and math.isfinite(d)], dtype=np.float64)
    if len(pairs) < 2:
        raise DataError("coincidence", f"need at least 2 seeds with an onset and a drop, got {len(pairs)}")
    x, d = pairs[:, 0], pairs[:, 1]
    exact = math.factorial(x.size) <= _draws(n_draws)
    if exact:
        orders = np.array(list(itertools.permutations(range(x.size))))
    else:
        rng = np.random.default_rng(seed)
        orders = np.array([rng.permutation(x.size) for _ in range(n_draws)])
    null = np.abs(x[None, :] - d[orders]).mean(axis=1)
    return _result(float(np.abs(x - d).mean()), null, x.size, exact)


def _result(gap: float, null: np.ndarray, n: int, exact: bool = False) -> Coincidence:
    """Exact (every permutation, the observed one among them): the share at least as close; drawn:
    (1 + count) / (1 + draws), the observed order counted once, so p is never 0."""
    close = int((null <= gap + 1e-9).sum())
    p = close / null.size if exact else (1 + close) / (1 + null.size)
    return Coincidence(gap=gap, null_gap=float(null.mean()), p_value=p, n=n)


def _draws(n_draws: int) -> int:
    if not isinstance(n_draws, int) or n_draws < 1:
        raise DataError("coincidence", f"n_draws={n_draws!r}: expected an integer >= 1")
    return n_draws


def _finite(name: str, values: Sequence[float]) -> np.ndarray:
    x = np.asarray([v for v in values if v is not None], dtype=np.float64)
    if x.size == 0 or not np.isfinite(x).all():
        raise DataError("coincidence", f"{name}: expected at least one finite step, got {list(values)!r}")
    return x
