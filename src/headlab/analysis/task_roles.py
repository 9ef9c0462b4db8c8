"""Name each head's role from the queries that feed the decision, beside the all-query role.

A classifier decides from one row of the last layer: position 0 ([CLS]) under cls pooling, every
real position under mean pooling; a causal LM predicts the next token from the last position.
`roles.classify_roles` averages over every query, so a head that reads the decisive token only
from [CLS] is one row in n and ends `content` or `mixed`. The task role reads the same metrics
(`attention_metrics(..., query_mask=decision_query_mask(...))`) and the same position evidence
(`PositionAccumulator.update(..., query_mask=...)`) from the decision's queries only, with the
same names (`roles.ROLES`) and thresholds (`roles.RoleThresholds`), and the first rule that holds
wins:

1. ``broad``: ``entropy_norm >= broad_entropy_norm``.
2. ``sink``: ``cls_attention >= special_mass``: the decision gets [CLS] back (from [CLS], itself),
   nothing the sentence holds.
3. ``vertical``: the mass on the last token and punctuation, the query's own position excluded
   (``special_attention - cls_attention``, minus ``last_attention`` when the query is the last
   token), ``>= special_mass``. In the all-query rule a head parked on the last token is a
   ``sink``; here the decision reads that token, which is where a final mark or last word lies.
4. ``previous_token`` / 5. ``next_token``: as in the all-query rule (from [CLS], the next token
   is the first word).
6. ``long_range``: focused, far, and at one place: ``max(position_mass, last_attention) >=
   position_mass`` (the last token counts as a place unless it is the query itself).
7. ``local``: ``mean_distance <= local_distance``.
8. ``content``: ``confidence - cls_attention >= focused_confidence`` (the last token is not
   subtracted: reading it is reading content).
9. ``mixed``: anything else, including heads whose metrics are NaN.

Under mean pooling the queries are those of the all-query role, so the two differ only where the
last token is concerned (rules 3, 6, 8).
"""

from __future__ import annotations

import torch
from torch import Tensor

from headlab.analysis.roles import ROLE_METRICS, RoleThresholds, _position_mass, checked_metrics  # one position reader for both rules
from headlab.errors import ConfigError, DataError

# What the decision reads: position 0 ([CLS]) | every real position | the last real position (an LM's next token).
DECISIONS: tuple[str, ...] = ("cls", "mean", "last")
# The queries each decision reads, in words (reports, docs).
DECISION_QUERIES: dict[str, str] = {"cls": "[CLS]", "mean": "every token", "last": "the last token"}
TASK_METRICS: tuple[str, ...] = ROLE_METRICS + ("punct_attention",)


def decision_query_mask(attention_mask: Tensor, decision: str) -> Tensor:
    """`[batch, q]` bool: the real queries whose output feeds the decision.

    >>> mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]], dtype=torch.bool)
    >>> decision_query_mask(mask, "cls").int().tolist(), decision_query_mask(mask, "last").int().tolist()
    ([[1, 0, 0, 0], [1, 0, 0, 0]], [[0, 0, 1, 0], [0, 1, 0, 0]])
    """
    if decision not in DECISIONS:
        raise ConfigError("decision", decision, f"one of {list(DECISIONS)} (cls or mean pooling; an LM's last token)")
    real = attention_mask.bool()
    if decision == "mean":
        return real.clone()
    out = torch.zeros_like(real)
    if decision == "cls":
        out[:, 0] = real[:, 0]
        return out
    positions = torch.arange(real.shape[1], device=real.device)
    last = torch.where(real, positions, -1).amax(1)  # [batch]; -1: an empty row
    has = last >= 0
    out[has.nonzero().squeeze(1), last[has]] = True
    return out


def classify_task_roles(metrics: dict[str, Tensor], decision: str, thresholds: RoleThresholds = RoleThresholds(),
                        position: dict[str, Tensor] | None = None) -> list[str]:
    """One role name (from `ROLES`) per head, from `metrics {name: [head]}` averaged over the
    decision's queries and `position` (`PositionAccumulator.compute()` over the same queries).

    >>> z, one = torch.zeros(3), torch.ones(3)
    >>> m = {"entropy_norm": torch.tensor([0.1, 0.1, 0.1]), "cls_attention": torch.tensor([0.05, 0.9, 0.05]),
    ...      "last_attention": torch.tensor([0.9, 0.05, 0.05]), "punct_attention": z,
    ...      "special_attention": torch.tensor([0.95, 0.95, 0.1]), "prev_score": z * float("nan"),
    ...      "next_score": torch.tensor([0.0, 0.0, 0.05]), "confidence": torch.tensor([0.9, 0.9, 0.9]),
    ...      "distance_norm": torch.tensor([2.0, 0.0, 1.0]), "mean_distance": torch.tensor([20.0, 0.0, 9.0])}
    >>> classify_task_roles(m, "cls")
    ['vertical', 'sink', 'content']
    """
    if decision not in DECISIONS:
        raise ConfigError("decision", decision, f"one of {list(DECISIONS)}")
    v = checked_metrics(metrics, TASK_METRICS, "attention_metrics over the decision's queries")
    t = thresholds
    n_heads = v["confidence"].shape[0]
    cls = v["cls_attention"].nan_to_num(0.0)
    last = v["last_attention"].nan_to_num(0.0)
    read_last = torch.zeros_like(last) if decision == "last" else last  # the last query's own position is no place
    closing = v["special_attention"].nan_to_num(0.0) - cls - (last if decision == "last" else 0.0)
    far = (v["distance_norm"] >= t.long_range_distance_norm) | (v["mean_distance"] >= t.long_range_distance)
    place = torch.maximum(_position_mass(position, n_heads), read_last)
    rules = (
        ("broad", v["entropy_norm"] >= t.broad_entropy_norm),
        ("sink", cls >= t.special_mass),
        ("vertical", closing >= t.special_mass),
        ("previous_token", v["prev_score"] >= t.previous_token_score),
        ("next_token", v["next_score"] >= t.next_token_score),
        ("long_range", (v["confidence"] >= t.focused_confidence) & far & (place >= t.position_mass)),
        ("local", v["mean_distance"] <= t.local_distance),
        ("content", v["confidence"] - cls >= t.focused_confidence),
    )
    return [next((role for role, passed in rules if passed[h]), "mixed") for h in range(n_heads)]


