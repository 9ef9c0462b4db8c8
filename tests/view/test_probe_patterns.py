"""The token view's storage: the head-metrics callback keeps every head's maps of the first probe
sentences at each measurement (probe_patterns/), drops them on resume like its tables, and writes
view.html at fit end; both switch off with one key."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from headlab.data.probe import ProbeSet
from headlab.errors import ConfigError
from headlab.lit.callbacks import HeadMetricsCallback
from headlab.model import HeadlabClassifier, ModelConfig
from headlab.store import RunDir
from headlab.store.probe_patterns import read_pattern_parts

VOCAB = ["[PAD]", "[CLS]", "[UNK]", "好", "书", "。", "不", "看"]
PROBE = ProbeSet(((1, 3, 4, 5), (1, 6, 7), (1, 3, 3, 4, 5, 6)), (0, 1, 0), punctuation_ids=(5,))


def _setup(tmp_path, **kwargs):
    torch.manual_seed(0)
    net = HeadlabClassifier(ModelConfig(vocab_size=len(VOCAB), n_classes=2, max_len=8, n_layers=2, n_heads=2, d_model=8))
    trainer = SimpleNamespace(global_step=0, current_epoch=0, sanity_checking=False, is_global_zero=True, world_size=1,
                              loggers=[], num_training_batches=10, accumulate_grad_batches=1, default_root_dir=str(tmp_path),
                              datamodule=SimpleNamespace(probe_set=lambda: PROBE, tokenizer=SimpleNamespace(tokens=VOCAB)))
    module = SimpleNamespace(net=net, device=torch.device("cpu"))
    cb = HeadMetricsCallback(every_n_steps=2, early_steps=4, log_to_loggers=False, figures=False, **kwargs)
    cb.setup(trainer, module, "fit")
    cb.on_fit_start(trainer, module)
    return cb, trainer, module


def _train(cb, trainer, module, stop: int) -> None:
    cb.on_train_start(trainer, module)
    for step in range(trainer.global_step + 1, stop + 1):
        trainer.global_step = step
        cb.on_train_batch_end(trainer, module, None, None, 0)


def test_each_measurement_stores_the_first_sentences_maps_as_the_full_forward_computes_them(tmp_path):
    cb, trainer, module = _setup(tmp_path, probe_patterns=2, probe_pattern_len=3)
    _train(cb, trainer, module, 4)
    parts = read_pattern_parts(RunDir(tmp_path).probe_patterns_dir)
    assert [int(p["step"]) for p in parts] == [0, 2, 4]
    part = parts[0]
    assert part["patterns"].dtype == np.float16 and part["patterns"].shape == (2, 2, 2, 3, 3)
    assert part["lengths"].tolist() == [3, 3] and part["tokens"].tolist() == [["[CLS]", "好", "书"], ["[CLS]", "不", "看"]]
    ids, mask = torch.tensor([[1, 3, 4], [1, 6, 7]]), torch.ones(2, 3, dtype=torch.bool)  # cut to 3 positions
    with torch.no_grad():
        want = torch.stack(module.net.eval()(ids, mask, return_patterns=True).patterns).transpose(1, 2).numpy()
    np.testing.assert_allclose(part["patterns"].astype(float), want, atol=1e-3)
    np.testing.assert_allclose(part["patterns"].astype(float).sum(-1), 1.0, atol=3e-3)  # rows over the kept keys
    assert part["mean_pattern"].shape[:2] == (2, 2)


def test_a_shorter_sentence_is_zero_past_its_length(tmp_path):
    cb, trainer, module = _setup(tmp_path, probe_patterns=2)
    _train(cb, trainer, module, 0)
    part = read_pattern_parts(RunDir(tmp_path).probe_patterns_dir)[0]
    assert part["lengths"].tolist() == [4, 3] and part["patterns"].shape[-1] == 4
    assert not part["patterns"][:, :, 1, 3, :].any() and not part["patterns"][:, :, 1, :, 3].any()
    assert part["tokens"][1].tolist() == ["[CLS]", "不", "看", ""]


def test_a_resume_drops_the_files_after_its_checkpoint(tmp_path):
    cb, trainer, module = _setup(tmp_path)
    _train(cb, trainer, module, 4)
    resumed, trainer, module = _setup(tmp_path)
    resumed.load_state_dict({**cb.state_dict(), "measured": [0, 2]})
    trainer.global_step = 2
    resumed.on_train_start(trainer, module)
    assert [int(p["step"]) for p in read_pattern_parts(RunDir(tmp_path).probe_patterns_dir)] == [0, 2]


def test_fit_end_writes_the_view_and_each_key_switches_its_part_off(tmp_path):
    cb, trainer, module = _setup(tmp_path / "on")
    _train(cb, trainer, module, 2)
    cb.on_fit_end(trainer, module)
    assert RunDir(tmp_path / "on").view_path.is_file()
    off, trainer, module = _setup(tmp_path / "off", probe_patterns=0, view=False)
    _train(off, trainer, module, 2)
    off.on_fit_end(trainer, module)
    assert not RunDir(tmp_path / "off").probe_patterns_dir.exists() and not RunDir(tmp_path / "off").view_path.exists()


@pytest.mark.parametrize(("key", "value"), [("probe_patterns", -1), ("probe_pattern_len", 1), ("view", "yes")])
def test_a_bad_setting_is_one_config_error_naming_it(key, value):
    with pytest.raises(ConfigError, match=f"callbacks.head_metrics.{key}"):
        HeadMetricsCallback(**{key: value})
