"""A run's tables -> the data its page shows (pure: frames and arrays in, one JSON-ready dict out).

Everything is indexed by measurement step (the slider's positions, the log-spaced early ones
included) and by head `layer * n_heads + head`. What a run does not hold is left out and the
page says so: mean maps exist at every step only in runs that stored `probe_patterns/` (older
runs: the first and last measurement, from `attention_maps.npz`), the token view only there.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from headlab.analysis.bifurcation import role_bifurcation_steps
from headlab.analysis.roles import ROLES
from headlab.errors import DataError
from headlab.measure import TASK  # `role@task`: the role from the queries that feed the decision
from headlab.store.run_dir import HEAD_METRICS, PROBE_PATTERNS
from headlab.view.encode import quantize

# Trajectories in the head panel, in this order when present (any other per-head metric follows).
TRAJECTORY_METRICS = ("entropy", "entropy_norm", "mean_distance", "prev_score", "self_score", "next_score",
                      "cls_attention", "special_attention", "punct_attention", "last_attention", "confidence",
                      "dist_from_init", "grad_norm", "grad_importance")
# Head-by-head tables of head_pairs.parquet the similarity panel draws (weight space first).
PAIR_METRICS = ("q_cosine", "qk_cosine", "q_subspace", "js", "corr")
ROLE = "role"
# A language model's per-head scores (shares of attention, so always in [0, 1]): the layer x head maps of
# the LM panel, drawn on one fixed 0-1 scale so a 0.03 head never looks like a 0.6 one.
LM_SCORES = ("prev_token_score", "induction_score", "rep_induction_score", "duplicate_score")
SAMPLED_LATER = ("rllc", "rllc_std")  # headlab-llc's rows, at the saved checkpoints it sampled


def run_page_data(head_metrics: pd.DataFrame, head_pairs: pd.DataFrame | None = None,
                  maps: Mapping[int, np.ndarray] | None = None, patterns: Sequence[Mapping[str, Any]] = (),
                  importance: pd.DataFrame | None = None, title: str = "run", notes: Sequence[str] = (),
                  lm: Mapping[str, Any] | None = None, report: Sequence[str] = (),
                  task_queries: str | None = None) -> dict[str, Any]:
    """The page data of one run.

    Args:
        head_metrics: `head_metrics.parquet` (step, layer, head, metric, value; `role` as role codes).
        head_pairs: `head_pairs.parquet` (step, layer, head_a, head_b, metric, value), or None.
        maps: step -> mean attention maps `[layer, head, P, P]` (any subset of the steps).
        patterns: `headlab.store.probe_patterns.read_pattern_parts` (per step: patterns, lengths, tokens).
        importance: `head_importance.parquet` (its metrics join the trajectories at their steps), or None.
        lm: summary.json's `lm` block of a language-model run (onsets, loss drop), or None.
        report: `headlab.report.report_lines` (one line per head in words, most important first).
        task_queries: summary.json's `task_queries` ("[CLS]", "every token"), named beside the task roles.

    The grid, its ticks and each head's timeline show the task role (`role@task`, from the queries that
    feed the decision) when the run measured it, else the all-query `role`: a head that reads the last
    word from [CLS] is `mixed` over all queries, and a grid of `mixed` shows nothing (`role_label` says which).
    """
    if head_metrics is None or head_metrics.empty:
        raise DataError(HEAD_METRICS, "has no rows: the run measured nothing to show")
    head_metrics = head_metrics[head_metrics["layer"] >= 0]  # a run-level row (layer -1) is no head's
    measured = head_metrics[~head_metrics["metric"].isin(SAMPLED_LATER)]
    # the slider's steps are the training's measurements; headlab-llc's rows at a checkpoint no
    # measurement fell on would be steps where every other metric is missing
    steps = sorted(int(s) for s in (measured if not measured.empty else head_metrics)["step"].unique())
    off_grid = sorted(set(int(s) for s in head_metrics["step"].unique()) - set(steps))
    if off_grid:
        notes = [*notes, f"rLLC at steps {', '.join(map(str, off_grid))} not shown: no measurement at those steps"]
    n_layers = int(head_metrics["layer"].max()) + 1
    n_heads = int(head_metrics["head"].max()) + 1
    cube = _cube(head_metrics, steps, n_layers, n_heads)  # metric -> [step, layer * head]
    if importance is not None and not importance.empty:
        for metric, values in _cube(importance, steps, n_layers, n_heads).items():
            cube.setdefault(metric, values)
    # every metric but the role codes; the conditional ones ({metric}@{token}, @task: what a head does from
    # those queries, e.g. [CLS]'s) after the all-query ones, each beside the others of its token
    plain = sorted(m for m in cube if m not in TRAJECTORY_METRICS and "@" not in m and not m.startswith("role"))
    conditional = sorted((m for m in cube if "@" in m and not m.startswith("role")), key=lambda m: (m.split("@", 1)[1], m))
    names = [m for m in TRAJECTORY_METRICS if m in cube] + plain + conditional
    task = f"{ROLE}@{TASK}" in cube
    roles = cube.get(f"{ROLE}@{TASK}" if task else ROLE)
    queries = task_queries or "the decision's queries"
    data: dict[str, Any] = {
        "role_label": f"task role (from {queries})" if task else "role",
        "kind": "run", "title": title, "notes": list(notes), "report": list(report), "steps": steps, "n_layers": n_layers, "n_heads": n_heads,
        "metrics": {m: _json(cube[m]) for m in names},
        "roles": _role_names(roles) if roles is not None else None,
    }
    data.update(_role_events(steps, roles))
    data["pairs"] = _pairs(head_pairs, steps, n_layers, n_heads) if head_pairs is not None else {}
    data["maps"] = _maps(maps or {}, steps)
    data["tokens"] = _tokens(patterns, steps, n_layers, n_heads)
    data["lm"] = _lm(cube, lm, n_heads)
    return data


def _lm(cube: Mapping[str, np.ndarray], lm: Mapping[str, Any] | None, n_heads: int) -> dict[str, Any] | None:
    """The LM panel: which scores the run measured, each head's induction onset (`L1H2` -> step, as
    head index -> step) and the probe-loss drop / ICL jump steps; None for a run with no LM score."""
    scores = [m for m in LM_SCORES if m in cube]
    if not scores:
        return None
    lm = lm or {}
    onsets = {}
    for name, step in (lm.get("induction_onset_steps") or {}).items():
        layer, _, head = str(name).removeprefix("L").partition("H")
        if step is not None and layer.isdigit() and head.isdigit():
            onsets[str(int(layer) * n_heads + int(head))] = int(step)
    events = {key: lm.get(key) for key in ("loss_drop_step", "icl_jump_step")}
    roles = lm.get("final_roles")  # [layer][head] at the last measurement (the LM rule: previous, induction, ...)
    final = [str(r) for layer in roles for r in layer] if isinstance(roles, list) and all(isinstance(x, list) for x in roles) else None
    return {"scores": scores, "onsets": onsets, "final_roles": final,
            **{k: int(v) for k, v in events.items() if isinstance(v, (int, float))}}


def _cube(df: pd.DataFrame, steps: list[int], n_layers: int, n_heads: int) -> dict[str, np.ndarray]:
    """metric -> `[step, layer * n_heads + head]` (NaN where not measured)."""
    out = {}
    index = {s: i for i, s in enumerate(steps)}
    for metric, rows in df.groupby("metric", sort=False):
        arr = np.full((len(steps), n_layers * n_heads), np.nan)
        rows = rows[rows["step"].isin(index)]
        arr[rows["step"].map(index).to_numpy(int), (rows["layer"] * n_heads + rows["head"]).to_numpy(int)] = rows["value"]
        out[str(metric)] = arr
    return out


def _json(arr: np.ndarray) -> list[list[float | None]]:
    return [[None if not math.isfinite(v) else round(float(v), 6) for v in row] for row in arr]


def _role_names(codes: np.ndarray) -> list[list[str | None]]:
    return [[ROLES[int(c)] if math.isfinite(c) and 0 <= int(c) < len(ROLES) else None for c in row] for row in codes]


def _role_events(steps: list[int], roles: np.ndarray | None) -> dict[str, Any]:
    """Each head's role changes (step, from, to) and its bifurcation step: the first step from which
    it holds its final role to the end (`headlab.analysis.bifurcation`; null: never settled)."""
    if roles is None:
        return {"role_changes": [], "bifurcation": None}
    changes = [{"step": steps[t], "head": h, "from": ROLES[int(roles[t - 1, h])], "to": ROLES[int(roles[t, h])]}
               for t in range(1, len(steps)) for h in range(roles.shape[1])
               if math.isfinite(roles[t, h]) and math.isfinite(roles[t - 1, h]) and roles[t, h] != roles[t - 1, h]]
    settle = role_bifurcation_steps(np.asarray(steps, dtype=float), roles).numpy()
    return {"role_changes": changes, "bifurcation": [None if not math.isfinite(s) else int(s) for s in settle]}


def _pairs(df: pd.DataFrame, steps: list[int], n_layers: int, n_heads: int) -> dict[str, list]:
    """metric -> `[step][layer][head_a][head_b]` of the head-by-head tables."""
    out: dict[str, list] = {}
    index = {s: i for i, s in enumerate(steps)}
    for metric in PAIR_METRICS:
        rows = df[(df["metric"] == metric) & df["step"].isin(index)]
        if rows.empty:
            continue
        arr = np.full((len(steps), n_layers, n_heads, n_heads), np.nan)
        arr[rows["step"].map(index).to_numpy(int), rows["layer"].to_numpy(int), rows["head_a"].to_numpy(int),
            rows["head_b"].to_numpy(int)] = rows["value"]
        out[metric] = [_json(arr[t].reshape(n_layers * n_heads, n_heads)) for t in range(len(steps))]
    return out


def _maps(maps: Mapping[int, np.ndarray], steps: list[int]) -> dict[str, Any] | None:
    kept = sorted(s for s in maps if s in set(steps))
    if not kept:
        return None
    stack = np.stack([np.asarray(maps[s], dtype=np.float64) for s in kept])  # [map, layer, head, P, P]
    data, scale = quantize(stack)
    return {"steps": kept, "size": int(stack.shape[-1]), "data": data, "scale": scale}


def _tokens(parts: Sequence[Mapping[str, Any]], steps: list[int], n_layers: int, n_heads: int) -> dict[str, Any] | None:
    parts = [p for p in parts if int(p["step"]) in set(steps)]
    if not parts:
        return None
    first = parts[0]
    shape = first["patterns"].shape  # [layer, head, sentence, T, T]
    if shape[:2] != (n_layers, n_heads) or any(p["patterns"].shape != shape for p in parts):
        raise DataError(PROBE_PATTERNS, f"maps of shape {shape} do not match {n_layers} layers x {n_heads} heads "
                                          "at every step")
    lengths = [int(n) for n in first["lengths"]]
    stack = np.stack([p["patterns"] for p in parts])  # [step, layer, head, sentence, T, T]
    data, scale = quantize(stack)
    return {"steps": [int(p["step"]) for p in parts], "n_sentences": int(shape[2]), "width": int(shape[3]),
            "lengths": lengths, "sentences": [[str(t) for t in row[:n]] for row, n in zip(first["tokens"], lengths)],
            "data": data, "scale": scale}
