import math

import pytest

from headlab.errors import ConfigError
from headlab.lit.schedule import lr_factor, resolve_warmup_steps


def test_warmup_is_linear_then_cosine_reaches_min_ratio():
    total, warm = 200, 20
    factors = [lr_factor(s, total, warm, "cosine", min_ratio=0.1) for s in range(total + 1)]
    assert factors[:warm] == pytest.approx([(s + 1) / warm for s in range(warm)])
    assert factors[warm] == pytest.approx(1.0)
    mid = warm + (total - warm) // 2
    assert factors[mid] == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))
    assert factors[-1] == pytest.approx(0.1)
    assert all(a >= b for a, b in zip(factors[warm:], factors[warm + 1:]))


def test_constant_schedule_after_warmup():
    assert [lr_factor(s, 50, 5, "constant") for s in (5, 20, 49)] == [1.0, 1.0, 1.0]


def test_warmup_steps_beats_ratio_and_bad_values_name_the_key():
    assert resolve_warmup_steps(1000, 7, 0.5) == 7
    assert resolve_warmup_steps(1000, None, 0.05) == 50
    with pytest.raises(ConfigError, match="optim.warmup_ratio"):
        resolve_warmup_steps(1000, None, 1.5)
    with pytest.raises(ConfigError, match="optim.schedule"):
        lr_factor(0, 10, 0, "exponential")
