import random

import pytest
import torch

from headlab.analysis import (
    ROLE_METRICS,
    ROLES,
    RoleThresholds,
    attention_metrics,
    classify_roles,
    PositionAccumulator,
    role_ids,
)
from headlab.errors import ConfigError, DataError

from ._patterns import (
    back_offset,
    cls_staring,
    first_content,
    identity,
    last_staring,
    near_uniform,
    one_target,
    pad_positions,
    padded_batch,
    previous_token,
    window,
)

def next_token(n):
    """Each query attends to the next token; the last query (no next token) to itself."""
    return one_target((torch.arange(n) + 1).clamp_max(n - 1))


def keyword(n):
    """Every query attends to one content position that depends on the sequence, not on position:
    a token picked by identity (here: drawn with the length as seed; the test lengths all differ)."""
    target = random.Random(101 * n).randrange(2, n - 1)
    return one_target(torch.full((n,), target, dtype=torch.long))


def punctuation_staring(n):
    """Every query attends to a mid-sequence punctuation mark (position n // 2, marked in the tests)."""
    return one_target(torch.full((n,), n // 2, dtype=torch.long))


PLANTED = {
    "previous_token": previous_token,
    "long_range": back_offset(15),
    "sink": cls_staring,
    "broad": near_uniform,
    "local": identity,
    "next_token": next_token,
    "content": keyword,
    "vertical": punctuation_staring,
}


def _mixture(n):
    """0.35 previous token + 0.35 first content token + 0.3 near-uniform: no single role."""
    return 0.35 * previous_token(n) + 0.35 * first_content(n) + 0.3 * near_uniform(n)


def _layer_roles(builders, lengths, pad_to, thresholds=RoleThresholds()):
    """Roles of a layer whose heads are `builders`, measured on sequences of `lengths` (padded),
    with the position evidence `measure_probe` gives the rule."""
    maps = [[build(n) for build in builders] for n in lengths]
    pattern, mask = padded_batch(maps, pad_to)
    cls = pad_positions([[j == 0 for j in range(n)] for n in lengths], pad_to)
    punct = pad_positions([[j in (n // 2, n - 1) for j in range(n)] for n in lengths], pad_to)
    metrics = attention_metrics(pattern, mask, cls_mask=cls, punct_mask=punct)
    return classify_roles(metrics, thresholds, position=_position(pattern, mask))


def _position(pattern, mask):
    acc = PositionAccumulator()
    acc.update(pattern, mask)
    return acc.compute()


@pytest.mark.parametrize("lengths", [(40, 52, 45, 61, 37, 49), (64, 70, 66, 75, 81, 68), (100, 128, 111, 97, 105, 113),
                                     (40, 100, 60, 45, 90, 77, 83, 67)])
def test_planted_roles_are_recovered(lengths):
    assert _layer_roles(list(PLANTED.values()), lengths, pad_to=max(lengths) + 3) == list(PLANTED)


@pytest.mark.parametrize("lengths", [(12, 20, 16), (40, 64), (128,)])
@pytest.mark.parametrize(
    "builder, role",
    [
        (first_content, "long_range"),
        (last_staring, "sink"),
        (window(2), "local"),
        (previous_token, "previous_token"),
        (identity, "local"),
        (near_uniform, "broad"),
        (cls_staring, "sink"),
        (next_token, "next_token"),
        (_mixture, "mixed"),
    ],
)
def test_constructed_patterns_at_many_lengths(builder, role, lengths):
    assert _layer_roles([builder], lengths, pad_to=max(lengths)) == [role]


def test_thresholds_are_used():
    pattern, mask = padded_batch([[_mixture(30)]], pad_to=30)
    metrics = attention_metrics(pattern, mask)
    position = _position(pattern, mask)
    assert classify_roles(metrics, position=position) == ["mixed"]
    assert classify_roles(metrics, RoleThresholds(previous_token_score=0.3), position) == ["previous_token"]
    # 0.35 of it on the previous token and 0.35 on the first token: position-dependent at 0.25, not at 0.5
    assert classify_roles(metrics, RoleThresholds(focused_confidence=0.3), position) == ["long_range"]
    assert classify_roles(metrics, RoleThresholds(focused_confidence=0.3, position_mass=0.5), position) == ["content"]


def test_content_heads_land_far_but_are_not_long_range():
    """The control: focused, far attention whose target moves with the sequence is `content`; the same
    metrics with a fixed target (one absolute position) are `long_range`."""
    lengths = (40, 52, 45, 61, 37, 49, 58, 43)
    roles = _layer_roles([keyword, first_content], lengths, pad_to=64)
    assert roles == ["content", "long_range"]
    # without the position evidence no head is long-range: the far, focused one reads as content
    pattern, mask = padded_batch([[first_content(n)] for n in lengths], pad_to=64)
    assert classify_roles(attention_metrics(pattern, mask)) == ["content"]


@pytest.mark.parametrize("builder, name", [(back_offset(3), "offset_mass"), (first_content, "start_mass"),
                                           (lambda n: one_target(torch.full((n,), n - 2, dtype=torch.long)), "end_mass")])
def test_position_masses_on_hand_built_patterns(builder, name):
    """One offset, one position from the start, one from the end: each ~1 in its own family."""
    lengths = (20, 27, 33)
    pattern, mask = padded_batch([[builder(n)] for n in lengths], pad_to=36)
    out = _position(pattern, mask)
    assert out[name].item() > 0.8 and out["position_mass"].item() == out[name].item()


def test_position_masses_skip_sinks_and_spread_attention():
    lengths = (20, 27, 33)
    for builder in (cls_staring, last_staring, identity, near_uniform):
        pattern, mask = padded_batch([[builder(n)] for n in lengths], pad_to=36)
        assert _position(pattern, mask)["position_mass"].item() < 0.2, builder
    # neighbour offsets are the previous/next rules' business, not position evidence for long_range
    pattern, mask = padded_batch([[previous_token(n)] for n in lengths], pad_to=36)
    assert _position(pattern, mask)["offset_mass"].item() < 0.2


def test_nan_metrics_fall_back_to_mixed():
    nan = torch.tensor([float("nan")])
    metrics = {k: nan for k in ROLE_METRICS}
    assert classify_roles(metrics) == ["mixed"]


def test_missing_or_ragged_metrics_raise():
    metrics = attention_metrics(*padded_batch([[identity(5), identity(5)]], pad_to=5))
    with pytest.raises(DataError, match="special_attention"):
        classify_roles({k: v for k, v in metrics.items() if k != "special_attention"})
    with pytest.raises(DataError, match="one head count"):
        classify_roles({**metrics, "prev_score": torch.zeros(3)})


def test_role_ids():
    assert role_ids(list(ROLES)).tolist() == list(range(len(ROLES)))
    # tables store the index: names are only ever appended (sink/next/content, then the LM's induction/duplicate)
    assert ROLES[:9] == ("previous_token", "local", "long_range", "broad", "vertical", "mixed", "next_token", "sink",
                         "content")
    assert role_ids(["vertical", "previous_token"]).dtype == torch.long
    with pytest.raises(ConfigError, match="role"):
        role_ids(["copying"])
