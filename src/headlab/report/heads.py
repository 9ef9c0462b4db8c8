"""One line per head in plain words: what it reads, how much it matters, when its role settled.

Pure: a run's tables in (the `head_metrics` rows, the `head_importance` rows if any, summary.json
as a dict), strings out. What a head reads comes from the last measurement, from the queries that
feed the decision when the run measured them (`{metric}@task`, `headlab.analysis.task_roles`),
else from every query; each conditional query token (`{metric}@y`) adds its own clause. Heads are
sorted by importance when the run has it: ablation (`headlab-importance`) first, else the
callback's gradient importance. A causal LM's head reads what its LM role says (previous-token,
duplicate-token, induction, or none, on the induction probe), with the three scores behind it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import pandas as pd

import torch

from headlab.analysis.bifurcation import role_bifurcation_steps
from headlab.analysis.lm_heads import LM_PATTERN_SCORES, lm_role_ids
from headlab.analysis.roles import ROLES, RoleThresholds
from headlab.measure import TASK

# A head "attends X" when at least this share of its queries' mass lands on X: the role rule's
# position_mass (a quarter: about 6x what uniform attention gives one token of 25).
TARGET_MASS = RoleThresholds().position_mass
BROAD = RoleThresholds().broad_entropy_norm
FOCUSED = RoleThresholds().focused_confidence
# (metric, words) in the order ties are broken; which query a word is relative to is in `_targets`.
_TARGETS = (("last_attention", "the last token"), ("cls_attention", "[CLS]"), ("punct_attention", "punctuation"),
            ("prev_score", "the previous token"), ("next_score", "the next token"), ("self_score", "itself"))
KEY_TOKENS = 3  # tokens named for a head that picks by content
# An LM head's role (`lm_role_ids`, under the shared role names) in words
_LM_WORDS = {"previous_token": "a previous-token head", "duplicate": "a duplicate-token head",
             "induction": "an induction head", "mixed": "no LM role"}
# Importance metrics, preferred first: (table, metric, words in the line).
_IMPORTANCE = (("importance", "ablation_dloss", "ablation dloss"), ("head_metrics", "grad_importance", "gradient importance"))


@dataclass(frozen=True)
class HeadLine:
    """One head's line, and the numbers it was sorted by (rank 1 = most important; None: unknown)."""

    layer: int
    head: int
    text: str
    rank: int | None = None
    importance: float | None = None


def head_report(head_metrics: pd.DataFrame, importance: pd.DataFrame | None = None,
                summary: Mapping[str, Any] | None = None, sentences: Mapping[str, Any] | None = None) -> list[HeadLine]:
    """Every head's line, most important first (by layer and head when no importance is known).

    `head_metrics`/`importance`: long tables (`step, layer, head, metric, value`); `summary`: the
    run's summary.json (`task_queries` names the decision's queries; absent: "the decision's queries");
    `sentences`: the last `probe_patterns/` part (`headlab.store.probe_patterns`), from which a head that
    picks tokens by content gets the tokens it picks (`key_tokens`); None: no such clause.
    """
    if head_metrics is None or head_metrics.empty:
        return []
    steps = sorted(int(s) for s in head_metrics["step"].unique())
    last = _wide(head_metrics[head_metrics["step"] == steps[-1]])
    queries = str((summary or {}).get("task_queries") or "the decision's queries")
    ranks, scores, words = _ranks(last, head_metrics, importance)
    settled = _settled_steps(head_metrics, steps)
    picked = _picked_tokens(sentences, queries, steps[-1])
    lines = []
    for (layer, head), values in last.iterrows():
        reading = _lm_reading(values) if _is_lm(values) else _reading(values, queries, picked.get((layer, head), ""))
        parts = [reading,
                 _importance_words(ranks.get((layer, head)), scores.get((layer, head)), words, len(last)),
                 settled.get((layer, head), "")]
        text = f"L{layer}H{head}: " + "; ".join(p for p in parts if p)
        lines.append(HeadLine(int(layer), int(head), text, ranks.get((layer, head)), scores.get((layer, head))))
    return sorted(lines, key=lambda h: (h.rank is None, h.rank or 0, h.layer, h.head))


def report_lines(head_metrics: pd.DataFrame, importance: pd.DataFrame | None = None,
                 summary: Mapping[str, Any] | None = None, sentences: Mapping[str, Any] | None = None) -> list[str]:
    """`head_report`'s texts, in its order."""
    return [line.text for line in head_report(head_metrics, importance, summary, sentences)]


def key_tokens(sentences: Mapping[str, Any], queries: str, top: int = KEY_TOKENS) -> dict[tuple[int, int], list[tuple[str, float]]]:
    """Per head `(layer, head)`, the `top` tokens (by their text) that get the largest share of its attention
    from `queries` ("[CLS]": position 0; "the last token": each sentence's last; else every real position),
    summed over the stored probe sentences (`sentences`: a `probe_patterns/` part, `patterns [layer, head,
    sentence, T, T]`, `lengths [sentence]`, `tokens [sentence, T]`). A content head names what it reads.

    >>> a = np.zeros((1, 1, 2, 3, 3)); a[0, 0, 0, 0] = [0.2, 0.0, 0.8]; a[0, 0, 1, 0] = [0.4, 0.6, 0.0]
    >>> key_tokens({"patterns": a, "lengths": np.array([3, 2]), "tokens": np.array([["[CLS]", "a", "cat"], ["[CLS]", "cat", ""]])}, "[CLS]")
    {(0, 0): [('cat', 0.7), ('[CLS]', 0.3)]}
    """
    patterns = np.asarray(sentences["patterns"], dtype=np.float64)
    lengths, tokens = np.asarray(sentences["lengths"]), np.asarray(sentences["tokens"])
    n_layers, n_heads = patterns.shape[:2]
    mass: dict[tuple[int, int], dict[str, float]] = {(l, h): {} for l in range(n_layers) for h in range(n_heads)}
    for s, n in enumerate(int(n) for n in lengths):
        if n < 1:
            continue
        rows = [0] if queries == "[CLS]" else [n - 1] if queries == "the last token" else list(range(n))
        received = patterns[:, :, s, rows, :n].sum(axis=2)  # [layer, head, key]
        for (layer, head), by_token in mass.items():
            for key in range(n):
                by_token[str(tokens[s, key])] = by_token.get(str(tokens[s, key]), 0.0) + float(received[layer, head, key])
    out = {}
    for head, by_token in mass.items():
        total = sum(by_token.values())
        ranked = sorted(((t, m) for t, m in by_token.items() if m > 0), key=lambda kv: (-kv[1], kv[0]))[:top]
        out[head] = [(token, round(m / total, 6)) for token, m in ranked] if total > 0 else []
    return out


def describe_reading(values: Mapping[str, float], queries: str, suffix: str = "") -> str:
    """What a head does from `queries`, in words, from its metrics `{name}{suffix}`.

    >>> describe_reading({"last_attention": 0.48, "cls_attention": 0.1, "entropy_norm": 0.6, "confidence": 0.5}, "[CLS]")
    'from [CLS] attends the last token (0.48)'
    >>> describe_reading({"last_attention": 0.05, "entropy_norm": 0.95, "confidence": 0.1}, "every token")
    'from every token spreads over the whole sentence (entropy 0.95 of uniform)'
    """
    kind, number, words = reading(values, queries, suffix)
    return {"place": f"from {queries} attends {words} ({number:.2f})",
            "broad": f"from {queries} spreads over the whole sentence (entropy {number:.2f} of uniform)",
            "content": f"from {queries} picks tokens by content, wherever they are (top key {number:.2f})",
            "none": f"from {queries} has no single target (top key {number:.2f})"}.get(kind, f"from {queries}: not measured")


def reading(values: Mapping[str, float], queries: str, suffix: str = "") -> tuple[str, float, str]:
    """(kind, number, place words) of what a head does from `queries`, the first that holds: `place` (the
    most attended place gets >= 0.25: its mass), `broad` (entropy_norm >= 0.85), `content` (confidence -
    [CLS] mass >= 0.4: its top key's weight), `none` (its top key's weight); ("", nan, "") unmeasured.

    >>> reading({"last_attention@task": 0.05, "cls_attention@task": 0.1, "entropy_norm@task": 0.5, "confidence@task": 0.72}, "[CLS]", "@task")
    ('content', 0.72, '')
    """
    def value(name: str) -> float:
        return _value(values, name + suffix)

    _, mass, words = top_target(values, queries, suffix)
    if np.isfinite(mass) and mass >= TARGET_MASS:
        return "place", mass, words
    entropy, confidence = value("entropy_norm"), value("confidence")
    if np.isfinite(entropy) and entropy >= BROAD:
        return "broad", entropy, ""
    if np.isfinite(confidence) and confidence - np.nan_to_num(value("cls_attention")) >= FOCUSED:  # the content rule
        return "content", confidence, ""
    if np.isfinite(confidence):
        return "none", confidence, ""
    return "", math.nan, ""


def top_target(values: Mapping[str, float], queries: str, suffix: str = "") -> tuple[str, float, str]:
    """(metric, mass, words) of the place that gets the most of a head's attention from `queries`
    (the last token, [CLS], punctuation, the previous / next token, itself); ("", nan, "") if none measured.

    >>> top_target({"last_attention@task": 0.66, "prev_score@task": 0.1}, "[CLS]", "@task")
    ('last_attention', 0.66, 'the last token')
    """
    found = [(metric, _value(values, metric + suffix), words) for metric, words in _targets(queries)]
    found = [f for f in found if np.isfinite(f[1])]
    return max(found, key=lambda f: f[1]) if found else ("", math.nan, "")


def _value(values: Mapping[str, float], name: str) -> float:
    v = values.get(name, math.nan)
    return float(v) if v is not None and np.isfinite(v) else math.nan


def _targets(queries: str) -> tuple[tuple[str, str], ...]:
    """The target words relative to the query: from [CLS], [CLS] is itself and its next token the first
    word; from the last token, the last token is itself."""
    if queries == "[CLS]":
        rename = {"cls_attention": "itself ([CLS])", "next_score": "the first token"}
        return tuple((m, rename.get(m, w)) for m, w in _TARGETS if m != "self_score")
    if queries == "the last token":
        return tuple((m, w) for m, w in _TARGETS if m != "last_attention")
    return _TARGETS


def _reading(values: pd.Series, queries: str, picked: str = "") -> str:
    """The main clause (task view if measured, else every query), what a content head picks (`picked`), its
    role names, then each query token's clause."""
    metrics = set(values.index)
    if f"role@{TASK}" in metrics:
        text = describe_reading(values, queries, f"@{TASK}")
        text += _if_content(text, picked)
        text += f", role {_role_name(values[f'role@{TASK}'])} (all queries: {_role_name(values.get('role'))})"
    else:
        text = describe_reading(values, "every token")
        text += _if_content(text, picked) + f", role {_role_name(values.get('role'))}"
    tokens = sorted(m.split("@", 1)[1] for m in metrics if m.startswith("role@") and m != f"role@{TASK}")
    for token in tokens:
        text += f"; {describe_reading(values, repr(token), '@' + token)}, role {_role_name(values[f'role@{token}'])}"
    return text


def _is_lm(values: pd.Series) -> bool:
    """A causal LM's row: the LM pattern scores, and no classifier role."""
    return "role" not in values.index and all(name in values.index for name in LM_PATTERN_SCORES)


def _lm_reading(values: pd.Series) -> str:
    """An LM head: its role on the induction probe and the three pattern scores that decide it."""
    scores = [float(values[name]) for name in LM_PATTERN_SCORES]
    role = _role_name(float(lm_role_ids(torch.tensor([scores]))[0]))
    numbers = ", ".join(f"{name.removesuffix('_score').replace('_', '-')} {v:.2f}" for name, v in zip(LM_PATTERN_SCORES, scores))
    return f"{_LM_WORDS.get(role, role)} on the induction probe ({numbers})"


def _lm_role_grid(head_metrics: pd.DataFrame) -> pd.DataFrame:
    """An LM run's role ids `[step, (layer, head)]` from its pattern scores (empty: not an LM run)."""
    rows = head_metrics[head_metrics["metric"].isin(LM_PATTERN_SCORES)]
    if set(rows["metric"]) != set(LM_PATTERN_SCORES):
        return pd.DataFrame()
    wide = rows.pivot_table(index=["step", "layer", "head"], columns="metric", values="value", aggfunc="last")
    ids = lm_role_ids(torch.tensor(wide[list(LM_PATTERN_SCORES)].to_numpy(dtype=float)))
    return pd.Series(ids.numpy(), index=wide.index).unstack(["layer", "head"]).sort_index()


def _if_content(reading: str, picked: str) -> str:
    """The tokens a head picks, for a head that picks by content (for one that reads a place, the tokens
    there are whatever the sentences hold: no clause)."""
    return f", {picked}" if picked and "picks tokens by content" in reading else ""


def _picked_tokens(sentences: Mapping[str, Any] | None, queries: str, last_step: int) -> dict[tuple[int, int], str]:
    """Per head, "mostly 'cat' (0.31), 'fox' (0.30), 'dog' (0.29) in 8 probe sentences" (`key_tokens`)."""
    if sentences is None or np.asarray(sentences.get("lengths", [])).size == 0:
        return {}
    step = int(sentences.get("step", last_step))
    where = f"{np.asarray(sentences['lengths']).size} probe sentences" + ("" if step == last_step else f" at step {step}")
    return {head: "mostly " + ", ".join(f"{token!r} ({share:.2f})" for token, share in ranked) + f" in {where}"
            for head, ranked in key_tokens(sentences, queries).items() if ranked}


def _role_name(code: Any) -> str:
    try:
        index = float(code)
    except (TypeError, ValueError):
        return "unknown"
    return ROLES[int(index)] if np.isfinite(index) and 0 <= index < len(ROLES) and index == int(index) else "unknown"


def _wide(rows: pd.DataFrame) -> pd.DataFrame:
    """`(layer, head)` x metric values of one step."""
    return rows.pivot_table(index=["layer", "head"], columns="metric", values="value", aggfunc="last", dropna=False)


def _ranks(last: pd.DataFrame, head_metrics: pd.DataFrame, importance: pd.DataFrame | None):
    """(rank per head, score per head, the score's words): the first importance source the run has."""
    tables = {"importance": importance, "head_metrics": head_metrics}
    for table, metric, words in _IMPORTANCE:
        rows = tables[table]
        if rows is None or rows.empty or metric not in set(rows["metric"]):
            continue
        rows = rows[rows["metric"] == metric]
        newest = rows[rows["step"] == rows["step"].max()]
        scores = {(int(r.layer), int(r.head)): float(r.value) for r in newest.itertuples() if np.isfinite(r.value)}
        order = sorted(scores, key=lambda k: (-scores[k], k))
        return {k: i + 1 for i, k in enumerate(order)}, scores, f"{words}, step {int(newest['step'].iloc[0])}"
    return {}, {}, ""


def _importance_words(rank: int | None, score: float | None, words: str, n_heads: int) -> str:
    if rank is None:
        return ""
    return f"{_ordinal(rank)} most important of {n_heads} ({words}: {score:.3g})"


def _ordinal(n: int) -> str:
    """
    >>> [_ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22)]
    ['1st', '2nd', '3rd', '4th', '11th', '12th', '13th', '21st', '22nd']
    """
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _settled_steps(head_metrics: pd.DataFrame, steps: list[int]) -> dict[tuple[int, int], str]:
    """Per head: the step from which its role (the task role when measured) stayed at its final value."""
    metric = f"role@{TASK}" if f"role@{TASK}" in set(head_metrics["metric"]) else "role"
    rows = head_metrics[head_metrics["metric"] == metric]
    grid = rows.pivot_table(index="step", columns=["layer", "head"], values="value", aggfunc="last").sort_index() \
        if not rows.empty else _lm_role_grid(head_metrics)
    if grid.empty:
        return {}
    if len(grid) < 2:
        return {head: f"role measured once (step {int(grid.index[-1])})" for head in grid.columns}
    settle = role_bifurcation_steps(grid.index.to_numpy(dtype=float), grid.to_numpy(dtype=float)).tolist()
    out = {}
    for head, step, final in zip(grid.columns, settle, grid.iloc[-1]):
        if not np.isfinite(step):
            out[head] = f"role still changing at step {int(grid.index[-1])} (the last measurement)"
        elif _role_name(final) == "mixed":  # holding the fallback label is no role that formed
            out[head] = f"no role formed (mixed since step {int(step)})"
        else:
            out[head] = f"role settled at step {int(step)}"
    return out
