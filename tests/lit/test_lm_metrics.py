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


def test_no_icl_jump_without_a_formed_head_or_with_a_score_that_stays_positive():
    """Issue 35: an 'icl_jump_step' was reported on a run whose ICL score stayed positive and where no
    induction head formed; both cases now leave the ICL fields empty (the loss drop stays: ordinary learning)."""
    unformed = _planted(onset=10_000, loss_drop=550).phase_change()
    assert unformed["icl_jump_step"] is None and unformed["icl_jump_midpoint_step"] is None
    assert unformed["loss_drop_step"] == 550 and unformed["onsets_coincide_with_loss_drop"] is None
    positive = _planted(onset=500, loss_drop=550)
    for entry in positive.history:
        entry["icl_score"] += 5.0  # falls from 5 to 2 nats: never below 0
    assert positive.phase_change()["icl_jump_step"] is None


def test_far_apart_onset_does_not_coincide():
    assert _planted(onset=200, loss_drop=800).phase_change()["onsets_coincide_with_loss_drop"] is False


def test_bad_cadence_is_one_error():
    with pytest.raises(ConfigError, match="every_n_steps"):
        LMHeadMetricsCallback(every_n_steps=0)
    with pytest.raises(ConfigError, match=r"standard_probe_size=-1: expected an integer >= 0 \(0: off\)"):
        LMHeadMetricsCallback(standard_probe_size=-1)


def test_onset_is_the_start_of_a_sigmoid_rise_and_its_midpoint_is_kept_beside():
    import numpy as np

    callback = LMHeadMetricsCallback(every_n_steps=50)
    for step in range(0, 3001, 50):  # logistic rise starting (1 % point) at 1,000, midpoint 1,300
        score = 0.03 + 0.6 / (1 + np.exp(-(step - 1300) / 65))
        loss = 4.0 - 2.5 / (1 + np.exp(-(step - 1300) / 65))
        callback.history.append({"step": step, "probe_loss": loss, "icl_score": loss - 4.0,
                                 "induction": [[0.03, 0.03], [score, 0.03]]})
    facts = callback.phase_change()
    assert 1000 <= facts["induction_onset_steps"]["L1H0"] <= 1050
    assert abs(facts["induction_midpoint_steps"]["L1H0"] - 1300) <= 50  # the old dating: 300 steps later
    assert 1000 <= facts["loss_drop_step"] <= 1050  # the same start, on the loss's own (nat) floor
    gap = abs(facts["loss_drop_step"] - facts["induction_onset_steps"]["L1H0"])
    assert facts["onset_loss_drop_gap"] == gap and facts["onset_loss_drop_p"] < 0.06  # <= 3 of 55 candidate steps


def test_dense_window_measures_finer_only_inside_it():
    callback = LMHeadMetricsCallback(every_n_steps=100, dense_every_n_steps=20, dense_from=1000, dense_to=1600)
    due = [step for step in range(0, 2001, 10) if callback.due(step)]
    assert due == [*range(0, 1000, 100), *range(1000, 1601, 20), *range(1700, 2001, 100)]
    assert [s for s in range(0, 500, 10) if LMHeadMetricsCallback(every_n_steps=100).due(s)] == [0, 100, 200, 300, 400]


def test_bad_dense_window_is_one_error():
    with pytest.raises(ConfigError, match=r"dense_every_n_steps=100: expected an integer from 1 to every_n_steps - 1 \(99\)"):
        LMHeadMetricsCallback(every_n_steps=100, dense_every_n_steps=100, dense_from=0, dense_to=10)
    with pytest.raises(ConfigError, match="dense_from/dense_to='900/800'"):
        LMHeadMetricsCallback(every_n_steps=100, dense_every_n_steps=10, dense_from=900, dense_to=800)
