"""The low-label subset (`data.train_labels`): exactly n rows, each class its share, seeded, fixed."""

from __future__ import annotations

from collections import Counter

import pytest

from headlab.data.split import stratified_subset
from headlab.errors import ConfigError

LABELS = [0] * 700 + [1] * 200 + [2] * 100  # 70 / 20 / 10 %


def test_subset_keeps_each_class_share_and_size():
    chosen = stratified_subset(LABELS, 50, seed=0)
    assert len(chosen) == len(set(chosen)) == 50
    assert Counter(LABELS[i] for i in chosen) == {0: 35, 1: 10, 2: 5}


def test_largest_remainders_fill_an_uneven_n():
    chosen = stratified_subset(LABELS, 7, seed=0)  # exact shares 4.9 / 1.4 / 0.7: floors 4, 1, 0, then 2 (0.9), 2 (0.7)
    assert Counter(LABELS[i] for i in chosen) == {0: 5, 1: 1, 2: 1}


def test_subset_is_a_function_of_the_seed_only():
    assert stratified_subset(LABELS, 100, seed=3) == stratified_subset(LABELS, 100, seed=3)
    assert stratified_subset(LABELS, 100, seed=3) != stratified_subset(LABELS, 100, seed=4)


@pytest.mark.parametrize("n", [0, 1001, True, 2.5])
def test_n_outside_the_split_is_a_config_error(n):
    with pytest.raises(ConfigError, match=r"data.train_labels.*1\.\.1000"):
        stratified_subset(LABELS, n, seed=0)


def test_datamodule_trains_on_the_subset_with_the_whole_train_vocabulary():
    from headlab.data import TextDataModule

    whole = TextDataModule("synthetic", max_len=40, probe_size=16, synthetic={"n": 600})
    few = TextDataModule("synthetic", max_len=40, probe_size=16, synthetic={"n": 600}, train_labels=60)
    whole.setup(), few.setup()
    assert few.stats["n_train"] == 60 and whole.stats["n_train"] == 480
    assert few.tokenizer == whole.tokenizer  # the vocabulary a teacher trained on all of train shares
    assert few.stats["n_val"] == whole.stats["n_val"] and few.probe_set().digest() == whole.probe_set().digest()
    rows = {tuple(ids) for ids in whole._data().splits["train"].input_ids}
    assert all(tuple(ids) in rows for ids in few._data().splits["train"].input_ids)
    counts = Counter(few._data().splits["train"].labels)
    whole_counts = Counter(whole._data().splits["train"].labels)
    assert all(abs(counts[c] - 60 * whole_counts[c] / 480) < 1 for c in whole_counts)


def test_unlabelled_keeps_every_train_row_and_hides_the_labels_outside_the_subset():
    from headlab.data import TextDataModule
    from headlab.data.datamodule import UNLABELLED

    few = TextDataModule("synthetic", max_len=40, probe_size=16, synthetic={"n": 600}, train_labels=60)
    rest = TextDataModule("synthetic", max_len=40, probe_size=16, synthetic={"n": 600}, train_labels=60,
                          train_unlabelled=True)
    few.setup(), rest.setup()
    split = rest._data().splits["train"]
    assert rest.stats["n_train"] == 480 and rest.stats["n_train_labelled"] == 60
    labelled = [(tuple(ids), y) for ids, y in zip(split.input_ids, split.labels) if y != UNLABELLED]
    subset = few._data().splits["train"]
    assert labelled == [(tuple(ids), y) for ids, y in zip(subset.input_ids, subset.labels)]  # the same rows, in order
    with pytest.raises(ConfigError, match="data.train_unlabelled"):
        TextDataModule("synthetic", train_unlabelled=True)  # no subset: nothing would be unlabelled
