"""Name each head's role from its attention metrics with a fixed, ordered rule.

The rule reads the per-head metrics of `attention_metrics` (means over probe queries) and takes
the first role whose test passes:

1. ``broad``: ``entropy_norm >= broad_entropy_norm``.
2. ``vertical``: ``special_attention >= vertical_mass`` (mass on [CLS] | punctuation | last
   token; a union, so a final punctuation mark that is also the last token counts once).
3. ``previous_token``: ``prev_score >= previous_token_score``.
4. ``long_range``: ``confidence >= focused_confidence`` and (``distance_norm >=
   long_range_distance_norm`` or ``mean_distance >= long_range_distance``).
5. ``local``: ``mean_distance <= local_distance``.
6. ``mixed``: anything else, including heads whose metrics are NaN.

Broad comes first because on very short sequences uniform attention also puts much mass on
[CLS] and the last token; vertical comes before long-range because a [CLS]-staring head is
also focused and far. Long-range comes before local so that a head that reaches a fixed
far offset is not called local on long sequences, where even 15 tokens is small next to the
uniform expected distance (about n/3).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from headlab.errors import ConfigError, DataError

ROLES: tuple[str, ...] = ("previous_token", "local", "long_range", "broad", "vertical", "mixed")

REQUIRED_METRICS: tuple[str, ...] = (
    "entropy_norm",
    "special_attention",
    "prev_score",
    "confidence",
    "distance_norm",
    "mean_distance",
)


@dataclass(frozen=True)
class RoleThresholds:
    """Thresholds of the role rule (see the module docstring for the order).

    - broad_entropy_norm = 0.85: uniform attention over a fraction f of n keys has entropy_norm
      1 + log f / log n; at n = 32, 0.85 means spreading evenly over more than half the keys.
    - vertical_mass = 0.5: most of the mass on a handful of special positions; uniform
      attention puts only (2 + #punct) / n there.
    - previous_token_score = 0.4: the previous key gets 0.4 on average, 10x uniform at n = 25 and
      twice what a +-2 local window gives it (0.2), yet a head that splits prev/self still counts.
    - focused_confidence = 0.4: the typical query puts >= 40% on one key, so it targets a
      position rather than spreading (a planted long-range head has ~1; a mixture of several
      targets plus background stays below).
    - long_range_distance_norm = 0.6: at least 60% as far as uniform attention on the same keys.
    - long_range_distance = 8.0 tokens: on long sequences a fixed far offset (15 back at
      n = 128 has distance_norm 0.35) is still long-range in absolute terms.
    - local_distance = 2.0 tokens: expected distance of at most two positions (self, previous,
      next and +-2 windows are ~0-1.2), independent of sequence length.
    """

    broad_entropy_norm: float = 0.85
    vertical_mass: float = 0.5
    previous_token_score: float = 0.4
    focused_confidence: float = 0.4
    long_range_distance_norm: float = 0.6
    long_range_distance: float = 8.0
    local_distance: float = 2.0


def classify_roles(metrics: dict[str, Tensor], thresholds: RoleThresholds = RoleThresholds()) -> list[str]:
    """One role name (from `ROLES`) per head, from `metrics {name: [head]}` of `attention_metrics`.

    >>> m = {"entropy_norm": torch.tensor([0.0, 0.95]), "special_attention": torch.tensor([0.05, 0.1]),
    ...      "prev_score": torch.tensor([1.0, 0.05]), "confidence": torch.tensor([1.0, 0.06]),
    ...      "distance_norm": torch.tensor([0.1, 1.0]), "mean_distance": torch.tensor([1.0, 9.0])}
    >>> classify_roles(m)
    ['previous_token', 'broad']
    """
    values = _checked(metrics)
    t = thresholds
    far = (values["distance_norm"] >= t.long_range_distance_norm) | (
        values["mean_distance"] >= t.long_range_distance
    )
    rules = (
        ("broad", values["entropy_norm"] >= t.broad_entropy_norm),
        ("vertical", values["special_attention"] >= t.vertical_mass),
        ("previous_token", values["prev_score"] >= t.previous_token_score),
        ("long_range", (values["confidence"] >= t.focused_confidence) & far),
        ("local", values["mean_distance"] <= t.local_distance),
    )
    n_heads = values["confidence"].shape[0]
    return [next((role for role, passed in rules if passed[h]), "mixed") for h in range(n_heads)]


def role_ids(roles: list[str]) -> Tensor:
    """`[head]` long ids (index in `ROLES`), e.g. for plotting or counting roles.

    >>> role_ids(["local", "mixed"]).tolist()
    [1, 5]
    """
    unknown = [r for r in roles if r not in ROLES]
    if unknown:
        raise ConfigError("role", unknown[0], f"one of {ROLES}")
    return torch.tensor([ROLES.index(r) for r in roles], dtype=torch.long)


def _checked(metrics: dict[str, Tensor]) -> dict[str, Tensor]:
    """The required metrics as 1-D CPU tensors of equal length (comparisons with NaN are False)."""
    missing = [k for k in REQUIRED_METRICS if k not in metrics]
    if missing:
        raise DataError("metrics", f"missing {missing}; pass the output of attention_metrics")
    values = {k: torch.as_tensor(metrics[k]).detach().cpu().reshape(-1) for k in REQUIRED_METRICS}
    lengths = {v.shape[0] for v in values.values()}
    if len(lengths) != 1:
        raise DataError("metrics", f"every metric must be [head] with one head count, got {sorted(lengths)}")
    return values
