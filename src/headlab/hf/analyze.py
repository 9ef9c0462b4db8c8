"""Measure every head of a pretrained encoder or decoder on a probe set and write headlab's run contract.

The same tables, maps and figures a training run leaves (`head_metrics.parquet`,
`head_pairs.parquet`, `attention_maps.npz`, `figures/`, `summary.json`), measured through the one
seam `headlab.measure.measure_probe` at step 0: a pretrained model is one measurement point (a
checkpoint suite, `headlab.hf.suite`, makes many). A decoder is also measured as headlab's own
LMs are (`headlab.measure.lm_probe.measure_lm_probe`) on the standard induction test: BOS, L random
tokens of its vocabulary, the same L again; its head table gains `prev_token_score`,
`duplicate_score`, `induction_score`, `rep_induction_score` and `copying_score`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import torch

from headlab.analysis.lm_heads import lm_roles
from headlab.errors import DataError
from headlab.hf.adapter import HFModel
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
    decoder: bool = False  # BOS-first probe, plus the LM scores on repeated random tokens
    lm_probe_size: int = 64  # sequences of the standard induction test (decoders)
    lm_half_len: int = 32  # L: each sequence is BOS + L random tokens + the same L
    lm_seed: int = 0


def build_probe(tokenizer: Any, settings: AnalyzeSettings) -> tuple[HFProbe, int]:
    """The probe and the number of texts it was drawn from; refuses data that is mostly [UNK]."""
    texts = load_texts(settings.source, settings.path, settings.synthetic_n, settings.synthetic_seed)
    probe = encode_probe(tokenizer, texts, settings.probe_size, settings.max_len, settings.seed, settings.decoder)
    if probe.unk_rate > settings.max_unk_rate:
        raise DataError(settings.source, f"{probe.unk_rate:.1%} of the probe tokens are [UNK] under this model's "
                        f"vocabulary (limit data.max_unk_rate={settings.max_unk_rate}); its heads would be measured "
                        "on [UNK]s, not on the text")
    return probe, len(texts)


def repeated_tokens(tokenizer: Any, n: int, half_len: int, seed: int) -> torch.Tensor:
    """The standard induction test in a model's own vocabulary, `[n, 1 + 2 * half_len]`: BOS, `half_len`
    tokens drawn uniformly from the non-special ids, the same again (TransformerLens' demo; the
    `headlab.data.repeat_tokens.induction_probe` layout with the model's BOS and ids)."""
    bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    special = set(tokenizer.all_special_ids)
    ids = torch.tensor([i for i in range(len(tokenizer)) if i not in special])
    generator = torch.Generator().manual_seed(seed)
    block = ids[torch.randint(0, len(ids), (n, half_len), generator=generator)]
    return torch.cat([torch.full((n, 1), bos), block, block], dim=1)


@dataclass
class CheckpointMeasurement:
    """One model measured: the text-probe `Measurement`, the LM scores (decoders) and the probe used."""

    m: Measurement
    lm: Any  # headlab.measure.lm_probe.LMMeasurement, or None for an encoder
    probe: HFProbe
    n_texts: int

    def per_layer(self) -> list[dict[str, np.ndarray]]:
        """Each layer's `{metric: [head]}`: the text-probe metrics, then the LM scores."""
        if self.lm is None:
            return self.m.head_metrics
        return [{**text, **{k: v.numpy() for k, v in lm.items()}} for text, lm in zip(self.m.head_metrics, self.lm.per_layer)]

    def lm_facts(self) -> dict[str, Any] | None:
        """summary.json's `lm` block: LM roles per layer, the probe's loss and ICL score (None for encoders)."""
        if self.lm is None:
            return None
        return {"roles": [lm_roles(layer) for layer in self.lm.per_layer], "probe_loss": round(self.lm.probe_loss, 4),
                "rep_icl_score": round(float(self.lm.rep_icl), 4), "repeat_loss": round(self.lm.repeat_loss, 4),
                "max_rep_induction_score": round(max(float(layer["rep_induction_score"].max())
                                                     for layer in self.lm.per_layer), 4)}


def measure_checkpoint(net: HFModel, tokenizer: Any, settings: AnalyzeSettings, step: int = 0,
                       probe: tuple[HFProbe, int] | None = None) -> CheckpointMeasurement:
    """Every head of `net` on the text probe (and, for a decoder, on the standard induction test)."""
    probe, n_texts = probe or build_probe(tokenizer, settings)
    m = measure_probe(net, probe.chunks(settings.chunk_size), map_len=settings.map_len, step=step,
                      weight_metrics=settings.weight_metrics)
    lm = None
    if settings.decoder:
        from headlab.measure.lm_probe import measure_lm_probe

        rep = repeated_tokens(tokenizer, settings.lm_probe_size, settings.lm_half_len, settings.lm_seed)
        lm = measure_lm_probe(net, rep, settings.lm_half_len, settings.chunk_size)
        add_repeated_induction(net, lm, rep, settings.lm_half_len, settings.chunk_size)
    return CheckpointMeasurement(m, lm, probe, n_texts)


@torch.no_grad()
def add_repeated_induction(net: HFModel, lm: Any, rep: torch.Tensor, half_len: int, chunk_size: int) -> None:
    """`rep_induction_score` per head and the standard test's ICL score, without a second full forward.

    `measure_lm_probe(..., repeated=rep)` would run the whole model (and its vocabulary-wide logits,
    most of a decoder's cost) a second time on the same tokens; the stripe needs only the patterns,
    which `capture_patterns` gets without the last layer's tail, and on the standard probe the ICL
    score at `icl_positions` is the one already computed."""
    from headlab.analysis.lm_heads import repeated_stripe_score_sums
    from headlab.measure import capture_patterns
    from headlab.measure.lm_probe import REPEATED_INDUCTION

    was_training = net.training
    net.eval()
    try:
        sums: list[Any] = [0.0] * len(net.blocks)
        for chunk in rep.split(chunk_size):
            patterns = capture_patterns(net, chunk, torch.ones_like(chunk, dtype=torch.bool))
            sums = [total + repeated_stripe_score_sums(p, half_len).cpu() for total, p in zip(sums, patterns)]
    finally:
        net.train(was_training)
    for layer, total in enumerate(sums):
        lm.per_layer[layer][REPEATED_INDUCTION] = total / rep.size(0)
    lm.rep_icl, lm.rep_icl_se = lm.icl, lm.icl_se


def write_checkpoint(run_dir: Path, step: int, cm: CheckpointMeasurement) -> None:
    """The measurement's rows at `step`: head_pairs first, head_metrics last (its part marks the step done)."""
    run_id, run = run_dir.name, RunDir(run_dir)
    append_part(run.head_pairs_path, step, head_pair_rows(run_id, step, 0, cm.m.head_pairs))
    append_part(run.head_metrics_path, step, head_metric_rows(run_id, step, 0, cm.per_layer()))


def probe_facts(cm: CheckpointMeasurement, settings: AnalyzeSettings) -> dict[str, Any]:
    """summary.json's `data` block."""
    lengths = [len(s) for s in cm.probe.input_ids]
    return {"source": settings.source, "n_texts": cm.n_texts, "probe_size": len(cm.probe.input_ids),
            "max_len": settings.max_len, "seed": settings.seed, "unk_rate": cm.probe.unk_rate,
            "n_tokens": cm.probe.n_tokens, "n_truncated": cm.probe.n_truncated,
            "mean_len": float(np.mean(lengths)), "median_len": float(np.median(lengths)),
            **({"lm_probe_size": settings.lm_probe_size, "lm_half_len": settings.lm_half_len} if settings.decoder else {})}


def analyze(net: HFModel, tokenizer: Any, settings: AnalyzeSettings, run_dir: Path,
            facts: dict[str, Any] | None = None, importance: HFImportance | None = None,
            importance_facts: dict[str, Any] | None = None) -> dict[str, Any]:
    """Measure `net` on the probe of `settings`, write the run contract into `run_dir`; returns the summary.

    `importance` (from `headlab.hf.importance.head_importance`, computed before anything is written)
    adds `head_importance.parquet`, `figures/importance.png` and summary.json's `importance` block
    (`importance_facts`)."""
    t0 = time.perf_counter()
    cm = measure_checkpoint(net, tokenizer, settings)
    m = cm.m
    write_checkpoint(run_dir, 0, cm)
    write_attention_maps(RunDir(run_dir).attention_maps_path, m)
    from headlab.plots.run_figures import write_run_figures  # matplotlib only once there is something to draw

    figures = write_run_figures(run_dir)
    if importance is not None:
        figures.append(write_importance(run_dir, run_dir.name, importance, m.roles))
    summary = {
        "status": "completed",
        "kind": "analyze_hf",
        **(facts or {}),
        "data": probe_facts(cm, settings),
        "layers": layer_means(m),
        "roles": m.roles,
        "role_counts": role_counts(m.roles),
        **({"lm": cm.lm_facts()} if cm.lm is not None else {}),
        "measure_s": m.capture_s + m.metrics_s,
        "wall_s": time.perf_counter() - t0,
        "figures": [p.name for p in figures],
    }
    if importance is not None:
        summary["importance"] = importance_facts or {}
    RunDir(run_dir).write_summary(summary)
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
