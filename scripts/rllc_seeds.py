#!/usr/bin/env python3
"""Issue 32 item 7 over seeds: do rLLC curves sort heads by role, and do their stages meet the onsets?

    .venv/bin/python scripts/rllc_seeds.py RUN_DIR [RUN_DIR ...] [--json OUT.json]

Each RUN_DIR is one seed's `headlab-train experiment=induction` run on which `headlab-llc` has written
`rllc` rows (head_metrics.parquet) and llc.parquet. Reads roles (`lm.final_roles`), onsets
(`lm.induction_onset_steps`) and the loss drop from summary.json; the statistics are
`headlab.analysis.llc_roles` (clusters, ARI and its permutation null, stage dates) and
`headlab.stats.intervals` (t over seeds). Prints the tables of docs/results/2026-12-03-rllc-seeds.md;
--json writes every number. A folder without rLLC rows or an LM summary is one line, exit 2.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

from headlab.analysis.llc_roles import (
    combined_ari_p,
    half_rise_step,
    role_separation,
    steepest_rise_step,
)
from headlab.errors import HeadlabError
from headlab.stats.intervals import mean_ci, paired_ci, prediction_interval
from headlab.store import RunDir
from headlab.store.tables import read_parquet_file, read_table

ROLE_PAIR = ("previous", "induction")


def seed_record(path: Path, steps: list[int] | None = None) -> dict:
    """One run's curves, roles, layers and dates, as plain arrays; `steps`: only these sampled steps (every
    seed on one grid, so the stage dates and curve shapes compare), each of which the run must have."""
    run = RunDir(path)
    lm = run.require_summary().get("lm")
    if not isinstance(lm, dict) or "final_roles" not in lm:
        raise HeadlabError(f"{path}: summary.json has no lm.final_roles (not an experiment=induction run?)")
    table = read_table(run.head_metrics_path)
    rllc = table[table.metric == "rllc"]
    if rllc.empty:
        raise HeadlabError(f"{path}: no rllc rows in head_metrics.parquet (run headlab-llc on it first)")
    wide = rllc.pivot_table(index=["layer", "head"], columns="step", values="value").sort_index()
    if steps is not None:
        missing = sorted(set(steps) - set(int(c) for c in wide.columns))
        if missing:
            raise HeadlabError(f"{path}: no rllc rows at step(s) {missing}; it has {[int(c) for c in wide.columns]}")
        wide = wide[sorted(steps)]
    heads = [f"L{layer}H{head}" for layer, head in wide.index]
    roles = {f"L{li}H{hi}": role for li, layer in enumerate(lm["final_roles"]) for hi, role in enumerate(layer)}
    estimates = read_parquet_file(run.path / "llc.parquet")
    head_rows = estimates[estimates["head"] >= 0]
    if steps is not None:
        head_rows = head_rows[head_rows.step.isin(steps)]
    not_flat = int((~head_rows["flat"].astype(bool)).sum()) if "flat" in head_rows else 0
    whole = estimates
    whole = whole[(whole["layer"] == -1) & (whole["head"] == -1)].sort_values("step")
    if steps is not None:
        whole = whole[whole.step.isin(steps)]
    return {"seed": run.path.name, "steps": [int(s) for s in wide.columns], "heads": heads,
            "layers": [int(layer) for layer, _ in wide.index], "roles": [roles[h] for h in heads],
            "curves": wide.to_numpy(dtype=np.float64), "onsets": lm.get("induction_onset_steps") or {},
            "midpoints": lm.get("induction_midpoint_steps") or {},
            "loss_drop": lm.get("loss_drop_step"), "n_estimates": int(len(head_rows)), "not_flat": not_flat,
            "llc_steps": whole.step.astype(int).tolist(), "llc": whole.value.astype(float).tolist()}


def separation(rec: dict, keep: list[int], roles: list[str], k: int, normalise: bool = True) -> dict | None:
    """role_separation on the rows `keep` with the given roles; None when fewer than 2 roles are present."""
    if len(set(roles)) < 2 or len(keep) < 3:
        return None
    r = role_separation(rec["curves"][keep], roles, [rec["layers"][i] for i in keep], k=k, normalise=normalise,
                        seed=0)
    return {"ari": r.ari, "null_mean": r.null_mean, "null_q95": r.null_q95, "p": r.p_value, "k": r.k,
            "n_heads": r.n_heads, "layer_ari": r.layer_ari, "labels": list(r.labels), "roles": roles,
            "heads": [rec["heads"][i] for i in keep], "null": r.null}


def analyse(rec: dict) -> dict:
    pair = [i for i, role in enumerate(rec["roles"]) if role in ROLE_PAIR]
    layer1 = [i for i, layer in enumerate(rec["layers"]) if layer == 1]
    out = {
        "primary": separation(rec, pair, [rec["roles"][i] for i in pair], 2),
        "raw": separation(rec, pair, [rec["roles"][i] for i in pair], 2, normalise=False),
        "all": separation(rec, list(range(len(rec["heads"]))), rec["roles"], len(set(rec["roles"]))),
        "layer1": separation(rec, layer1, ["induction" if rec["roles"][i] == "induction" else "not" for i in layer1], 2),
    }
    stages = {}
    for i, head in enumerate(rec["heads"]):
        onset = rec["onsets"].get(head)
        stages[head] = {"role": rec["roles"][i], "onset": onset,
                        "steepest": steepest_rise_step(rec["steps"], rec["curves"][i]),
                        "half": half_rise_step(rec["steps"], rec["curves"][i])}
    formed = [h for h, s in stages.items() if s["onset"] is not None]
    out["stages"] = stages
    out["d_steepest"] = float(np.mean([stages[h]["steepest"] - stages[h]["onset"] for h in formed])) if formed else math.nan
    out["d_half"] = float(np.mean([stages[h]["half"] - stages[h]["onset"] for h in formed])) if formed else math.nan
    out["n_onsets"] = len(formed)
    # exploratory (not in the method fixed beforehand): against the change-point midpoint, and the
    # previous-token heads' stage against the induction heads' within the seed
    mids = [h for h in formed if rec["midpoints"].get(h) is not None]
    out["d_steepest_midpoint"] = (float(np.mean([stages[h]["steepest"] - rec["midpoints"][h] for h in mids]))
                                  if mids else math.nan)
    prev = [s["steepest"] for s in stages.values() if s["role"] == "previous"]
    ind = [s["steepest"] for s in stages.values() if s["role"] == "induction"]
    out["prev_minus_induction_stage"] = float(np.mean(prev) - np.mean(ind)) if prev and ind else math.nan
    whole = steepest_rise_step(rec["llc_steps"], rec["llc"]) if len(rec["llc"]) >= 2 else math.nan
    out["llc_stage"] = whole
    out["llc_minus_drop"] = whole - rec["loss_drop"] if rec["loss_drop"] is not None else math.nan
    return out


def _fmt(x: float, digits: int = 2) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:,.{digits}f}"


def _ci(values: list[float], digits: int = 2, bounds: tuple[float, float] = (-np.inf, np.inf)) -> str:
    """Mean [95 % t-interval over seeds]; every seed equal is said in words, never a zero-width interval."""
    c = mean_ci(values, bounds=bounds)
    finite = [v for v in values if v is not None and np.isfinite(v)]
    if len(finite) >= 2 and np.ptp(finite) == 0:
        return f"{_fmt(c.mean, digits)} in every seed (n = {c.n}; no spread, so no t-interval)"
    return f"{_fmt(c.mean, digits)} [{_fmt(c.low, digits)}, {_fmt(c.high, digits)}] (n = {c.n})"


def report(records: list[dict], results: list[dict]) -> tuple[str, dict]:
    lines, summary = [], {}
    for name, title in (("primary", "previous vs induction heads, k = 2 (primary)"),
                        ("raw", "the same, curves not normalised"),
                        ("all", "all 8 heads, k = number of distinct roles"),
                        ("layer1", "layer 1 only: induction vs not, k = 2")):
        lines += [f"### {title}", "", "| seed | heads (role: cluster) | ARI | shuffled mean | shuffled 95th pct | p | layer-split ARI |",
                  "|---|---|---|---|---|---|---|"]
        got = [(rec, res[name]) for rec, res in zip(records, results)]
        for rec, s in got:
            if s is None:
                lines.append(f"| {rec['seed']} | not testable (fewer than 2 roles) | | | | | |")
                continue
            who = ", ".join(f"{h} {r[:4]}: {c}" for h, r, c in zip(s["heads"], s["roles"], s["labels"]))
            lines.append(f"| {rec['seed']} | {who} | {_fmt(s['ari'])} | {_fmt(s['null_mean'])} | {_fmt(s['null_q95'])} "
                         f"| {s['p']:.4f} | {_fmt(s['layer_ari'])} |")
        ok = [s for _, s in got if s is not None]
        if len(ok) >= 1:
            aris = [s["ari"] for s in ok]
            excess = paired_ci([s["ari"] - s["null_mean"] for s in ok])
            p = combined_ari_p(aris, [s["null"] for s in ok])
            layer = [s["layer_ari"] for s in ok]
            lines += ["", f"- mean ARI over seeds: {_ci(aris, bounds=(-1.0, 1.0))} (95 % t-interval, seeds the unit)",
                      f"- ARI minus the seed's shuffled mean: {_fmt(excess.estimate)} [{_fmt(excess.low)}, {_fmt(excess.high)}] ({excess.method})",
                      f"- combined p (sum of ARIs against sums of per-seed shuffles, 10,000 draws): {p:.4f}",
                      f"- layer-split ARI on the same heads: {_ci(layer, bounds=(-1.0, 1.0))}", ""]
            summary[name] = {"aris": aris, "mean_ci": mean_ci(aris).__dict__, "excess": excess.__dict__,
                             "combined_p": p, "layer_aris": layer, "n_seeds": len(ok)}
        else:
            lines += ["", "- no seed testable", ""]
    lines += ["### Stages (rLLC steepest rise, half rise) against induction onsets", "",
              "| seed | head | role | onset | steepest rise | half rise |", "|---|---|---|---|---|---|"]
    for rec, res in zip(records, results):
        for head, s in res["stages"].items():
            if s["onset"] is not None or s["role"] in ROLE_PAIR:
                lines.append(f"| {rec['seed']} | {head} | {s['role']} | {s['onset'] if s['onset'] is not None else '-'} "
                             f"| {_fmt(s['steepest'], 0)} | {_fmt(s['half'], 0)} |")
    d1 = [r["d_steepest"] for r in results]
    d2 = [r["d_half"] for r in results]
    dw = [r["llc_minus_drop"] for r in results]
    pi1, pi2 = prediction_interval(d1), prediction_interval(d2)
    lines += ["", "| seed | head estimates | not flat |", "|---|---|---|"]
    lines += [f"| {rec['seed']} | {rec['n_estimates']} | {rec['not_flat']} |" for rec in records]
    lines += ["", "| seed | heads with an onset | mean (steepest - onset) | mean (half - onset) | whole-model LLC steepest | loss drop | LLC - drop |",
              "|---|---|---|---|---|---|---|"]
    for rec, res in zip(records, results):
        lines.append(f"| {rec['seed']} | {res['n_onsets']} | {_fmt(res['d_steepest'], 0)} | {_fmt(res['d_half'], 0)} "
                     f"| {_fmt(res['llc_stage'], 0)} | {rec['loss_drop']} | {_fmt(res['llc_minus_drop'], 0)} |")
    lines += ["", f"- steepest rise - onset: mean {_ci(d1, 0)}; new seed {_fmt(pi1.low, 0)} to {_fmt(pi1.high, 0)}",
              f"- half rise - onset: mean {_ci(d2, 0)}; new seed {_fmt(pi2.low, 0)} to {_fmt(pi2.high, 0)}",
              f"- whole-model LLC steepest rise - loss-drop start: mean {_ci(dw, 0)}"]
    dm = [r["d_steepest_midpoint"] for r in results]
    dp = [r["prev_minus_induction_stage"] for r in results]
    lines += ["", "Exploratory (not in the method fixed beforehand):",
              f"- steepest rise - change-point midpoint (`induction_midpoint_steps`, heads that have one): mean {_ci(dm, 0)}",
              f"- previous-token heads' steepest rise - induction heads' (means within the seed): mean {_ci(dp, 0)}",
              "  per seed: " + ", ".join(f"{rec['seed']} {_fmt(v, 0)}" for rec, v in zip(records, dp))]
    summary["exploratory"] = {"d_steepest_midpoint": dm, "prev_minus_induction_stage": dp}
    summary["stages"] = {"d_steepest": d1, "d_steepest_ci": mean_ci(d1).__dict__, "d_steepest_pi": pi1.__dict__,
                         "d_half": d2, "d_half_ci": mean_ci(d2).__dict__, "d_half_pi": pi2.__dict__,
                         "llc_minus_drop": dw, "llc_minus_drop_ci": mean_ci(dw).__dict__}
    return "\n".join(lines), summary


ROLE_COLOURS = {"previous": "#1f77b4", "induction": "#d62728", "duplicate": "#2ca02c", "other": "#7f7f7f"}


def draw(records: list[dict], results: list[dict], path: Path) -> None:
    """One panel per seed: every head's rLLC divided by its largest |value| (what is clustered), coloured by
    its final role, layer 0 dashed; each induction onset as a dotted tick in the head's role colour."""
    import os
    import tempfile

    os.environ.setdefault("MPLCONFIGDIR", tempfile.mkdtemp(prefix="rllc_seeds-mpl-"))  # never the home directory
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(records), figsize=(3.2 * len(records), 3.0), sharey=True, squeeze=False)
    for ax, rec, res in zip(axes[0], records, results):
        scale = np.abs(rec["curves"]).max(axis=1, keepdims=True)
        for i, head in enumerate(rec["heads"]):
            colour = ROLE_COLOURS.get(rec["roles"][i], "#000000")
            ax.plot(rec["steps"], rec["curves"][i] / scale[i], color=colour, ls="--" if rec["layers"][i] == 0 else "-",
                    marker="o", ms=3, lw=1.2, label=f"{head} {rec['roles'][i]}")
            onset = res["stages"][head]["onset"]
            if onset is not None:
                ax.axvline(onset, color=colour, ls=":", lw=0.8)
        ax.set_title(f"{rec['seed']}", fontsize=10)
        ax.set_xlabel("step")
        ax.legend(fontsize=5.5, loc="lower right")
    axes[0][0].set_ylabel("rLLC / its max")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--json", type=Path, default=None, help="write every number here")
    parser.add_argument("--figure", type=Path, default=None, help="draw the normalised curves per seed here (png)")
    parser.add_argument("--steps", type=lambda v: [int(x) for x in v.split(",")], default=None,
                        help="comma-separated sampled steps to keep (the grid every seed has), e.g. 200,600,1000")
    args = parser.parse_args(argv)
    try:
        records = [seed_record(p, args.steps) for p in args.runs]
    except (HeadlabError, FileNotFoundError, OSError) as err:
        print(f"rllc_seeds: {err}", file=sys.stderr)
        return 2
    results = [analyse(r) for r in records]
    text, summary = report(records, results)
    print(text)
    if args.figure:
        draw(records, results, args.figure)
    if args.json:
        def plain(x):
            if isinstance(x, np.ndarray):
                return x.tolist()
            if isinstance(x, (np.floating, np.integer)):
                return x.item()
            return str(x)
        per_seed = [{"seed": rec["seed"], "steps": rec["steps"], "heads": rec["heads"], "roles": rec["roles"],
                     "curves": rec["curves"], "llc": rec["llc"], "not_flat": rec["not_flat"],
                     "n_estimates": rec["n_estimates"],
                     **{k: ({kk: vv for kk, vv in v.items() if kk != "null"} if isinstance(v, dict) and "null" in v else v)
                        for k, v in res.items()}} for rec, res in zip(records, results)]
        args.json.write_text(json.dumps({"seeds": per_seed, "summary": summary}, indent=1, default=plain))
    return 0


if __name__ == "__main__":
    sys.exit(main())
