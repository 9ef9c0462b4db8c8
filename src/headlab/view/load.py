"""Read what a run directory holds for its page (`RunDir` names every file)."""

from __future__ import annotations

from typing import Any

import numpy as np

from headlab.errors import DataError
from headlab.store import RunDir, read_table
from headlab.store.probe_patterns import read_pattern_parts
from headlab.view.run_data import run_page_data

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
    maps = {int(p["step"]): p["mean_pattern"].astype(np.float64) for p in parts}
    notes = []
    if not maps:
        maps = summary_maps(run)
        if maps:
            notes.append("mean maps at the first and last measurement only (attention_maps.npz): the slider shows "
                         "the nearest stored map at other steps")
    lm = run.summary.get("lm") if isinstance(run.summary.get("lm"), dict) else None
    if not parts:
        notes.append(NO_TOKEN_VIEW_LM if lm is not None else NO_TOKEN_VIEW)
    return run_page_data(metrics, pairs, maps, parts, importance, title=_title(run), notes=notes, lm=lm)


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
