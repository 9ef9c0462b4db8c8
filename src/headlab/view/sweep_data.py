"""A sweep's runs -> the data of its page: per config the head-to-head divergence over training with
its seed band, and each seed's heads at the last measurement, aligned to the config's first seed by
the cross-seed matching (`headlab.sweep.matching`, the one `sweep_matches.csv` uses), so that a
head of seed 1 sits under the head of seed 0 that does the same thing, when one does.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import pandas as pd

from headlab.analysis.roles import ROLES
from headlab.errors import DataError
from headlab.store import SweepDir
from headlab.store.probe_patterns import read_pattern_parts
from headlab.sweep.matching import config_finals, match_layer
from headlab.sweep.runs import Run, discover_runs
from headlab.view.encode import quantize
from headlab.view.load import summary_maps

DIVERGENCE = "js"  # Jensen-Shannon divergence of two heads' maps (head_pairs.parquet)


def divergence_curve(head_pairs: pd.DataFrame) -> pd.Series:
    """step -> mean JS between distinct heads of a layer, averaged over the layers (one run).

    >>> pairs = pd.DataFrame({"step": [0] * 4 + [5] * 4, "layer": 0, "head_a": [0, 0, 1, 1] * 2,
    ...                       "head_b": [0, 1, 0, 1] * 2, "metric": "js", "value": [0, .1, .1, 0, 0, .3, .3, 0]})
    >>> divergence_curve(pairs).to_dict()
    {0: 0.1, 5: 0.3}
    """
    rows = head_pairs[(head_pairs["metric"] == DIVERGENCE) & (head_pairs["head_a"] != head_pairs["head_b"])]
    return rows.groupby(["step", "layer"])["value"].mean().groupby("step").mean()


def config_curve(curves: Sequence[pd.Series]) -> dict[str, list]:
    """Seeds' curves -> steps, mean, min and max over the seeds measured at each step."""
    table = pd.concat(curves, axis=1).sort_index()
    clean = lambda s: [None if not math.isfinite(v) else round(float(v), 6) for v in s]  # noqa: E731
    return {"steps": [int(s) for s in table.index], "mean": clean(table.mean(axis=1)), "lo": clean(table.min(axis=1)),
            "hi": clean(table.max(axis=1))}


def sweep_page_data(runs: Sequence[Run], maps: dict[str, np.ndarray], title: str = "sweep") -> dict[str, Any]:
    """The page data of a sweep's usable `runs`; `maps`: job -> last mean maps `[layer, head, P, P]`."""
    usable = [r for r in runs if r.usable and r.head_metrics is not None and not r.head_metrics.empty]
    if not usable:
        raise DataError("sweep", "has no usable run with head metrics to show")
    groups: dict[str, list[Run]] = {}
    for run in usable:
        groups.setdefault(run.config, []).append(run)
    notes, configs = [], []
    for label, members in groups.items():
        members = sorted(members, key=lambda r: (r.seed is None, r.seed, r.job))
        curves = [divergence_curve(r.head_pairs).rename(r.job) for r in members if r.head_pairs is not None]
        entry: dict[str, Any] = {"label": label, "n_seeds": len(members), **(config_curve(curves) if curves else
                                 {"steps": [], "mean": [], "lo": [], "hi": []})}
        entry["grid"], failed = _aligned_grid(members, maps)
        notes += [f"{label}: {why}" for why in failed]
        configs.append(entry)
    skipped = len(runs) - len(usable)
    if skipped:
        notes.append(f"{skipped} of {len(runs)} jobs not usable (see aggregate/sweep_runs.csv)")
    return {"kind": "sweep", "title": title, "notes": notes, "configs": configs}


def _aligned_grid(members: list[Run], maps: dict[str, np.ndarray]) -> tuple[dict[str, Any] | None, list[str]]:
    with_maps = [r for r in members if r.job in maps]
    if not with_maps:
        return None, []
    shapes = {maps[r.job].shape for r in with_maps}
    if len(shapes) != 1:
        return None, [f"seeds have maps of different shapes {sorted(shapes)}: no aligned grid"]
    n_layers, n_heads, size, _ = shapes.pop()
    finals = config_finals(with_maps)
    base, order, roles, failed = with_maps[0].job, [], [], []
    for run in with_maps:
        layers = []
        for layer in range(n_layers):
            perm = list(range(n_heads))
            if run.job != base:
                try:
                    perm = [int(p) for p in match_layer(finals, base, run.job, layer).permutation]
                except DataError as err:
                    failed.append(f"job {run.job} layer {layer} not matched ({err}): heads in index order")
            layers.append(perm)
        order.append(layers)
        final = finals[run.job]["role"] if "role" in finals[run.job] else None
        roles.append([None if final is None or not math.isfinite(final.get((l, h), math.nan))
                      else ROLES[int(final[(l, h)])] for l in range(n_layers) for h in range(n_heads)])
    data, scale = quantize(np.stack([maps[r.job] for r in with_maps]))
    seeds = [f"seed {r.seed}" if r.seed is not None else f"job {r.job}" for r in with_maps]
    return {"seeds": seeds, "jobs": [r.job for r in with_maps], "n_layers": n_layers, "n_heads": n_heads, "size": size,
            "order": order, "roles": roles, "data": data, "scale": scale}, failed


def read_sweep(sweep: SweepDir) -> dict[str, Any]:
    """The page data of a multirun folder."""
    runs = discover_runs(sweep)
    maps = {}
    for run in runs:
        if not run.usable:
            continue
        parts = read_pattern_parts(run.files.probe_patterns_dir)
        last = {int(p["step"]): p["mean_pattern"].astype(np.float64) for p in parts} or summary_maps(run.files)
        if last:
            maps[run.job] = last[max(last)]
    return sweep_page_data(runs, maps, title=sweep.path.name)
