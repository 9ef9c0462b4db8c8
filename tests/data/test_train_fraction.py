"""data.train_fraction: a stratified, seeded share of the train split; val and test untouched."""

from __future__ import annotations

from collections import Counter

import pytest

from headlab.data import TextDataModule
from headlab.errors import ConfigError


def _dm(fraction, seed=0):
    dm = TextDataModule("synthetic", max_len=40, synthetic={"n": 1000}, probe_size=16, seed=seed, train_fraction=fraction)
    dm.setup()
    return dm


def test_share_is_stratified_seeded_and_leaves_val_test_alone():
    full, part = _dm(1.0), _dm(0.2)
    full_train, part_train = (Counter(dm._data().splits["train"].labels) for dm in (full, part))
    assert sum(part_train.values()) == pytest.approx(0.2 * sum(full_train.values()), abs=2)
    for label, n in full_train.items():
        assert part_train[label] == pytest.approx(0.2 * n, abs=1)  # every class keeps its share
    for split in ("val", "test"):
        assert full._data().splits[split].labels == part._data().splits[split].labels
    assert _dm(0.2)._data().splits["train"].input_ids == part._data().splits["train"].input_ids
    assert _dm(0.2, seed=1)._data().splits["train"].labels != part._data().splits["train"].labels


@pytest.mark.parametrize("bad", [0, 0.0, 1.5, -0.1, True, "half"])
def test_bad_fraction_is_a_config_error(bad):
    with pytest.raises(ConfigError, match="data.train_fraction"):
        TextDataModule("synthetic", train_fraction=bad)
