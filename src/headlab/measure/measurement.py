"""One measurement: the probe through the weight path, reduced to per-head and per-pair tables.

`measure_probe` is the one seam the training callback, the benchmark, importance and HF analysis
call. It is pure in the sense that matters: it reads the network (eval mode, no_grad, restored
afterwards) and returns numbers; it writes nothing and keeps no state between calls.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from headlab.analysis import (
    METRIC_NAMES,
    ROLES,
    ProbeLayerAccumulator,
    classify_roles,
    head_cosine,
    qk_cosine,
    relative_distance_from_init,
    subspace_similarity,
)
from headlab.analysis.position import PositionAccumulator
from headlab.analysis.task_roles import DECISIONS, classify_task_roles, decision_query_mask
from headlab.errors import ConfigError
from headlab.measure.weights import WEIGHT_NAMES, head_weight_snapshot
from headlab.model.hooks import capture_patterns

# Suffix of the task-aware metrics and role (`last_attention@task`, `role@task`): the decision's queries.
TASK = "task"


@dataclass
class Measurement:
    """What one measurement point produced, per layer (numpy, ready for `headlab.store.tables`)."""

    step: int
    epoch: int
    head_metrics: list[dict[str, np.ndarray]]  # per layer: metric -> [head]
    head_pairs: list[dict[str, np.ndarray]]  # per layer: metric -> [head, head]
    mean_patterns: np.ndarray  # [layer, head, P, P]
    roles: list[list[str]]  # [layer][head]
    capture_s: float = 0.0
    metrics_s: float = 0.0
    decision: str | None = None  # which queries the task roles read (`headlab.analysis.task_roles.DECISIONS`)
    task_roles: list[list[str]] | None = None  # [layer][head], from the decision's queries only

    @property
    def metric_names(self) -> list[str]:
        """Per-head metric names in logging order (those of layer 0; every layer has the same)."""
        return list(self.head_metrics[0]) if self.head_metrics else []


@torch.no_grad()
def measure_probe(
    net: torch.nn.Module,
    chunks: Sequence[Mapping[str, Any]],
    *,
    map_len: int = 32,
    step: int = 0,
    epoch: int = 0,
    weight_metrics: bool = True,
    init_weights: Sequence[Mapping[str, torch.Tensor]] | None = None,
    grad_norm: torch.Tensor | None = None,
    cum_grad_norm: torch.Tensor | None = None,
    decision: str | None = None,
) -> Measurement:
    """Measure every head of `net` on the probe `chunks`; see the package docstring for the contract.

    Args:
        net: `net.blocks[i].attn.hook_pattern` and `net(ids, mask, return_patterns=True)`;
            with `weight_metrics`, also `net.blocks[i].attn.head_weights()`.
        chunks: from `probe_chunks` (keys `input_ids, attention_mask, cls_mask, punct_mask`
            `[batch, seq]`, optional `query_masks` from `add_query_masks`).
        map_len: positions kept in each head's mean attention map `[P, P]`.
        weight_metrics: add the W_Q pair tables (`q_cosine`, `qk_cosine`, `q_subspace`).
        init_weights: per layer `{W_Q, W_K, W_V, W_O}` (`snapshot_weights` at step 0); adds
            `dist_from_init`. None (e.g. a pretrained model): no such metric.
        grad_norm, cum_grad_norm: `[layer, head]` (`grad_norms` after backward, and its running
            sum); add the `grad_norm`, `cum_grad_norm` metrics. None: no such metric.
        decision: the queries that feed the decision (`"cls"`, `"mean"`: the classifier's pooling;
            `"last"`: an LM's next token, `headlab.analysis.task_roles`); adds every metric over
            those queries as `{metric}@task` and the task role `role@task`. None: none.
    """
    if not chunks:
        raise ValueError("measure_probe needs at least one probe chunk (see headlab.measure.probe_chunks)")
    if decision is not None and decision not in DECISIONS:
        raise ConfigError("decision", decision, f"one of {list(DECISIONS)} or None")
    if decision is not None and any(TASK in chunk.get("query_masks", {}) for chunk in chunks):
        raise ConfigError("callbacks.head_metrics.query_tokens", TASK, f"tokens other than {TASK!r}: "
                          f"{{metric}}@{TASK} holds the task-aware metrics")
    was_training = net.training
    net.eval()
    try:
        t0 = time.perf_counter()
        layer_accs = [ProbeLayerAccumulator(map_len) for _ in net.blocks]
        position_accs = [PositionAccumulator() for _ in net.blocks]  # the role rule's position evidence
        task_accs = [PositionAccumulator() for _ in net.blocks] if decision else None  # ... from the decision's queries
        capture_s = 0.0
        for chunk in chunks:
            t_chunk = time.perf_counter()
            patterns = capture_patterns(net, chunk["input_ids"], chunk["attention_mask"])
            capture_s += time.perf_counter() - t_chunk
            query_masks = dict(chunk.get("query_masks") or {})
            if decision:
                query_masks[TASK] = decision_query_mask(chunk["attention_mask"], decision)
            for layer, (acc, position, pattern) in enumerate(zip(layer_accs, position_accs, patterns)):
                acc.update(pattern, chunk["attention_mask"], chunk["cls_mask"], chunk["punct_mask"], query_masks)
                position.update(pattern, chunk["attention_mask"])
                if task_accs is not None:
                    task_accs[layer].update(pattern, chunk["attention_mask"], query_masks[TASK])
            del patterns  # free this chunk's maps before the next forward
        result = _reduce(net, step, epoch, layer_accs, position_accs, weight_metrics, init_weights, grad_norm,
                         cum_grad_norm)
        if task_accs is not None:
            _add_task_roles(result, layer_accs, task_accs, decision)
    finally:
        net.train(was_training)
    result.capture_s, result.metrics_s = capture_s, time.perf_counter() - t0 - capture_s
    return result


def _reduce(net: torch.nn.Module, step: int, epoch: int, layer_accs: list[ProbeLayerAccumulator],
            position_accs: list[PositionAccumulator], weight_metrics: bool,
            init_weights: Sequence[Mapping[str, torch.Tensor]] | None, grad_norm: torch.Tensor | None,
            cum_grad_norm: torch.Tensor | None) -> Measurement:
    head_metrics, head_pairs, roles, maps = [], [], [], []
    for layer, block in enumerate(net.blocks):
        metrics, pair_values, mean_map = layer_accs[layer].compute()
        layer_roles = classify_roles(metrics, position=position_accs[layer].compute())  # long_range needs it
        per_head = {name: _np(value) for name, value in metrics.items()}
        per_head["role"] = _role_codes(layer_roles)
        weights = head_weight_snapshot(block.attn) if weight_metrics or init_weights is not None else None
        if init_weights is not None:
            per_head["dist_from_init"] = _np(relative_distance_from_init(
                [weights[k] for k in WEIGHT_NAMES], [init_weights[layer][k] for k in WEIGHT_NAMES]))
        if grad_norm is not None:
            per_head["grad_norm"] = _np(grad_norm[layer])
        if cum_grad_norm is not None:
            per_head["cum_grad_norm"] = _np(cum_grad_norm[layer])
        for token, conditional in layer_accs[layer].compute_conditional().items():
            if token == TASK:
                continue  # the task-aware view: `_add_task_roles`, with its own rule
            per_head.update({f"{name}@{token}": _np(conditional[name]) for name in METRIC_NAMES})
            per_head[f"role@{token}"] = _role_codes(classify_roles(conditional))
        pairs = {name: _np(value) for name, value in pair_values.items()}
        if weight_metrics:
            pairs["q_cosine"] = _np(head_cosine(weights["W_Q"]))
            pairs["qk_cosine"] = _np(qk_cosine(weights["W_Q"], weights["W_K"]))
            pairs["q_subspace"] = _np(subspace_similarity(weights["W_Q"]))
        head_metrics.append(per_head)
        head_pairs.append(pairs)
        roles.append(layer_roles)
        maps.append(_np(mean_map))
    return Measurement(step, epoch, head_metrics, head_pairs, np.stack(maps), roles)


def model_decision(net: torch.nn.Module) -> str | None:
    """Which queries feed `net`'s decision: its classifier pooling (`"cls"` or `"mean"`, from
    `net.config.pooling`), else None (a model that says nothing of it gets no task roles)."""
    pooling = getattr(getattr(net, "config", None), "pooling", None)
    return pooling if pooling in ("cls", "mean") else None


def _add_task_roles(result: Measurement, layer_accs: list[ProbeLayerAccumulator],
                    task_accs: list[PositionAccumulator], decision: str) -> None:
    """`{metric}@task`, `role@task` and `result.task_roles`: the metrics and role from the decision's queries."""
    result.decision, result.task_roles = decision, []
    for per_head, acc, position in zip(result.head_metrics, layer_accs, task_accs):
        metrics = acc.compute_conditional()[TASK]
        roles = classify_task_roles(metrics, decision, position=position.compute())
        per_head.update({f"{name}@{TASK}": _np(metrics[name]) for name in METRIC_NAMES})
        per_head[f"role@{TASK}"] = _role_codes(roles)
        result.task_roles.append(roles)


def _role_codes(roles: list[str]) -> np.ndarray:
    """Roles as their index in `headlab.analysis.ROLES` (the tables hold numbers only)."""
    return np.array([ROLES.index(r) for r in roles], dtype=np.float64)


def _np(t: torch.Tensor | np.ndarray) -> np.ndarray:
    return t.detach().cpu().double().numpy() if isinstance(t, torch.Tensor) else np.asarray(t, dtype=np.float64)
