"""The synthetic task: features recomputed from the raw text, balance, no shortcuts, seeding."""

from __future__ import annotations

import statistics

import pytest

from headlab.data import generate_synthetic
from headlab.errors import ConfigError


def _features_from_text(text: str, bigram: str = "xy") -> tuple[int, int, int]:
    """The rule as the docstring states it, recomputed independently from the characters."""
    letters, mark = text[:-1], text[-1]
    return int(bigram in letters), int(letters[0] == letters[-1]), int(mark == "!")


@pytest.fixture(scope="module")
def data():
    return generate_synthetic(n=3000, seed=7)


def test_label_is_majority_of_features_read_from_text(data):
    for i, text in enumerate(data.texts):
        a, b, c = _features_from_text(text)
        assert (data.features["bigram"][i], data.features["first_last"][i], data.features["exclaim"][i]) == (a, b, c)
        assert data.labels[i] == int(a + b + c >= 2)


def test_features_balanced_and_independent(data):
    flags = data.features
    for name, values in flags.items():
        assert statistics.mean(values) == pytest.approx(0.5, abs=0.04), name
    names = list(flags)
    for i, p in enumerate(names):
        for q in names[i + 1 :]:
            assert abs(statistics.correlation(flags[p], flags[q])) < 0.06, (p, q)
    for name, values in flags.items():  # each feature alone predicts ~75 %
        agree = statistics.mean(int(v == y) for v, y in zip(values, data.labels))
        assert agree == pytest.approx(0.75, abs=0.04), name


def test_distractors_remove_shortcuts(data):
    for text in data.texts:
        letters = text[:-1]
        assert letters.count("x") == letters.count("y") == 2  # presence and count say nothing
        assert letters.count(letters[0]) >= 3  # the first letter always recurs in the middle
        assert letters[0] in letters[1:-1]
        assert letters[-1] in letters[:-1]  # so does the last one: only its position matters
    mean_count = {  # the first letter's count has the same distribution for both values of b
        b: statistics.mean(t[:-1].count(t[0]) for t, f in zip(data.texts, data.features["first_last"]) if f == b)
        for b in (0, 1)
    }
    assert mean_count[0] == pytest.approx(mean_count[1], abs=0.1)


def test_lengths_and_alphabet(data):
    lengths = [len(t) for t in data.texts]
    assert min(lengths) == 16 and max(lengths) == 32
    assert all(t[:-1].isalpha() and t[:-1].islower() and t[-1] in "!." for t in data.texts)


def test_seeded():
    a = generate_synthetic(n=50, seed=1)
    assert a.texts == generate_synthetic(n=50, seed=1).texts
    assert a.texts != generate_synthetic(n=50, seed=2).texts


@pytest.mark.parametrize(
    "kwargs, key",
    [
        ({"n": 0}, "data.synthetic.n"),
        ({"min_len": 5}, "data.synthetic.min_len"),
        ({"min_len": 20, "max_len": 19}, "data.synthetic.max_len"),
        ({"bigram": "xx"}, "data.synthetic.bigram"),
        ({"end_letters": "a"}, "data.synthetic.end_letters"),
        ({"end_letters": "ax"}, "data.synthetic.end_letters"),
    ],
)
def test_bad_arguments(kwargs, key):
    with pytest.raises(ConfigError, match=key):
        generate_synthetic(seed=0, **kwargs)
