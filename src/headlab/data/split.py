"""Seeded, stratified train/val/test split: every class keeps its share in every split."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence

from headlab.errors import ConfigError


@dataclass(frozen=True)
class SplitIndices:
    """Row indices of each split, in a seeded shuffled order; disjoint, covering every row.

    Shuffled rather than ascending because sources list rows class by class (zh_reviews: all
    negatives, then all positives): an ascending val split would make `limit_val_batches` or
    a prefix of it see one class only.
    """

    train: list[int]
    val: list[int]
    test: list[int]


def check_fractions(val_fraction: float, test_fraction: float) -> None:
    """Both in [0, 1) and leaving some training data."""
    for key, value in (("data.val_fraction", val_fraction), ("data.test_fraction", test_fraction)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
            raise ConfigError(key, value, "a number in [0, 1)")
    if val_fraction + test_fraction >= 1.0:
        raise ConfigError(
            "data.val_fraction", val_fraction, f"val_fraction + test_fraction < 1 (test_fraction={test_fraction})"
        )


def stratified_split(labels: Sequence[int], val_fraction: float, test_fraction: float, seed: int) -> SplitIndices:
    """Shuffle each class with `seed`, then cut round(n_c * fraction) rows for val and for test.

    Depends only on (labels, fractions, seed), so the same data seed gives the same split in
    every run whatever the training seed is.
    """
    check_fractions(val_fraction, test_fraction)
    rng = random.Random(seed)
    by_class: dict[int, list[int]] = {}
    for index, label in enumerate(labels):
        by_class.setdefault(int(label), []).append(index)
    train: list[int] = []
    val: list[int] = []
    test: list[int] = []
    for label in sorted(by_class):
        rows = by_class[label]
        rng.shuffle(rows)
        n_val, n_test = round(len(rows) * val_fraction), round(len(rows) * test_fraction)
        val += rows[:n_val]
        test += rows[n_val : n_val + n_test]
        train += rows[n_val + n_test :]
    for rows in (train, val, test):
        rng.shuffle(rows)
    return SplitIndices(train=train, val=val, test=test)


def stratified_subset(labels: Sequence[int], n: int, seed: int, key: str = "data.train_labels") -> list[int]:
    """`n` row indices, each class keeping its share (largest remainders round), seeded and sorted.

    For a low-label regime (few labelled examples of a train split): depends only on (labels, n,
    seed), so every training seed and every variant of a comparison sees the same labelled rows.
    """
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= len(labels):
        raise ConfigError(key, n, f"an integer in 1..{len(labels)} (the train split's size)")
    by_class: dict[int, list[int]] = {}
    for index, label in enumerate(labels):
        by_class.setdefault(int(label), []).append(index)
    classes = sorted(by_class)
    exact = {c: n * len(by_class[c]) / len(labels) for c in classes}
    quota = {c: int(exact[c]) for c in classes}
    for c in sorted(classes, key=lambda c: (-(exact[c] - quota[c]), c))[: n - sum(quota.values())]:
        quota[c] += 1
    rng = random.Random(seed)
    chosen: list[int] = []
    for c in classes:
        rows = list(by_class[c])
        rng.shuffle(rows)
        chosen += rows[: quota[c]]
    return sorted(chosen)
