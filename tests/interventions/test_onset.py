"""When a head became important: shares of each step's importance, and the step from which a head
keeps more than an equal share (hand-made trajectories with known answers)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from headlab.interventions.onset import importance_onset, importance_shares


def test_shares_are_scale_free_per_step():
    """Early in training every gradient is large: the same split at 10x the scale is the same shares."""
    values = np.array([[2.0, 6.0, 2.0], [0.2, 0.6, 0.2], [0.5, -0.5, 0.5], [-1.0, 0.0, math.nan]])
    shares = importance_shares(values)
    assert shares[0].tolist() == pytest.approx([0.2, 0.6, 0.2]) and shares[1].tolist() == pytest.approx(shares[0].tolist())
    assert shares[2].tolist() == pytest.approx([0.5, 0.0, 0.5])  # a head whose removal helps carries nothing
    assert np.isnan(shares[3]).all()  # no head matters at all: no shares


@pytest.mark.parametrize(("steps", "shares", "expected"), [
    ([0, 10, 20, 30], [0.1, 0.2, 0.4, 0.5], 20),          # above 0.25 from step 20 on
    ([0, 10, 20, 30, 40], [0.3, 0.1, 0.4, 0.2, 0.5], 40),  # flickers: only the last crossing holds
    ([0, 10, 20], [0.3, 0.4, 0.5], 0),                    # important from the first measurement on
    ([0, 10, 20], [0.1, 0.6, 0.2], None),                 # important at 10, lost by the end
    ([0, 10, 20], [0.3, 0.3, 0.25], None),                # at the bar is not above it
    ([20, 0, 10], [0.5, 0.1, 0.4], 10),                   # the order the steps come in does not matter
    ([0, 10, 20], [0.3, math.nan, 0.4], 20),              # a step without shares breaks the run
])
def test_onset(steps, shares, expected):
    assert importance_onset(steps, shares, bar=0.25) == expected
