"""Read what a run directory holds for its page (`RunDir` names every file)."""

from __future__ import annotations

from typing import Any

import numpy as np

from headlab.errors import DataError, HeadlabError
from headlab.report import report_lines
from headlab.store import RunDir, read_table
from headlab.store.probe_patterns import read_pattern_parts
from headlab.view.run_data import run_page_data

PROBE_SENTENCES, PROBE_MEAN_OVER, MOST_CHECKPOINTS = 8, 32, 24  # an LM run's maps from checkpoints (view.html < 10 MB)
NO_TOKEN_VIEW_LM = ("no token view and no attention maps: the language-model measurement (callbacks.lm_metrics) stores "
                    "no per-example patterns; its per-head scores are below")
NO_TOKEN_VIEW = ("no token view: this run stored no per-example patterns (probe_patterns/; runs trained "
                 "before headlab-view, or with callbacks.head_metrics.probe_patterns=0)")


def read_run(run: RunDir) -> dict[str, Any]:
    """The page data of the run; a DataError when it holds no head metrics."""
    if not run.path.is_dir():
        raise DataError(run.path, "no such run directory")
    try:
        metrics = read_table(run.head_metrics_path)
    except FileNotFoundError:
        raise DataError(run.path, "has no head_metrics.parquet: not a headlab run (or it measured nothing)") from None
    pairs = read_table(run.head_pairs_path) if run.head_pairs_path.exists() else None
    importance = run.head_importance() if run.head_importance_path.is_file() else None
    parts = read_pattern_parts(run.probe_patterns_dir)
    lm = run.summary.get("lm") if isinstance(run.summary.get("lm"), dict) else None
    notes = []
    if not parts and lm is not None:
        parts = checkpoint_patterns(run)
        if parts:
            notes.append(f"attention maps and token view computed by headlab-view from the run's {len(parts)} saved "
                         f"checkpoint(s) (steps {', '.join(str(int(p['step'])) for p in parts)}) on the standard "
                         f"repeated-tokens probe (BOS, L tokens, the same L again); the slider shows the nearest one")
    maps = {int(p["step"]): p["mean_pattern"].astype(np.float64) for p in parts}
    if not maps:
        maps = summary_maps(run)
        if maps:
            notes.append("mean maps at the first and last measurement only (attention_maps.npz): the slider shows "
                         "the nearest stored map at other steps")
    if not parts:
        notes.append(NO_TOKEN_VIEW_LM if lm is not None else NO_TOKEN_VIEW)
    queries = run.summary.get("task_queries")
    return run_page_data(metrics, pairs, maps, parts, importance, title=_title(run), notes=notes, lm=lm,
                         task_queries=queries if isinstance(queries, str) else None,
                         report=_report(metrics, importance, run.summary, parts[-1] if parts else None) if lm is None else ())


def _report(metrics: Any, importance: Any, summary: dict[str, Any], sentences: Any) -> list[str]:
    """headlab-report's lines for the page (which head does what, in words); none when the run's
    tables do not hold what they read (a page is still written, its charts say the rest)."""
    try:
        return report_lines(metrics, importance, summary, sentences)
    except (HeadlabError, KeyError, ValueError):
        return []


def checkpoint_patterns(run: RunDir, sentences: int = PROBE_SENTENCES, mean_over: int = PROBE_MEAN_OVER,
                        most: int = MOST_CHECKPOINTS) -> list[dict[str, Any]]:
    """An LM run's attention on the standard repeated-tokens probe at its saved checkpoints (at most `most`,
    evenly spread over them, the newest kept), as `probe_patterns/` parts: the LM measurement stores no
    per-example patterns, and on this probe an induction head is a stripe one position right of the
    diagonal, L back. `mean_pattern` is the mean over `mean_over` probe sequences, `patterns` the first
    `sentences`; tokens are the ids as text (or the characters of a text LM). [] when the run has no
    checkpoint or its data cannot be rebuilt (the page then says there is no token view)."""
    import torch

    from headlab.config import instantiate
    from headlab.errors import HeadlabError
    from headlab.reload import build_datamodule, load_matching_network, run_config

    try:
        found = run.find_checkpoints("all")
        cfg = run_config(run)
        datamodule = instantiate(cfg.data)
        try:  # repeat_tokens needs no setup for its probe (setup draws the 96,000 training sequences: ~10 s)
            probe = datamodule.repeated_probe(max(sentences, mean_over))
        except (AttributeError, TypeError):  # a text LM builds its vocabulary in setup
            datamodule = build_datamodule(cfg)
            probe = datamodule.repeated_probe(max(sentences, mean_over))
    except (HeadlabError, AttributeError, FileNotFoundError):
        return []
    if len(found) > most:
        found = [found[round(i * (len(found) - 1) / (most - 1))] for i in range(most)]
    vocabulary = getattr(getattr(datamodule, "tokenizer", None), "tokens", None)  # a text LM's characters; else ids
    names = [vocabulary[int(i)] if vocabulary is not None else str(int(i)) for i in probe[:sentences].reshape(-1)]
    tokens = np.array(names, dtype=str).reshape(sentences, -1)
    parts, threads = [], torch.get_num_threads()
    torch.set_num_threads(1)  # tiny forwards: a second thread only spins (3x slower on a shared 2-core machine)
    try:
        for ckpt in found:
            try:
                net = load_matching_network(ckpt.path, cfg, datamodule)
            except HeadlabError:
                continue
            with torch.no_grad():
                patterns = torch.stack(net(probe, return_patterns=True).patterns, dim=1)  # [batch, layer, head, q, k]
            parts.append({"step": np.int64(ckpt.step), "mean_pattern": patterns[:mean_over].mean(dim=0).numpy(),
                          "patterns": patterns[:sentences].permute(1, 2, 0, 3, 4).numpy().astype(np.float16),
                          "lengths": np.full(sentences, probe.size(1), dtype=np.int64), "tokens": tokens})
    finally:
        torch.set_num_threads(threads)
    return parts


def summary_maps(run: RunDir) -> dict[int, np.ndarray]:
    """The maps a run kept before probe_patterns/: its last (and first) measurement's."""
    if not run.attention_maps_path.is_file():
        return {}
    with np.load(run.attention_maps_path, allow_pickle=False) as z:
        maps = {}
        if "mean_pattern_first" in z.files and "step_first" in z.files:
            maps[int(z["step_first"])] = np.asarray(z["mean_pattern_first"], dtype=np.float64)
        if "mean_pattern" in z.files and "step" in z.files:
            maps[int(z["step"])] = np.asarray(z["mean_pattern"], dtype=np.float64)
        return maps


def _title(run: RunDir) -> str:
    summary = run.summary  # {} when missing or unreadable
    model = summary.get("model") if isinstance(summary.get("model"), dict) else {}
    return str(model.get("name") or summary.get("run_id") or run.path.name)
