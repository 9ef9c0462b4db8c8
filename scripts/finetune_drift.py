"""Fine-tuning drift per head of MiniLM, over seeds: the numbers of docs/results/finetune_drift.md.

    .venv/bin/python scripts/finetune_drift.py logs/finetune_drift --seeds 0 1 2 3 4

Each seed fine-tunes all-MiniLM-L6-v2 (whole encoder + a linear head on mean-pooled states) on half
of `en_polarity` (100 sentences, stratified, seeded) and measures every head at steps 0, 10, ..., 40
(`headlab.lit.hf_finetune.finetune_drift`: a LightningModule, a drift callback); rows go to `drift.csv`,
per-layer means with 95% t-intervals over seeds to `layers.csv`, the last-layer-vs-rest contrast to
stdout; head importance on the held-out half before (a linear probe on the frozen pretrained encoder)
and after fine-tuning to `importance.csv`, per layer with seed intervals to `importance_layers.csv`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    import numpy as np
    import pandas as pd
    import torch
    from scipy import stats

    torch.set_num_threads(args.threads)
    from headlab.hf import load_encoder, resolve_model_path
    from headlab.hf.drift import DriftSettings
    from headlab.lit.hf_finetune import finetune_drift
    from headlab.hf.texts import load_labeled

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model, tok = load_encoder(resolve_model_path("minilm", None))
    data = load_labeled("en_polarity", None, 0, 0)
    rows, importance = [], []
    for seed in args.seeds:
        drift, imp = finetune_drift(model, tok, data, seed, DriftSettings(steps=args.steps))
        rows += drift
        importance += imp
        print(f"seed {seed}: {rows[-1]['wall_s']} s, held-out acc {rows[-1]['test_acc']:.3f}", file=sys.stderr)
    imp = pd.DataFrame(importance)
    imp.to_csv(out / "importance.csv", index=False)
    _importance_layers(imp, stats).to_csv(out / "importance_layers.csv", index=False)
    print(_importance_layers(imp, stats).round(4).to_string(index=False))
    df = pd.DataFrame(rows)
    df.to_csv(out / "drift.csv", index=False)
    last = df[df.step == df.step.max()]
    per_seed = last.groupby(["seed", "layer"])[["weight_drift", "js_from_pretrained", "role_changed"]].mean().reset_index()
    table = []
    for layer, g in per_seed.groupby("layer"):
        row = {"layer": layer, "n_seeds": len(g)}
        for col in ("weight_drift", "js_from_pretrained", "role_changed"):
            m, se = g[col].mean(), stats.sem(g[col]) if len(g) > 1 else float("nan")
            h = se * stats.t.ppf(0.975, len(g) - 1) if len(g) > 1 else float("nan")
            row.update({f"{col}_mean": m, f"{col}_lo": m - h, f"{col}_hi": m + h})
        table.append(row)
    layers = pd.DataFrame(table)
    layers.to_csv(out / "layers.csv", index=False)
    print(layers.round(5).to_string(index=False))
    top = per_seed.layer.max()
    for col in ("weight_drift", "js_from_pretrained"):  # paired over seeds: last layer minus the mean of the others
        wide = per_seed.pivot(index="seed", columns="layer", values=col)
        diff = wide[top] - wide.drop(columns=top).mean(axis=1)
        ci = stats.t.interval(0.95, len(diff) - 1, loc=diff.mean(), scale=stats.sem(diff)) if len(diff) > 1 else (np.nan, np.nan)
        rank = wide.rank(axis=1, ascending=False)[top]
        print(f"{col}: last layer minus the others {diff.mean():.5f} [95% CI {ci[0]:.5f}, {ci[1]:.5f}] over "
              f"{len(diff)} seeds; last layer ranked first in {int((rank == 1).sum())} of {len(diff)} seeds")
    print(f"held-out acc at step {df.step.max()}: {last.groupby('seed').test_acc.first().round(3).tolist()}")
    return 0


def _importance_layers(imp, stats):
    """Per layer: the mean over seeds of each seed's layer mean of the ablation loss increase, before and
    after fine-tuning and after minus before (paired over seeds), with 95 % t-intervals; and the share of
    the positive ablation effect each layer holds (how importance moves between layers)."""
    import pandas as pd

    per_seed = imp.groupby(["seed", "when", "layer"]).ablation_dloss.mean().unstack("when").reset_index()
    per_seed["change"] = per_seed["after"] - per_seed["before"]
    for when in ("before", "after"):
        positive = imp[imp.when == when].assign(pos=lambda d: d.ablation_dloss.clip(lower=0))
        share = positive.groupby(["seed", "layer"]).pos.sum() / positive.groupby("seed").pos.sum()
        per_seed[f"share_{when}"] = share.reindex(pd.MultiIndex.from_frame(per_seed[["seed", "layer"]])).to_numpy()
    rows = []
    for layer, g in per_seed.groupby("layer"):
        row = {"layer": layer, "n_seeds": len(g)}
        for col in ("before", "after", "change", "share_before", "share_after"):
            m = g[col].mean()
            h = stats.sem(g[col]) * stats.t.ppf(0.975, len(g) - 1) if len(g) > 1 else float("nan")
            row.update({f"{col}_mean": m, f"{col}_lo": m - h, f"{col}_hi": m + h})
        rows.append(row)
    return pd.DataFrame(rows)


if __name__ == "__main__":
    sys.exit(main())
