"""When a head became important: hand-made trajectories with known onsets."""

from __future__ import annotations

import math

import pytest

from headlab.interventions.onset import importance_onset


@pytest.mark.parametrize(("steps", "values", "expected"), [
    ([0, 10, 20, 30], [0.0, 0.1, 0.9, 1.0], 20),        # rises at 20 and holds (0.9 >= 0.5 x 1.0)
    ([0, 10, 20, 30, 40], [0.6, 0.1, 0.7, 0.3, 1.0], 40),  # flickers: only the last crossing holds
    ([0, 10, 20], [0.5, 0.6, 1.0], 0),                  # important from the first measurement on
    ([0, 10, 20], [0.1, 1.0, 0.2], None),               # important at 10, lost by the end
    ([0, 10, 20], [-0.3, -0.1, 0.0], None),             # zeroing it never hurt
    ([20, 0, 10], [1.0, 0.0, 0.8], 10),                 # order of the steps given does not matter
    ([0, 10, 20], [math.nan, 0.2, 1.0], 20),            # a missing value is skipped
])
def test_onset(steps, values, expected):
    assert importance_onset(steps, values) == expected


def test_share_sets_the_bar():
    steps, values = [0, 10, 20], [0.3, 0.6, 1.0]
    assert importance_onset(steps, values, share=0.25) == 0
    assert importance_onset(steps, values, share=0.9) == 20
    with pytest.raises(ValueError, match="share"):
        importance_onset(steps, values, share=0.0)
