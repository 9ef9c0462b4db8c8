"""min_gap_steps: an epoch end a few steps after a cadence point is skipped only when asked, resume included."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from headlab.data.probe import ProbeSet
from headlab.errors import ConfigError
from headlab.lit.callbacks import HeadMetricsCallback
from headlab.model import HeadlabClassifier, ModelConfig

PER_EPOCH = 10  # optimiser steps per epoch: epoch ends at 10, 20


def _setup(tmp_path, min_gap_steps: int):
    torch.manual_seed(0)
    net = HeadlabClassifier(ModelConfig(vocab_size=12, n_classes=2, max_len=8, n_layers=1, n_heads=2, d_model=8))
    probe = ProbeSet(((1, 3, 4), (1, 5, 6, 7)), (0, 1), punctuation_ids=())
    trainer = SimpleNamespace(global_step=0, current_epoch=0, sanity_checking=False, is_global_zero=True, world_size=1, loggers=[],
                              num_training_batches=PER_EPOCH, accumulate_grad_batches=1,
                              datamodule=SimpleNamespace(probe_set=lambda: probe), default_root_dir=str(tmp_path))
    module = SimpleNamespace(net=net, device=torch.device("cpu"))
    cb = HeadMetricsCallback(every_n_steps=4, early_steps=16, log_to_loggers=False, figures=False,
                             min_gap_steps=min_gap_steps)
    cb.setup(trainer, module, "fit")
    cb.on_fit_start(trainer, module)
    return cb, trainer, module


def _train(cb, trainer, module, start: int, stop: int) -> None:
    """The hooks Lightning calls from step `start` to `stop` (batch ends, epoch ends)."""
    cb.on_train_start(trainer, module)
    for step in range(start + 1, stop + 1):
        trainer.global_step, trainer.current_epoch = step, (step - 1) // PER_EPOCH
        cb.on_train_batch_end(trainer, module, None, None, 0)
        if step % PER_EPOCH == 0:
            cb.on_train_epoch_end(trainer, module)


@pytest.mark.parametrize(("gap", "expected"), [(0, [0, 4, 8, 10, 12, 16, 20]), (3, [0, 4, 8, 12, 16, 20])])
def test_min_gap_skips_the_epoch_end_two_steps_after_a_cadence_point(tmp_path, gap, expected):
    cb, trainer, module = _setup(tmp_path, gap)
    _train(cb, trainer, module, 0, 20)
    cb.on_fit_end(trainer, module)
    assert cb.timing.steps == expected


def test_a_resume_skips_what_the_uninterrupted_run_skipped(tmp_path):
    cb, trainer, module = _setup(tmp_path / "a", 3)
    _train(cb, trainer, module, 0, 10)  # the epoch-end checkpoint at 10 is saved before its measurement
    state = {**cb.state_dict(), "measured": [0, 4, 8]}
    resumed, trainer, module = _setup(tmp_path / "b", 3)
    resumed.load_state_dict(state)
    trainer.global_step = 10
    _train(resumed, trainer, module, 10, 20)
    assert resumed.timing.steps == [12, 16, 20]


def test_fit_end_is_measured_even_right_after_a_cadence_point(tmp_path):
    cb, trainer, module = _setup(tmp_path, 3)
    _train(cb, trainer, module, 0, 5)  # max_steps=5: fit ends one step after the cadence point 4
    cb.on_fit_end(trainer, module)
    assert cb.timing.steps == [0, 4, 5]


def test_bad_min_gap_is_a_config_error():
    with pytest.raises(ConfigError, match="min_gap_steps"):
        HeadMetricsCallback(min_gap_steps=-1)
