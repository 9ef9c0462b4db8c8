"""`data=en_polarity`: the English source added as any source is (a loader, a class, a conf file)."""

from __future__ import annotations

import pytest

pytest.importorskip("gensim")

from headlab.config.app import compose_train  # noqa: E402
from headlab.tasks.train_config import validate_config  # noqa: E402
from headlab.data.datamodule import EnPolarityDataModule  # noqa: E402
from headlab.reload.inputs import build_datamodule  # noqa: E402


def test_the_shipped_config_builds_a_stratified_word_level_split():
    cfg = compose_train(["data=en_polarity"])
    validate_config(cfg)
    dm = build_datamodule(cfg)
    assert isinstance(dm, EnPolarityDataModule)
    summary = dm.stats
    assert (summary["n_train"], summary["n_val"], summary["n_test"]) == (120, 40, 40)  # 200 x (0.6, 0.2, 0.2)
    assert summary["label_names"] == ["neg", "pos"] and summary["tokenizer"] == "word"
    assert summary["truncated_train"] == 0  # max_len 64 holds the longest sentence (51 tokens + [CLS])
    labels = dm._data().splits["val"].labels
    assert labels.count(0) == labels.count(1) == 20  # stratified
    assert "movie" in dm.tokenizer.tokens or "film" in dm.tokenizer.tokens  # words, not characters
