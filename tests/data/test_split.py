"""stratified_split: class shares kept per split, disjoint, complete, seeded."""

from __future__ import annotations

from collections import Counter

import pytest

from headlab.data import stratified_split
from headlab.errors import ConfigError

LABELS = [0] * 300 + [1] * 200 + [2] * 100
LABELS = LABELS[::2] + LABELS[1::2]  # interleave so class order differs from index order


def test_counts_per_class_are_rounded_fractions():
    split = stratified_split(LABELS, val_fraction=0.2, test_fraction=0.1, seed=0)
    val = Counter(LABELS[i] for i in split.val)
    test = Counter(LABELS[i] for i in split.test)
    train = Counter(LABELS[i] for i in split.train)
    assert val == {0: 60, 1: 40, 2: 20}
    assert test == {0: 30, 1: 20, 2: 10}
    assert train == {0: 210, 1: 140, 2: 70}


def test_ratios_preserved_with_uneven_sizes():
    labels = [0] * 997 + [1] * 203
    split = stratified_split(labels, 0.15, 0.15, seed=3)
    for part in (split.train, split.val, split.test):
        share = sum(labels[i] for i in part) / len(part)
        assert share == pytest.approx(203 / 1200, abs=0.01)


def test_disjoint_and_complete():
    split = stratified_split(LABELS, 0.1, 0.25, seed=1)
    parts = [set(split.train), set(split.val), set(split.test)]
    assert sum(map(len, parts)) == len(LABELS)
    assert set().union(*parts) == set(range(len(LABELS)))


def test_every_prefix_of_a_split_mixes_classes():
    labels = [0] * 500 + [1] * 500  # listed class by class, as zh_reviews is
    split = stratified_split(labels, 0.1, 0.1, seed=0)
    for part in (split.train, split.val, split.test):
        first = [labels[i] for i in part[:20]]
        assert 0 < sum(first) < 20


def test_seeded():
    a = stratified_split(LABELS, 0.1, 0.1, seed=5)
    assert a == stratified_split(LABELS, 0.1, 0.1, seed=5)
    b = stratified_split(LABELS, 0.1, 0.1, seed=6)
    assert a.val != b.val and a.test != b.test


@pytest.mark.parametrize(
    "val, test, key", [(-0.1, 0.1, "data.val_fraction"), (0.1, 1.0, "data.test_fraction"), (0.6, 0.4, "data.val_fraction")]
)
def test_bad_fractions(val, test, key):
    with pytest.raises(ConfigError, match=key):
        stratified_split(LABELS, val, test, seed=0)
