"""An LM run records how far each head moved and how much gradient it took (`cum_grad_norm`,
`dist_from_init` in head_metrics.parquet), as a classifier run does: the summed gradient norms equal
norms taken by hand from the projections' raw `.grad` slices, and both start at 0 at step 0."""

from __future__ import annotations

import lightning as L
import numpy as np
import pandas as pd
import pytest
import torch
from omegaconf import open_dict

from tests._runs import compose_train_config, train_keeping_threads

pytestmark = pytest.mark.usefixtures("one_thread")

TINY_LM = ["experiment=induction", "trainer.max_steps=8", "data.n_train=256", "data.n_eval=64", "data.probe_size=8",
           "callbacks.lm_metrics.every_n_steps=4", "trainer.enable_model_summary=false", "threads=1", "model.n_heads=2",
           "callbacks.lm_metrics.standard_probe_size=0"]


class HandGradNorms(L.Callback):
    """Per-head gradient norms from the raw weight gradients, summed until each measured step."""

    sums: dict[int, np.ndarray] = {}

    def __init__(self) -> None:
        self.total = None
        HandGradNorms.sums = {}

    def on_after_backward(self, trainer, pl_module) -> None:
        rows = []
        for block in pl_module.net.blocks:
            attn, d = block.attn, block.attn.d_head
            heads = []
            for h in range(attn.n_heads):
                rows_in = slice(h * d, (h + 1) * d)
                squares = sum(float(p.weight.grad[rows_in].pow(2).sum()) for p in (attn.q_proj, attn.k_proj, attn.v_proj))
                squares += float(attn.out_proj.weight.grad[:, rows_in].pow(2).sum())
                heads.append(squares ** 0.5)
            rows.append(heads)
        step = np.array(rows)
        self.total = step if self.total is None else self.total + step

    def on_train_batch_end(self, trainer, pl_module, *args) -> None:
        HandGradNorms.sums[int(trainer.global_step)] = self.total.copy()


def test_an_lm_run_records_each_heads_gradient_and_distance_moved(tmp_path):
    cfg = compose_train_config(tmp_path / "run", TINY_LM)
    with open_dict(cfg):
        cfg.callbacks.hand = {"_target_": f"{__name__}.HandGradNorms"}
    train_keeping_threads(cfg)
    rows = pd.read_parquet(tmp_path / "run" / "head_metrics.parquet")
    steps = sorted(rows["step"].unique())
    assert steps == [0, 4, 8]
    for metric in ("cum_grad_norm", "dist_from_init"):
        at = rows[rows["metric"] == metric].pivot_table(index="step", columns=["layer", "head"], values="value")
        assert (at.loc[0] == 0).all() and (at.loc[8] > 0).all(), metric
    grad = rows[rows["metric"] == "cum_grad_norm"]
    for step in (4, 8):
        recorded = grad[grad["step"] == step].sort_values(["layer", "head"])["value"].to_numpy()
        np.testing.assert_allclose(recorded, HandGradNorms.sums[step].reshape(-1), rtol=1e-5)
    assert torch.get_num_threads() == 1


def test_an_lm_run_records_each_layers_head_pairs_for_the_redundancy_tables(tmp_path):
    """head_pairs.parquet: per measured step and layer, a js and a corr matrix over the heads (js 0
    and corr 1 on the diagonal), which the sweep's near-duplicate table reads at the last step."""
    from headlab.analysis.redundancy import pair_table_redundancy

    train_keeping_threads(compose_train_config(tmp_path / "run", TINY_LM))
    pairs = pd.read_parquet(tmp_path / "run" / "head_pairs.parquet")
    assert sorted(pairs["step"].unique()) == [0, 4, 8] and set(pairs["metric"]) == {"js", "corr"}
    assert len(pairs) == 3 * 2 * 2 * (2 * 2)  # steps x layers x metrics x head pairs
    diagonal = pairs[pairs["head_a"] == pairs["head_b"]]
    assert np.allclose(diagonal[diagonal["metric"] == "js"]["value"], 0, atol=1e-9)
    assert np.allclose(diagonal[diagonal["metric"] == "corr"]["value"], 1)
    off = pairs[(pairs["head_a"] != pairs["head_b"]) & (pairs["metric"] == "js")]
    assert (off["value"] > 0).all()
    found = pair_table_redundancy(pairs)
    assert found["step"] == 8 and found["n_heads"] == 4
