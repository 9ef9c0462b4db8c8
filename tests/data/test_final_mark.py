"""How much the final punctuation mark says about the label, on the two tasks C15 could read.

C15 (conf/reproduce/c15_punctuation.yaml) tests heads that attend to the final mark *because* it
is discriminative. Its spec states these facts about the data; the tests recompute them from the
encoded splits the models train on (scipy's chi-square test and Cramer's V, not a formula of ours).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chi2_contingency
from scipy.stats.contingency import association

from headlab.data import SyntheticDataModule, ZhReviewsDataModule, is_punctuation


def _last_tokens(dm) -> tuple[list[str], np.ndarray]:
    data = dm._data()
    tokens = data.tokenizer.tokens
    split = data.splits["train"]
    return [tokens[ids[-1]] for ids in split.input_ids], np.asarray(split.labels)


def _table(marks: np.ndarray, labels: np.ndarray) -> np.ndarray:
    return np.array([[np.sum(marks & (labels == y)), np.sum(~marks & (labels == y))] for y in (0, 1)])


def test_the_synthetic_final_mark_is_always_the_last_token_and_predicts_the_label_3_times_in_4():
    dm = SyntheticDataModule(seed=0, max_len=40, synthetic={"n": 6000})  # conf/data/synthetic.yaml
    last, labels = _last_tokens(dm)
    assert set(last) == {"!", "."}  # every text ends in its mark: [CLS]-to-last is [CLS]-to-mark
    exclaim = np.array([t == "!" for t in last])
    agree = float(np.mean(exclaim == (labels == 1)))
    assert agree == pytest.approx(0.75, abs=0.02)
    table = _table(exclaim, labels)
    assert chi2_contingency(table).pvalue < 1e-100
    assert association(table, method="cramer") == pytest.approx(0.5, abs=0.03)


def test_on_zh_reviews_the_final_mark_is_only_weakly_tied_to_the_label():
    dm = ZhReviewsDataModule(max_len=128, min_freq=2)  # experiment=sweep_zh's data
    last, labels = _last_tokens(dm)
    marked = np.array([is_punctuation(t) for t in last])
    assert len(labels) == 13891 and np.mean(marked) == pytest.approx(0.60, abs=0.005)
    assert labels[marked].mean() == pytest.approx(0.44, abs=0.005)
    assert labels[~marked].mean() == pytest.approx(0.54, abs=0.005)
    table = _table(marked, labels)
    assert chi2_contingency(table).pvalue < 1e-30  # real, but small:
    assert association(table, method="cramer") == pytest.approx(0.10, abs=0.005)
