"""Interventions during training: do the other heads take over when a head is removed or frozen?

`HeadIntervention` acts once, at the start of training step `step` (after `step` optimiser updates):

- `knockout`: the heads' gates go to 0 (`net.head_gates`, kept in checkpoints): from then on each
  knocked head's output is exactly 0, and it gets no gradient through its V/O.
- `freeze_pattern`: the heads attend as the network did at `step`, for every input (a frozen copy
  of the network computes their patterns; see `HeadlabClassifier.freeze_patterns`); V/O still train.
  The copy's weights travel in this callback's checkpoint state, so a resumed run keeps the freeze.

Before `step` the callback changes nothing: a run is bit-identical to the same seed without it.
At `step` it writes `interventions.json` in the run dir (the trajectory figures draw it as a
vertical line) and its `summary_facts()` go into `summary.json` under `intervention`.
`step: null` never intervenes: the control arm of `sweep=knockout`.

`heads: auto` picks the head at `step` itself: the one whose single-head ablation
(`headlab.interventions.ablation`) raises the loss most on the first `auto_batches` val batches,
measured on the network as it is at that step (eval mode, no gradient, the RNG states restored, so
the run goes on exactly as with that head named). The choice and every head's loss increase are
in `summary.json` (`heads`, `heads_requested: auto`, `auto_dloss`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import lightning as L
import torch

from headlab.errors import ConfigError
from headlab.interventions.ablation import rank_heads, single_head_ablation
from headlab.store import atomic_write_json
from headlab.store.run_dir import INTERVENTIONS as INTERVENTIONS_FILE

KINDS = ("knockout", "freeze_pattern")
AUTO = "auto"


class HeadIntervention(L.Callback):
    """Knock out or freeze `heads` (`[[layer, head], ...]`) at training step `step`.

    n_layers, n_heads: the model's sizes, given by the config so that a head out of range is a
    config error before anything is built. `heads="auto"`: the most important head at `step`
    (see the module docstring), measured on `auto_batches` val batches.
    """

    def __init__(self, kind: str, step: int | None, heads: list[list[int]] | str, n_layers: int, n_heads: int,
                 output_dir: str | None = None, auto_batches: int = 4) -> None:
        if kind not in KINDS:
            raise ConfigError("intervention", kind, f"one of {', '.join(KINDS)}")
        key = f"intervention.{kind}"
        if step is not None and (not isinstance(step, int) or isinstance(step, bool) or step < 0):
            raise ConfigError(f"{key}.step", step, "an integer >= 0 (the training step), or null for no intervention")
        if isinstance(auto_batches, bool) or not isinstance(auto_batches, int) or auto_batches < 1:
            raise ConfigError(f"{key}.auto_batches", auto_batches, "an integer >= 1 (val batches that pick heads=auto)")
        self.auto = heads == AUTO
        self.kind, self.step, self.auto_batches = kind, step, auto_batches
        self.heads = [] if self.auto else _checked_heads(f"{key}.heads", heads, n_layers, n_heads)
        self.auto_dloss: list[list[float]] | None = None
        self.output_dir = Path(output_dir) if output_dir else None
        self.applied_step: int | None = None
        self._frozen_state: dict[str, Any] | None = None  # restored from a checkpoint, applied at train start

    def by_layer(self) -> dict[int, list[int]]:
        layers: dict[int, list[int]] = {}
        for layer, head in self.heads:
            layers.setdefault(layer, []).append(head)
        return layers

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if self.output_dir is None:
            self.output_dir = Path(trainer.default_root_dir)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.kind == "freeze_pattern" and self._frozen_state is not None:  # resumed after the freeze
            pl_module.net.freeze_patterns(self.by_layer(), state=self._frozen_state)
            self._frozen_state = None

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, batch_idx: int) -> None:
        if self.step is None or self.applied_step is not None or trainer.global_step < self.step:
            return
        net = pl_module.net
        if self.auto:
            head, dloss = most_important_head(net, _val_batches(trainer, pl_module.device, self.auto_batches))
            self.heads, self.auto_dloss = [head], [[round(float(v), 6) for v in row] for row in dloss.tolist()]
        if self.kind == "knockout":
            for layer, head in self.heads:
                net.set_head_gate(layer, head, 0.0)
        else:
            net.freeze_patterns(self.by_layer())
        self.applied_step = int(trainer.global_step)
        if trainer.is_global_zero and self.output_dir is not None:
            atomic_write_json(self.output_dir / INTERVENTIONS_FILE, [self.describe()])

    def describe(self) -> dict[str, Any]:
        described = {"kind": self.kind, "step": self.step, "heads": [list(h) for h in self.heads],
                     "applied_step": self.applied_step}
        if self.auto:
            described.update(heads_requested=AUTO, auto_batches=self.auto_batches, auto_dloss=self.auto_dloss)
        return described

    def summary_facts(self) -> dict[str, Any]:
        """What this callback adds to `summary.json`."""
        return {"intervention": self.describe()}

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {"applied_step": self.applied_step, "heads": [list(h) for h in self.heads],
                                 "auto_dloss": self.auto_dloss}
        module = getattr(self, "_module", None)
        if module is not None and module.net.frozen_patterns is not None:
            state["frozen_state"] = module.net.frozen_state()
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if self.applied_step is not None:
            # Fit is over and a saved checkpoint is evaluated (summary.json's best, maybe from before
            # the intervention): the run's facts stay; a checkpoint from before a freeze is scored
            # unfrozen, as it was trained (knockout gates come back with the weights).
            module = getattr(self, "_module", None)
            if state_dict.get("applied_step") is None and module is not None:
                module.net.frozen_patterns = None
            return
        self.applied_step = state_dict.get("applied_step")
        self._frozen_state = state_dict.get("frozen_state")
        if self.auto and self.applied_step is not None:  # the head chosen before the restart
            self.heads = [tuple(h) for h in state_dict.get("heads", [])]
            self.auto_dloss = state_dict.get("auto_dloss")

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._module = pl_module  # state_dict() is called without the module


def most_important_head(net: torch.nn.Module, batches: Sequence[Mapping[str, torch.Tensor]]
                        ) -> tuple[tuple[int, int], torch.Tensor]:
    """((layer, head) whose single-head ablation raises the loss most on `batches`, every head's
    loss increase `[layer, head]`). Ties go to the lower (layer, head). The RNG states are
    restored afterwards, so choosing changes nothing else in the run."""
    devices = [torch.cuda.current_device()] if torch.cuda.is_available() and torch.cuda.is_initialized() else []
    with torch.random.fork_rng(devices=devices):
        dloss = single_head_ablation(net, batches).dloss
    return rank_heads(dloss)[0], dloss


def _val_batches(trainer: L.Trainer, device: torch.device, n: int) -> list[dict[str, torch.Tensor]]:
    """The first `n` val batches on `device` (from the datamodule, else the trainer's val loader)."""
    datamodule = trainer.datamodule
    loader = datamodule.val_dataloader() if datamodule is not None else trainer.val_dataloaders
    if isinstance(loader, Sequence):
        loader = loader[0]
    if loader is None:
        raise ValueError("intervention heads=auto needs validation data to pick the head")
    batches = []
    for batch in loader:
        batches.append({k: v.to(device) for k, v in batch.items() if k in ("input_ids", "attention_mask", "labels")})
        if len(batches) == n:
            break
    return batches


def _checked_heads(key: str, heads: Any, n_layers: int, n_heads: int) -> list[tuple[int, int]]:
    allowed = (f"a list of [layer, head] pairs with 0 <= layer < {n_layers} and 0 <= head < {n_heads}, e.g. [[1, 2]], "
               f"or {AUTO} (the most important head at the step)")
    if isinstance(heads, str) or not isinstance(heads, Sequence) or not heads:  # lists, tuples, ListConfig
        raise ConfigError(key, heads, allowed)
    checked = []
    for pair in heads:
        if (isinstance(pair, str) or not isinstance(pair, Sequence) or len(pair) != 2
                or not all(isinstance(v, int) and not isinstance(v, bool) for v in pair)
                or not (0 <= pair[0] < n_layers and 0 <= pair[1] < n_heads)):
            raise ConfigError(key, heads, allowed)
        checked.append((pair[0], pair[1]))
    if len(set(checked)) != len(checked):
        raise ConfigError(key, heads, "each [layer, head] pair once")
    return checked
