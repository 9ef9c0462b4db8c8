"""The synthetic task: features recomputed from the raw text, balance, no shortcuts, seeding."""

from __future__ import annotations

import statistics

import pytest

from headlab.data import generate_synthetic
from headlab.errors import ConfigError


FIRST_HALF, SECOND_HALF = set("cdefghijklm"), set("nopqrstuvwx")  # a-z less y and the end letters a, b


def _features_from_text(text: str, marker: str = "y") -> tuple[int, int, int]:
    """The rule as the docstring states it, recomputed independently from the characters."""
    letters, mark = text[:-1], text[-1]
    before = {letters[i - 1] for i, ch in enumerate(letters) if ch == marker}
    assert before <= FIRST_HALF or before <= SECOND_HALF, text  # never a mix
    return int(before <= FIRST_HALF), int(letters[0] == letters[-1]), int(mark == "!")


@pytest.fixture(scope="module")
def data():
    return generate_synthetic(n=3000, seed=7)


def test_label_is_majority_of_features_read_from_text(data):
    for i, text in enumerate(data.texts):
        a, b, c = _features_from_text(text)
        assert (data.features["previous"][i], data.features["first_last"][i], data.features["exclaim"][i]) == (a, b, c)
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
        assert letters.count("y") == 2 and letters[0] != "y" != letters[-1]  # n_markers=2 (default)
        assert "yy" not in letters  # every marker follows a letter of one half
        assert letters.count(letters[0]) == 3  # the first letter always recurs in the middle, nowhere else
        assert letters[0] in letters[1:-1]
        assert letters[-1] in letters[:-1]  # so does the last one: only its position matters
    mean_count = {  # the first letter's count has the same distribution for both values of b
        b: statistics.mean(t[:-1].count(t[0]) for t, f in zip(data.texts, data.features["first_last"]) if f == b)
        for b in (0, 1)
    }
    assert mean_count[0] == pytest.approx(mean_count[1], abs=0.1)


def test_letter_counts_say_nothing_about_the_previous_feature(data):
    """Decoys of the other half: which half dominates the text is the same whatever a is."""
    for a in (0, 1):
        texts = [t[:-1] for t, f in zip(data.texts, data.features["previous"]) if f == a]
        surplus = statistics.mean(sum(ch in FIRST_HALF for ch in t) - sum(ch in SECOND_HALF for ch in t) for t in texts)
        assert surplus == pytest.approx(0.0, abs=0.3), (a, surplus)


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
        ({"marker": "yy"}, "data.synthetic.marker"),
        ({"marker": "!"}, "data.synthetic.marker"),
        ({"n_markers": 0}, "data.synthetic.n_markers"),
        ({"n_markers": 4}, "data.synthetic.min_len"),
        ({"end_letters": "ay"}, "data.synthetic.end_letters"),
        ({"letters": "abcdey"}, "data.synthetic.letters"),
        ({"end_letters": "a"}, "data.synthetic.end_letters"),
        ({"end_letters": "a1"}, "data.synthetic.end_letters"),
    ],
)
def test_bad_arguments(kwargs, key):
    with pytest.raises(ConfigError, match=key):
        generate_synthetic(seed=0, **kwargs)
