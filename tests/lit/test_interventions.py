"""Knockout and freeze_pattern during training: nothing changes before step t, exactly what is named after."""

from __future__ import annotations

import functools
import json

import lightning as L
import matplotlib.lines
import pandas as pd
import pytest
import torch
from torch.utils.data import DataLoader

from headlab.tasks.train import train
from headlab.errors import ConfigError
from headlab.lit import HeadClassifierModule
from headlab.lit.callbacks.interventions import HeadIntervention
from headlab.model import ModelConfig
from headlab.plots.trajectories import build_metric_trajectories_figure
from tests._runs import TINY, compose_train_config

CONFIG = dict(vocab_size=12, n_classes=2, max_len=10, d_model=16, n_heads=2, n_layers=2, dropout=0.1)
T = 3


def _batches(n: int = 8) -> list[dict[str, torch.Tensor]]:
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 12, (n, 4, 10), generator=generator)
    ids[:, :, 0] = 1
    labels = (ids[:, :, 3] > 7).long()
    return [{"input_ids": i, "attention_mask": torch.ones_like(i, dtype=torch.bool), "labels": y} for i, y in zip(ids, labels)]


class _Record(L.Callback):
    """The network's weights after every step, and head (0, 1)'s hook_z in every training forward."""

    def __init__(self) -> None:
        self.weights: list[dict[str, torch.Tensor]] = []
        self.z: list[float] = []

    def on_fit_start(self, trainer, pl_module) -> None:
        pl_module.net.blocks[0].attn.hook_z.register_forward_hook(
            lambda m, a, out: self.z.append(out[:, :, 1].abs().max().item()) if pl_module.training else None)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.weights.append({k: v.detach().clone() for k, v in pl_module.net.state_dict().items()})


def _fit(*callbacks: L.Callback, steps: int = 6) -> HeadClassifierModule:
    L.seed_everything(0)
    module = HeadClassifierModule(ModelConfig(**CONFIG), optimizer=functools.partial(torch.optim.AdamW, lr=1e-2))
    trainer = L.Trainer(max_steps=steps, accelerator="cpu", logger=False, enable_checkpointing=False, callbacks=list(callbacks),
                        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0, default_root_dir="/nonexistent")
    trainer.fit(module, DataLoader(_batches(), batch_size=None))
    return module


def _intervention(kind: str, step: int | None = T, heads=((0, 1),), tmp_path=None) -> HeadIntervention:
    return HeadIntervention(kind, step, [list(h) for h in heads], n_layers=2, n_heads=2, output_dir=str(tmp_path) if tmp_path else None)


def _equal(a: dict, b: dict) -> bool:
    return all(torch.equal(a[k], b[k]) for k in a)


def test_knockout_changes_nothing_before_t_and_silences_the_head_from_t(tmp_path):
    plain, knocked = _Record(), _Record()
    _fit(plain)
    module = _fit(knocked, _intervention("knockout", tmp_path=tmp_path))
    assert all(_equal(a, b) for a, b in zip(plain.weights[:T], knocked.weights[:T]))  # states after steps 1..T
    assert not _equal(plain.weights[T], knocked.weights[T])
    assert all(z > 0 for z in knocked.z[:T]) and all(z == 0.0 for z in knocked.z[T:])
    assert module.net.head_gates.tolist() == [[1.0, 0.0], [1.0, 1.0]]
    assert json.loads((tmp_path / "interventions.json").read_text()) == [
        {"kind": "knockout", "step": T, "heads": [[0, 1]], "applied_step": T}]


def test_step_null_is_the_untouched_control():
    plain, control = _Record(), _Record()
    _fit(plain)
    _fit(control, _intervention("knockout", step=None))
    assert all(_equal(a, b) for a, b in zip(plain.weights, control.weights))


def test_freeze_pattern_holds_the_heads_pattern_at_t_for_every_input_while_others_move():
    recorder = _Record()
    module = _fit(recorder, _intervention("freeze_pattern", heads=[(1, 0)]), steps=8)
    probe = _batches()[0]
    reference = HeadClassifierModule(ModelConfig(**CONFIG))  # the network as it was at step T
    reference.net.load_state_dict(recorder.weights[T - 1])
    at_t = reference.net.eval()(probe["input_ids"], probe["attention_mask"], return_patterns=True).patterns
    now = module.net.eval()(probe["input_ids"], probe["attention_mask"], return_patterns=True).patterns
    assert torch.equal(now[1][:, 0], at_t[1][:, 0])
    assert (now[1][:, 1] - at_t[1][:, 1]).abs().max() > 1e-3  # an unfrozen head kept learning


def test_a_resumed_run_keeps_the_frozen_pattern():
    callback = _intervention("freeze_pattern", heads=[(0, 0)])
    module = _fit(callback)
    state = callback.state_dict()
    assert state["applied_step"] == T and "frozen_state" in state
    resumed_callback = _intervention("freeze_pattern", heads=[(0, 0)])
    resumed_callback.load_state_dict(state)
    resumed = HeadClassifierModule(ModelConfig(**CONFIG))
    resumed.net.load_state_dict(module.net.state_dict())
    resumed_callback.on_train_start(None, resumed)
    probe = _batches()[1]
    patterns = [m.net.eval()(probe["input_ids"], probe["attention_mask"], return_patterns=True).patterns[0][:, 0]
                for m in (module, resumed)]
    assert torch.equal(*patterns)


@pytest.mark.parametrize("heads", [[[2, 0]], [[0, 2]], [[-1, 0]], [[0]], [], [[0, 1], [0, 1]], "0,1"])
def test_heads_out_of_range_or_malformed_are_one_line_config_errors(heads):
    with pytest.raises(ConfigError) as info:
        HeadIntervention("knockout", 5, heads, n_layers=2, n_heads=2)
    assert str(info.value).startswith("invalid config intervention.knockout.heads=") and "\n" not in str(info.value)


def test_freezing_a_hard_templated_head_is_refused():
    module = HeadClassifierModule(ModelConfig(**CONFIG, template=[["previous", "free"], ["free", "free"]]))
    with pytest.raises(ValueError, match="hard template"):
        module.net.freeze_patterns({0: [0]})


def test_trajectory_figure_draws_the_intervention_step():
    table = pd.DataFrame([(s, 0, h, "entropy_norm", 0.5 + 0.01 * s * h) for s in (0, 10, 20) for h in (0, 1)],
                         columns=["step", "layer", "head", "metric", "value"])
    figure = build_metric_trajectories_figure(table, metrics=["entropy_norm"], events=[(10, "knockout [[0, 1]]")])
    vertical = [line for line in figure.axes[0].get_lines()
                if isinstance(line, matplotlib.lines.Line2D) and list(line.get_xdata()) == [10, 10]]
    assert len(vertical) == 1


def test_a_run_with_a_knockout_records_it_in_summary_and_figures(tmp_path):
    run = tmp_path / "run"
    summary = train(compose_train_config(run, TINY + ["figures=true", "intervention=knockout", "intervention.knockout.step=2",
                                                      "intervention.knockout.heads=[[1,1]]", "test=false"]))
    assert summary["intervention"] == {"kind": "knockout", "step": 2, "heads": [[1, 1]], "applied_step": 2}
    assert json.loads((run / "summary.json").read_text())["intervention"]["applied_step"] == 2
    assert (run / "figures" / "metric_trajectories.png").is_file()


def test_a_head_out_of_range_stops_the_run_before_anything_is_written(tmp_path):
    run = tmp_path / "bad"
    with pytest.raises(ConfigError, match=r"intervention.knockout.heads=\[\[1, 2\]\]"):
        train(compose_train_config(run, TINY + ["intervention=knockout", "intervention.knockout.heads=[[1,2]]"]))
    assert not run.exists() or not (run / "checkpoints").exists()
