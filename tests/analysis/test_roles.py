import pytest
import torch

from headlab.analysis import (
    REQUIRED_METRICS,
    ROLES,
    RoleThresholds,
    attention_metrics,
    classify_roles,
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
    pad_positions,
    padded_batch,
    previous_token,
    window,
)

PLANTED = {
    "previous_token": previous_token,
    "long_range": back_offset(15),
    "vertical": cls_staring,
    "broad": near_uniform,
    "local": identity,
}


def _mixture(n):
    """0.35 previous token + 0.35 first content token + 0.3 near-uniform: no single role."""
    return 0.35 * previous_token(n) + 0.35 * first_content(n) + 0.3 * near_uniform(n)


def _layer_roles(builders, lengths, pad_to):
    """Roles of a layer whose heads are `builders`, measured on sequences of `lengths` (padded)."""
    maps = [[build(n) for build in builders] for n in lengths]
    pattern, mask = padded_batch(maps, pad_to)
    cls = pad_positions([[j == 0 for j in range(n)] for n in lengths], pad_to)
    punct = pad_positions([[j == n - 1 for j in range(n)] for n in lengths], pad_to)
    return classify_roles(attention_metrics(pattern, mask, cls_mask=cls, punct_mask=punct))


@pytest.mark.parametrize("lengths", [(40, 52, 45), (64, 70), (100, 128), (40, 128, 60)])
def test_planted_roles_are_recovered(lengths):
    assert _layer_roles(list(PLANTED.values()), lengths, pad_to=max(lengths) + 3) == list(PLANTED)


@pytest.mark.parametrize("lengths", [(12, 20, 16), (40, 64), (128,)])
@pytest.mark.parametrize(
    "builder, role",
    [
        (first_content, "long_range"),
        (last_staring, "vertical"),
        (window(2), "local"),
        (previous_token, "previous_token"),
        (identity, "local"),
        (near_uniform, "broad"),
        (cls_staring, "vertical"),
        (_mixture, "mixed"),
    ],
)
def test_constructed_patterns_at_many_lengths(builder, role, lengths):
    assert _layer_roles([builder], lengths, pad_to=max(lengths)) == [role]


def test_thresholds_are_used():
    metrics = attention_metrics(*padded_batch([[_mixture(30)]], pad_to=30))
    assert classify_roles(metrics) == ["mixed"]
    assert classify_roles(metrics, RoleThresholds(previous_token_score=0.3)) == ["previous_token"]
    assert classify_roles(metrics, RoleThresholds(focused_confidence=0.3)) == ["long_range"]


def test_nan_metrics_fall_back_to_mixed():
    nan = torch.tensor([float("nan")])
    metrics = {k: nan for k in REQUIRED_METRICS}
    assert classify_roles(metrics) == ["mixed"]


def test_missing_or_ragged_metrics_raise():
    metrics = attention_metrics(*padded_batch([[identity(5), identity(5)]], pad_to=5))
    with pytest.raises(DataError, match="special_attention"):
        classify_roles({k: v for k, v in metrics.items() if k != "special_attention"})
    with pytest.raises(DataError, match="one head count"):
        classify_roles({**metrics, "prev_score": torch.zeros(3)})


def test_role_ids():
    assert role_ids(list(ROLES)).tolist() == list(range(len(ROLES)))
    assert role_ids(["vertical", "previous_token"]).dtype == torch.long
    with pytest.raises(ConfigError, match="role"):
        role_ids(["induction"])
