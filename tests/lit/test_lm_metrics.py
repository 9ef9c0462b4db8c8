"""LMHeadMetricsCallback dates the phase change from its history (planted trajectories)."""

from __future__ import annotations

import pytest

from headlab.errors import ConfigError
from headlab.lit.callbacks.lm_metrics import LMHeadMetricsCallback


def _planted(onset: int, loss_drop: int) -> LMHeadMetricsCallback:
    callback = LMHeadMetricsCallback(every_n_steps=50)
    for step in range(0, 1000, 50):
        formed = step >= onset
        callback.history.append({"step": step, "probe_loss": 4.0 if step < loss_drop else 1.0,
                                 "icl_score": 0.0 if step < loss_drop else -3.0,
                                 "induction": [[0.05, 0.05], [0.9 if formed else 0.05, 0.05]]})
    return callback


def test_onset_loss_drop_and_icl_jump_are_the_planted_steps():
    facts = _planted(onset=500, loss_drop=550).phase_change()
    assert facts["induction_onset_steps"] == {"L0H0": None, "L0H1": None, "L1H0": 500, "L1H1": None}
    assert facts["loss_drop_step"] == 550 and facts["icl_jump_step"] == 550
    assert facts["onsets_coincide_with_loss_drop"] is True
    assert facts["max_induction_score_overall"] == 0.9


def test_far_apart_onset_does_not_coincide():
    assert _planted(onset=200, loss_drop=800).phase_change()["onsets_coincide_with_loss_drop"] is False


def test_bad_cadence_is_one_error():
    with pytest.raises(ConfigError, match="every_n_steps"):
        LMHeadMetricsCallback(every_n_steps=0)
    with pytest.raises(ConfigError, match=r"standard_probe_size=-1: expected an integer >= 0 \(0: off\)"):
        LMHeadMetricsCallback(standard_probe_size=-1)
