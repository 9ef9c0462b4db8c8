"""Attention templates: fixed per-head patterns that test whether heads should be told their job.

The founding article's claim 3.1: assigning each head a pattern before training (previous token,
a local window, [CLS], ...) gives lower accuracy and slower convergence than letting the heads
divide the work. `model.template` assigns the patterns; this module only builds them (ids/mask
in, `[batch, q, k]` out) and scores a head against them. The attention layer applies them
(`hard`: the head's pattern IS the template; `soft`: a KL term pulls the head towards it).

Vocabulary (rows are queries, columns keys; only real, unpadded keys get mass):

    previous  A[i, i-1] = 1         next     A[i, i+1] = 1
    first     A[i, 0] = 1 ([CLS])   last     A[i, n-1] = 1 (n = the sequence's real length)
    uniform   1/n over real keys    local:w  uniform over real keys j with |i - j| <= w (w >= 1)
    free      no template: the head learns its own pattern

A query whose template names no allowed key attends to itself: the first query ([CLS]) under
`previous`, the last real query under `next`; a padding query with nothing to look at attends
to [CLS] (no template ever puts mass on a padded key). In a causal model, future keys are removed and each row renormalised (`ModelConfig`
refuses `next` and `last` there: they only look ahead).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, get_args

import torch
from torch import Tensor

from headlab.errors import ConfigError

PATTERNS = ("previous", "next", "first", "last", "uniform", "free")
LOCAL = "local"
FREE = "free"
TemplateMode = Literal["hard", "soft", "free"]
MODES: tuple[str, ...] = get_args(TemplateMode)  # free: the template is not applied (the control arm of sweep=templates)
# Named presets: (the cycle of patterns given to the heads of each templated layer, which layers
# are templated, which heads). `synthetic` names the patterns that read the synthetic task's
# planted features (previous token before the marker, the two ends, the final punctuation) plus a
# broad head. `local_head1` is the article's own example (claim 3.1): head 1 of each layer pulled
# to the local neighbourhood, every other head free; with template_mode=soft a constraint term.
PRESETS: dict[str, tuple[tuple[str, ...], str, str]] = {
    "synthetic": (("previous", "first", "last", "uniform"), "all", "all"),
    "synthetic_layer0": (("previous", "first", "last", "uniform"), "first", "all"),
    "positional": (("previous", "next", "local:2", "uniform"), "all", "all"),
    "local_head1": (("local:2",), "all", "first"),
}
_KEY = "model.template"


def check_pattern(name: Any, key: str = _KEY) -> str:
    """Return `name` if it is in the vocabulary (`local:w` with an integer w >= 1), else ConfigError."""
    allowed = f"a pattern from {', '.join(PATTERNS[:-1])}, local:w (w an integer >= 1), free"
    if not isinstance(name, str):
        raise ConfigError(key, name, allowed)
    if name in PATTERNS:
        return name
    kind, _, width = name.partition(":")
    if kind == LOCAL and width.isdigit() and int(width) >= 1:
        return name
    raise ConfigError(key, name, allowed)


def resolve_template(spec: str | Sequence[Sequence[str]] | None, n_layers: int, n_heads: int) -> list[list[str]] | None:
    """A preset name or a per-layer list -> one pattern name per (layer, head); None: no template.

    A list must have n_layers rows of n_heads names each. An all-`free` template is None: the
    model is then built exactly as without one.
    """
    if spec is None:
        return None
    if isinstance(spec, str):
        if spec not in PRESETS:
            raise ConfigError(_KEY, spec, f"a per-layer list of pattern names or a preset: {', '.join(PRESETS)}")
        cycle, layers, heads = PRESETS[spec]
        rows = [[cycle[h % len(cycle)] if (layers == "all" or layer == 0) and (heads == "all" or h == 0) else FREE
                 for h in range(n_heads)] for layer in range(n_layers)]
    else:
        rows = _checked_rows(spec, n_layers, n_heads)
    return None if all(name == FREE for row in rows for name in row) else rows


def _checked_rows(spec: Any, n_layers: int, n_heads: int) -> list[list[str]]:
    shape = f"a list of {n_layers} layers (model.n_layers), each a list of {n_heads} pattern names (model.n_heads)"
    if not isinstance(spec, Sequence) or len(spec) != n_layers:
        raise ConfigError(_KEY, spec, shape)
    rows = []
    for row in spec:
        if isinstance(row, str) or not isinstance(row, Sequence) or len(row) != n_heads:
            raise ConfigError(_KEY, spec, shape)
        rows.append([check_pattern(name) for name in row])
    return rows


def build_template(name: str, attention_mask: Tensor, causal: bool = False) -> Tensor:
    """The pattern `[batch, q, k]` of template `name` for right-padded `attention_mask` `[batch, seq]`.

    >>> build_template("previous", torch.tensor([[True, True, True]]))[0]
    tensor([[1., 0., 0.],
            [1., 0., 0.],
            [0., 1., 0.]])
    """
    name = check_pattern(name)
    if name == FREE:
        raise ValueError("'free' has no template pattern")
    mask = attention_mask.bool()
    seq = mask.size(1)
    i = torch.arange(seq, device=mask.device)[:, None]  # [q, 1]
    j = torch.arange(seq, device=mask.device)[None, :]  # [1, k]
    if name == "previous":
        target = (j == i - 1)[None]
    elif name == "next":
        target = (j == i + 1)[None]
    elif name == "first":
        target = (j == 0).expand(seq, seq)[None]
    elif name == "last":
        last = mask.sum(dim=1).clamp(min=1) - 1  # [batch]
        target = (j[None] == last[:, None, None]).expand(-1, seq, -1)
    elif name == "uniform":
        target = torch.ones(1, seq, seq, dtype=torch.bool, device=mask.device)
    else:  # local:w
        target = ((i - j).abs() <= int(name.partition(":")[2]))[None]
    allowed = target & mask[:, None, :]  # [batch, q, k]
    if causal:
        allowed = allowed & (j <= i)[None]
    allowed = allowed | ((i == j)[None] & mask[:, None, :] & ~allowed.any(dim=-1, keepdim=True))  # nowhere: itself
    allowed = allowed | ((j == 0)[None] & ~allowed.any(dim=-1, keepdim=True))  # a padded query: [CLS]
    pattern = allowed.float()
    return pattern / pattern.sum(dim=-1, keepdim=True)


def build_layer_templates(names: Sequence[str], attention_mask: Tensor, causal: bool = False) -> Tensor:
    """The patterns `[batch, len(names), q, k]` of several heads (none of them `free`); each distinct
    pattern is built once."""
    built = {name: build_template(name, attention_mask, causal) for name in dict.fromkeys(names)}
    return torch.stack([built[name] for name in names], dim=1)


def template_kl(template: Tensor, log_pattern: Tensor, query_mask: Tensor) -> Tensor:
    """KL(template || attention) in nats, per head `[head]`: mean over the real queries of the batch.

    template, log_pattern: `[batch, head, q, k]` (log_pattern = log-softmax of the head's scores);
    query_mask: `[batch, q]`. Keys where the template is 0 contribute 0 (0 log 0 = 0), so a head
    that equals its template scores exactly 0.
    """
    per_key = torch.where(template > 0, template * (template.clamp_min(1e-30).log() - log_pattern), 0.0)
    per_query = per_key.sum(dim=-1)  # [batch, head, q]
    weight = query_mask.to(per_query.dtype)[:, None, :]  # [batch, 1, q]
    return (per_query * weight).sum(dim=(0, 2)) / weight.sum().clamp(min=1.0)


def template_weight(step: int, weight: float, anneal_steps: int) -> float:
    """The soft-template loss weight at `step`: `weight`, falling linearly to 0 over `anneal_steps`
    (0: constant).

    >>> [template_weight(s, 1.0, 4) for s in (0, 2, 4, 9)]
    [1.0, 0.5, 0.0, 0.0]
    """
    if anneal_steps <= 0:
        return float(weight)
    return float(weight) * max(0.0, 1.0 - step / anneal_steps)
