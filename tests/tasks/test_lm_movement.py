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
