"""Name each head's role from its attention metrics with a fixed, ordered rule.

The rule reads the per-head metrics of `attention_metrics` (means over probe queries) and, when
given, the position evidence of `headlab.analysis.position` (`PositionAccumulator.compute()`),
and takes the
first role whose test passes:

1. ``broad``: ``entropy_norm >= broad_entropy_norm``.
2. ``sink`` / ``vertical``: ``special_attention >= special_mass`` (mass on [CLS] | punctuation |
   last token). ``sink`` when the boundary tokens ([CLS], and the last token: [SEP] in BERT, the
   final mark in headlab's data) hold at least as much of it as the other punctuation, else
   ``vertical`` (punctuation heads).
3. ``previous_token``: ``prev_score >= previous_token_score``.
4. ``next_token``: ``next_score >= next_token_score`` (bidirectional encoders grow them as
   readily as previous-token heads: MiniLM's layer 1 has one at 0.68).
5. ``long_range``: focused (``confidence >= focused_confidence``), far (``distance_norm >=
   long_range_distance_norm`` or ``mean_distance >= long_range_distance``) AND position-dependent:
   ``position_mass >= position_mass`` threshold, i.e. at least that share of the attention of
   the average query lands on one relative offset, or one position counted from the start or
   from the end (not [CLS], not the last token: those are the sink's). Without position
   evidence (`position=None`) no head is long-range.
6. ``local``: ``mean_distance <= local_distance``.
7. ``content``: focused on something other than the boundary tokens (``confidence -
   cls_attention - last_attention >= focused_confidence``) but not at a consistent place: heads
   that pick tokens by identity wherever they are. (Subtracting the boundary mass is
   conservative: when the max key is not [CLS], the head is more focused than this says.)
8. ``mixed``: anything else, including heads whose metrics are NaN.

Broad comes first because on very short sequences uniform attention also puts much mass on
[CLS] and the last token; sink/vertical come before long-range because a [CLS]-staring head is
also focused and far. Long-range comes before local so that a head that reaches a fixed far
offset is not called local on long sequences, where even 15 tokens is small next to the uniform
expected distance (about n/3). ``ROLES`` keeps the first six names at their old indices (tables
store the index), new roles are appended.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from headlab.errors import ConfigError, DataError

ROLES: tuple[str, ...] = ("previous_token", "local", "long_range", "broad", "vertical", "mixed",
                          "next_token", "sink", "content",
                          # a causal LM's roles (analysis.lm_heads.lm_role_ids), appended so stored ids keep their names
                          "induction", "duplicate")

# The descriptor of what a head does (sweep matching and bifurcation read these; kept as they were
# so those numbers do not move with the rule) ...
REQUIRED_METRICS: tuple[str, ...] = (
    "entropy_norm",
    "special_attention",
    "prev_score",
    "confidence",
    "distance_norm",
    "mean_distance",
)
# ... and everything the rule reads.
ROLE_METRICS: tuple[str, ...] = REQUIRED_METRICS + ("cls_attention", "last_attention", "next_score")


@dataclass(frozen=True)
class RoleThresholds:
    """Thresholds of the role rule (see the module docstring for the order), and what set them.

    Measured on all-MiniLM-L6-v2 (`headlab-analyze-hf`, probe seed 0, map_len 32; en_polarity 200
    sentences, en_news 256 articles) and the demo model (docs/pretrained.md has the tables):

    - broad_entropy_norm = 0.85: uniform attention over a fraction f of n keys has entropy_norm
      1 + log f / log n; at n = 32, 0.85 means spreading evenly over more than half the keys.
      MiniLM's layer-0 heads that look uniform in their maps measure 0.86-0.92.
    - special_mass = 0.5: most of the mass on a handful of special positions; uniform attention
      puts only (2 + #punct) / n there. MiniLM's [CLS] heads in layers 1-4 put 0.50-0.76 on
      [CLS]; the next group down sits at 0.34-0.49, with the rest of their mass spread.
    - previous_token_score = 0.4 / next_token_score = 0.4: 10x uniform at n = 25 and twice what a
      +-2 window gives a neighbour (0.2). MiniLM: its one previous head scores 1.00, its next
      head 0.68; no other head exceeds 0.40 (prev) or 0.28 (next).
    - focused_confidence = 0.4: the typical query puts >= 40% on one key (a planted head ~1).
    - long_range_distance_norm = 0.6 / long_range_distance = 8 tokens: at least 60% as far as
      uniform on the same keys, or 8 tokens in absolute terms (15 back at n = 128 has 0.35).
    - position_mass = 0.25: a quarter of the average query's mass on one offset (|d| >= 3) or one
      position from either end; spread attention gives each such bin about 1/n (0.04 at
      n = 25). Planted offset / first-token heads score ~1; the synthetic task's learned
      first/last head 0.32 (mass at a fixed distance from the end; the rest follows the end
      letters by identity); the demo model's heads on zh_reviews 0.03-0.07; MiniLM's heads below
      the previous/next thresholds <= 0.14 (en_polarity; 0.12 en_news) apart from its punctuation
      head L3H11 (0.28, `vertical` first) (docs/pretrained.md).
    - local_distance = 2.0 tokens: self, previous, next and +-2 windows are ~0-1.2.
    - content uses focused_confidence after removing the [CLS] and last-token mass: MiniLM's
      `mixed` and `sink` heads keep at most 0.23 beyond it (en_polarity, en_news), the demo
      model's eight heads on zh_reviews 0.37-0.83 (seven pass), a planted content head ~1.
    """

    broad_entropy_norm: float = 0.85
    special_mass: float = 0.5
    previous_token_score: float = 0.4
    next_token_score: float = 0.4
    focused_confidence: float = 0.4
    long_range_distance_norm: float = 0.6
    long_range_distance: float = 8.0
    position_mass: float = 0.25
    local_distance: float = 2.0


def classify_roles(metrics: dict[str, Tensor], thresholds: RoleThresholds = RoleThresholds(),
                   position: dict[str, Tensor] | None = None) -> list[str]:
    """One role name (from `ROLES`) per head, from `metrics {name: [head]}` of `attention_metrics`
    and `position` (`PositionAccumulator.compute()` of the same probe; None: no head is long-range).

    >>> m = {"entropy_norm": torch.tensor([0.0, 0.95, 0.2]), "special_attention": torch.tensor([0.05, 0.1, 0.9]),
    ...      "cls_attention": torch.tensor([0.0, 0.05, 0.9]), "last_attention": torch.tensor([0.0, 0.05, 0.0]),
    ...      "prev_score": torch.tensor([1.0, 0.05, 0.0]), "next_score": torch.tensor([0.0, 0.05, 0.0]),
    ...      "confidence": torch.tensor([1.0, 0.06, 0.9]), "distance_norm": torch.tensor([0.1, 1.0, 1.2]),
    ...      "mean_distance": torch.tensor([1.0, 9.0, 12.0])}
    >>> classify_roles(m)
    ['previous_token', 'broad', 'sink']
    """
    v = checked_metrics(metrics, ROLE_METRICS, "attention_metrics")
    t = thresholds
    n_heads = v["confidence"].shape[0]
    boundary = v["cls_attention"].nan_to_num(0.0) + v["last_attention"].nan_to_num(0.0)
    special = v["special_attention"] >= t.special_mass
    far = (v["distance_norm"] >= t.long_range_distance_norm) | (v["mean_distance"] >= t.long_range_distance)
    positional = _position_mass(position, n_heads) >= t.position_mass
    rules = (
        ("broad", v["entropy_norm"] >= t.broad_entropy_norm),
        ("sink", special & (boundary >= v["special_attention"] - boundary)),
        ("vertical", special),
        ("previous_token", v["prev_score"] >= t.previous_token_score),
        ("next_token", v["next_score"] >= t.next_token_score),
        ("long_range", (v["confidence"] >= t.focused_confidence) & far & positional),
        ("local", v["mean_distance"] <= t.local_distance),
        ("content", v["confidence"] - boundary >= t.focused_confidence),
    )
    return [next((role for role, passed in rules if passed[h]), "mixed") for h in range(n_heads)]


def role_ids(roles: list[str]) -> Tensor:
    """`[head]` long ids (index in `ROLES`), e.g. for plotting or counting roles.

    >>> role_ids(["local", "mixed", "content"]).tolist()
    [1, 5, 8]
    """
    unknown = [r for r in roles if r not in ROLES]
    if unknown:
        raise ConfigError("role", unknown[0], f"one of {ROLES}")
    return torch.tensor([ROLES.index(r) for r in roles], dtype=torch.long)


def _position_mass(position: dict[str, Tensor] | None, n_heads: int) -> Tensor:
    if position is None:
        return torch.zeros(n_heads, dtype=torch.float64)
    mass = torch.as_tensor(position["position_mass"]).detach().cpu().double().reshape(-1)
    if mass.shape[0] != n_heads:
        raise DataError("position", f"position_mass has {mass.shape[0]} heads, the metrics {n_heads}")
    return mass.nan_to_num(0.0)


def checked_metrics(metrics: dict[str, Tensor], names: Sequence[str], source: str) -> dict[str, Tensor]:
    """The metrics `names` a role rule reads as 1-D CPU float64 tensors of equal length (comparisons
    with NaN are False); `source` names what to pass when one is missing."""
    missing = [k for k in names if k not in metrics]
    if missing:
        raise DataError("metrics", f"missing {missing}; pass the output of {source}")
    values = {k: torch.as_tensor(metrics[k]).detach().cpu().double().reshape(-1) for k in names}
    lengths = {v.shape[0] for v in values.values()}
    if len(lengths) != 1:
        raise DataError("metrics", f"every metric must be [head] with one head count, got {sorted(lengths)}")
    return values
