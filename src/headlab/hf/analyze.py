"""Measure every head of a pretrained encoder on a probe set and write headlab's run contract.

The same tables, maps and figures a training run leaves (`head_metrics.parquet`,
`head_pairs.parquet`, `attention_maps.npz`, `figures/`, `summary.json`), measured through the one
seam `headlab.measure.measure_probe` at step 0: a pretrained model is one measurement point.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from headlab.errors import DataError
from headlab.hf.adapter import HFEncoder
from headlab.hf.importance import HFImportance
from headlab.hf.probe import HFProbe, encode_probe
from headlab.hf.texts import load_texts
from headlab.interventions import importance_rows
from headlab.measure import Measurement, measure_probe
from headlab.store import (
    RunDir,
    append_part,
    head_metric_rows,
    head_pair_rows,
    replace_steps,
    write_attention_maps,
)
from headlab.store.run_dir import IMPORTANCE_FIGURE

# Per-layer means reported in summary.json (the Clark et al. 2019 comparison of docs/pretrained.md).
LAYER_METRICS = ("entropy", "entropy_norm", "mean_distance", "distance_norm", "cls_attention", "last_attention",
                 "punct_attention", "prev_score", "self_score", "next_score", "confidence")


@dataclass(frozen=True)
class AnalyzeSettings:
    """What `analyze` needs beyond the model: where the text comes from and how to measure it."""

    source: str
    path: str | None = None
    probe_size: int = 256
    max_len: int = 128
    seed: int = 0
    max_unk_rate: float = 0.5
    synthetic_n: int = 2000
    synthetic_seed: int = 0
    chunk_size: int = 32
    map_len: int = 32
    weight_metrics: bool = True


def build_probe(tokenizer: Any, settings: AnalyzeSettings) -> tuple[HFProbe, int]:
    """The probe and the number of texts it was drawn from; refuses data that is mostly [UNK]."""
    texts = load_texts(settings.source, settings.path, settings.synthetic_n, settings.synthetic_seed)
    probe = encode_probe(tokenizer, texts, settings.probe_size, settings.max_len, settings.seed)
    if probe.unk_rate > settings.max_unk_rate:
        raise DataError(settings.source, f"{probe.unk_rate:.1%} of the probe tokens are [UNK] under this model's "
                        f"vocabulary (limit data.max_unk_rate={settings.max_unk_rate}); its heads would be measured "
                        "on [UNK]s, not on the text")
    return probe, len(texts)


def analyze(net: HFEncoder, tokenizer: Any, settings: AnalyzeSettings, run_dir: Path,
            facts: dict[str, Any] | None = None, importance: HFImportance | None = None,
            importance_facts: dict[str, Any] | None = None) -> dict[str, Any]:
    """Measure `net` on the probe of `settings`, write the run contract into `run_dir`; returns the summary.

    `importance` (from `headlab.hf.importance.head_importance`, computed before anything is written)
    adds `head_importance.parquet`, `figures/importance.png` and summary.json's `importance` block
    (`importance_facts`)."""
    t0 = time.perf_counter()
    probe, n_texts = build_probe(tokenizer, settings)
    m = measure_probe(net, probe.chunks(settings.chunk_size), map_len=settings.map_len,
                      weight_metrics=settings.weight_metrics)
    run_id, run = run_dir.name, RunDir(run_dir)
    append_part(run.head_metrics_path, 0, head_metric_rows(run_id, 0, 0, m.head_metrics))
    append_part(run.head_pairs_path, 0, head_pair_rows(run_id, 0, 0, m.head_pairs))
    write_attention_maps(run.attention_maps_path, m)
    from headlab.plots.run_figures import write_run_figures  # matplotlib only once there is something to draw

    figures = write_run_figures(run_dir)
    if importance is not None:
        figures.append(write_importance(run_dir, run_id, importance, m.roles))
    lengths = [len(s) for s in probe.input_ids]
    summary = {
        "status": "completed",
        "kind": "analyze_hf",
        **(facts or {}),
        "data": {"source": settings.source, "n_texts": n_texts, "probe_size": len(probe.input_ids),
                 "max_len": settings.max_len, "seed": settings.seed, "unk_rate": probe.unk_rate,
                 "n_tokens": probe.n_tokens, "n_truncated": probe.n_truncated,
                 "mean_len": float(np.mean(lengths)), "median_len": float(np.median(lengths))},
        "layers": layer_means(m),
        "roles": m.roles,
        "role_counts": role_counts(m.roles),
        "measure_s": m.capture_s + m.metrics_s,
        "wall_s": time.perf_counter() - t0,
        "figures": [p.name for p in figures],
    }
    if importance is not None:
        summary["importance"] = importance_facts or {}
    run.write_summary(summary)
    return summary


def write_importance(run_dir: Path, run_id: str, importance: HFImportance, roles: list[list[str]]) -> Path:
    """`head_importance.parquet` (headlab-importance's rows and writer, step 0) and its heat-map figure
    beside the role map; returns the figure's path."""
    from headlab.plots.importance import plot_importance  # matplotlib after the run's cache dir is set

    run = RunDir(run_dir)
    replace_steps(run.head_importance_path, importance_rows(run_id, 0, 0, importance.result), {0})
    return plot_importance(run.head_importance(), run.figure(IMPORTANCE_FIGURE), 0, roles)


def layer_means(m: Measurement) -> list[dict[str, float]]:
    """Per layer: the mean over heads of each of `LAYER_METRICS` (and its max over heads for the scores)."""
    out = []
    for metrics in m.head_metrics:
        row = {name: float(np.mean(metrics[name])) for name in LAYER_METRICS}
        row.update({f"{name}_max": float(np.max(metrics[name])) for name in ("prev_score", "next_score",
                                                                                "cls_attention", "last_attention")})
        out.append(row)
    return out


def role_counts(roles: list[list[str]]) -> dict[str, int]:
    """How many heads got each role, over all layers."""
    counts: dict[str, int] = {}
    for layer in roles:
        for role in layer:
            counts[role] = counts.get(role, 0) + 1
    return dict(sorted(counts.items()))
