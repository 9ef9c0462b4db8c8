"""Task-aware roles on hand-built attention whose decision-row behaviour is planted (the answer is known)."""

from __future__ import annotations

import random

import pytest
import torch

from headlab.analysis import PositionAccumulator, attention_metrics, classify_roles
from headlab.analysis.position import position_sums
from headlab.analysis.task_roles import classify_task_roles, decision_query_mask
from headlab.errors import ConfigError, DataError

from ._patterns import one_target, pad_positions, padded_batch

LENGTHS = (40, 52, 45, 61, 37, 49, 58, 43)


def _keyword_target(n: int, salt: int) -> int:
    """A content position that moves with the sentence (a keyword anywhere), never [CLS] nor the last token."""
    return random.Random(1000 * salt + n).randrange(2, n - 2)


def _content_rows(n: int) -> torch.Tensor:
    """Every query reads a token chosen by identity: an all-query `content` head."""
    return one_target(torch.tensor([_keyword_target(n, i) for i in range(n)]))


def with_row(row_of: int | str, target, mass: float = 0.9):
    """A content head whose decision row (`row_of`: 0 = [CLS], "last") is replaced: `mass` on `target(n)`,
    the rest spread evenly over the other real keys."""

    def build(n: int) -> torch.Tensor:
        pattern = _content_rows(n)
        row = torch.full((n,), (1.0 - mass) / (n - 1), dtype=torch.float64)
        row[target(n)] = mass
        pattern[n - 1 if row_of == "last" else row_of] = row
        return pattern

    return build


def _uniform_row(n: int) -> torch.Tensor:
    pattern = _content_rows(n)
    pattern[0] = 1.0 / n
    return pattern


CLS_PLANTED = {  # what the [CLS] row of each head does -> its task role under cls pooling
    "vertical": with_row(0, lambda n: n - 1),  # reads the last token (the label of "label = last word")
    "next_token": with_row(0, lambda n: 1),  # reads the first word
    "content": with_row(0, lambda n: _keyword_target(n, 99)),  # reads a keyword wherever it is
    "long_range": with_row(0, lambda n: n - 4),  # reads one fixed place, 3 before the end
    "sink": with_row(0, lambda n: 0),  # [CLS] keeps its own embedding
    "broad": _uniform_row,  # [CLS] averages the sentence
}


def _measure(builders, decision, lengths=LENGTHS):
    maps = [[build(n) for build in builders] for n in lengths]
    pattern, mask = padded_batch(maps, pad_to=max(lengths) + 2)
    cls = pad_positions([[j == 0 for j in range(n)] for n in lengths], pattern.shape[-1])
    punct = pad_positions([[j == n // 2 for j in range(n)] for n in lengths], pattern.shape[-1])
    queries = decision_query_mask(mask, decision)
    everywhere, position = PositionAccumulator(), PositionAccumulator()
    everywhere.update(pattern, mask)
    position.update(pattern, mask, queries)
    all_query = classify_roles(attention_metrics(pattern, mask, cls, punct), position=everywhere.compute())
    task = classify_task_roles(attention_metrics(pattern, mask, cls, punct, query_mask=queries), decision,
                               position=position.compute())
    return all_query, task


def test_cls_rows_planted_on_content_heads_give_their_task_roles():
    all_query, task = _measure(list(CLS_PLANTED.values()), "cls")
    assert task == list(CLS_PLANTED)
    assert all_query == ["content"] * len(CLS_PLANTED)  # one row in ~50: the all-query rule cannot see it


def test_a_cls_row_reading_less_than_half_on_the_last_token_is_still_placed():
    """The issue's L0H1: 0.48 from [CLS] on the last token, the rest spread; too little for `vertical`."""

    assert _measure([with_row(0, lambda n: n - 1, mass=0.48)], "cls") == (["content"], ["long_range"])


def test_mean_pooling_reads_every_row_and_differs_from_the_all_query_rule_only_at_the_last_token():
    last = lambda n: one_target(torch.full((n,), n - 1, dtype=torch.long))  # noqa: E731
    cls = lambda n: one_target(torch.zeros(n, dtype=torch.long))  # noqa: E731
    prev = lambda n: one_target((torch.arange(n) - 1).clamp_min(0))  # noqa: E731
    all_query, task = _measure([_content_rows, last, cls, prev], "mean")
    assert all_query == ["content", "sink", "sink", "previous_token"]
    assert task == ["content", "vertical", "sink", "previous_token"]


LAST_PLANTED = {  # what an LM's last row does -> its task role for the next token
    "local": with_row("last", lambda n: n - 1, mass=1.0),  # itself: its own token is no place it reads
    "previous_token": with_row("last", lambda n: n - 2),
    "long_range": with_row("last", lambda n: n - 12),  # one fixed place, 11 back
    "content": with_row("last", lambda n: _keyword_target(n, 7)),
}


def test_last_rows_give_the_next_token_roles():
    _, task = _measure(list(LAST_PLANTED.values()), "last")
    assert task == list(LAST_PLANTED)


def test_decision_query_mask_by_hand_and_bad_input():
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]], dtype=torch.bool)
    assert decision_query_mask(mask, "cls").int().tolist() == [[1, 0, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0]]
    assert decision_query_mask(mask, "mean").equal(mask)
    assert decision_query_mask(mask, "last").int().tolist() == [[0, 0, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]]
    with pytest.raises(ConfigError, match="pool"):
        decision_query_mask(mask, "max")
    with pytest.raises(ConfigError, match="'cls', 'mean', 'last'"):
        classify_task_roles({}, "first")
    with pytest.raises(DataError, match="punct_attention"):
        classify_task_roles({"entropy_norm": torch.zeros(1)}, "cls")


def test_position_evidence_from_chosen_queries_matches_the_rows_alone():
    """Queries outside the mask change nothing; by hand: the [CLS] rows put all mass 3 before the end."""
    lengths = (20, 27, 33)
    maps = [[with_row(0, lambda n: n - 4)(n)] for n in lengths]
    pattern, mask = padded_batch(maps, pad_to=36)
    queries = decision_query_mask(mask, "cls")
    scrambled = pattern.clone()
    scrambled[:, :, 1:] = scrambled[:, :, 1:].flip(-1)  # other rows changed, [CLS] rows kept
    a = position_sums(pattern, mask, query_mask=queries).position_mass()
    b = position_sums(scrambled, mask, query_mask=queries).position_mass()
    assert torch.equal(a["position_mass"], b["position_mass"])
    assert a["end_mass"].item() == pytest.approx(0.9)  # every [CLS] row: 0.9 at e = 3
    everything = position_sums(pattern, mask, query_mask=mask.clone()).position_mass()
    assert torch.equal(everything["position_mass"], position_sums(pattern, mask).position_mass()["position_mass"])
