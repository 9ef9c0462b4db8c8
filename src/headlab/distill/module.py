"""`DistillModule`: a headlab training run whose student also learns from a frozen teacher.

Loss = CE + alpha * KD(logits, temperature) + beta * attention loss, each term logged on its own
(`train/loss_ce`, `train/loss_kd`, `train/loss_attn`; `train/loss` is the total). Everything else
(validation, test, checkpoints, head measurement, summary.json) is `HeadClassifierModule`'s, so a
distilled student is an ordinary run dir that sweeps and `headlab-aggregate` read unchanged.

The teacher is not a submodule: it is not in the student's checkpoints (they load with
`load_network` like any run's), and with alpha = beta = 0 the training step is the parent's, so
the run is bit-identical to a plain `headlab-train` run of the same seed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Iterator, Literal

import torch
import torch.nn.functional as F

from headlab.data.datamodule import UNLABELLED
from headlab.distill.maps import layer_map as make_layer_map
from headlab.distill.teacher import check_vocabulary, load_teacher
from headlab.distill.transfer import attention_transfer, check_head_map, logit_kd, points_needed
from headlab.errors import ConfigError
from headlab.lit.module import HeadClassifierModule
from headlab.model import ModelConfig


class DistillModule(HeadClassifierModule):
    """Cross-entropy plus distillation from the teacher run dir `teacher`.

    Train rows labelled `UNLABELLED` (`data.train_unlabelled`, set by `distill.unlabelled=true`)
    get the logit and attention terms only; cross-entropy and train/acc use the labelled rows.

    Args (besides `HeadClassifierModule`'s):
        teacher: a finished headlab run dir; its vocabulary must be the student data's.
        alpha: weight of the logit term T^2 * KL(teacher || student) at `temperature`.
        beta: weight of the attention term.
        temperature: softmax temperature of the logit term (> 0).
        attention_loss: ``kl`` (MiniLM: KL of attention patterns) or ``mse`` (TinyBERT: MSE of scores).
        layer_map: ``uniform`` | ``last`` | ``first_middle`` | one teacher layer (or null) per student layer.
        head_map: ``mean`` (teacher head groups averaged, when the teacher has k times the heads)
            or ``relation`` (MiniLMv2 Q/K/V relations split into the student's head count; any counts).
        teacher_checkpoint: ``best`` or ``last`` checkpoint of the teacher run.
    """

    trains_on_unlabelled = True  # headlab.tasks.train_config: data.train_unlabelled needs a module that says so

    def __init__(
        self,
        model_config: ModelConfig | Mapping[str, Any],
        optimizer: Callable[..., torch.optim.Optimizer] | Mapping[str, Any] | None = None,
        scheduler: Callable[..., Any] | Mapping[str, Any] | None = None,
        compile: bool = False,
        *,
        teacher: str,
        alpha: float = 0.5,
        beta: float = 1.0,
        temperature: float = 2.0,
        attention_loss: Literal["kl", "mse"] = "kl",
        layer_map: Literal["uniform", "last", "first_middle"] | list[int | None] = "uniform",
        head_map: Literal["mean", "relation"] = "mean",
        teacher_checkpoint: Literal["best", "last"] = "best",
    ) -> None:
        super().__init__(model_config, optimizer, scheduler, compile)
        for key, value in (("distill.alpha", alpha), ("distill.beta", beta)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ConfigError(key, value, "a weight >= 0")
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or temperature <= 0:
            raise ConfigError("distill.temperature", temperature, "a temperature > 0")
        self.alpha, self.beta, self.temperature = float(alpha), float(beta), float(temperature)
        self.attention_loss, self.head_map, self.teacher_dir = attention_loss, head_map, str(teacher)
        net = load_teacher(teacher, teacher_checkpoint)
        student = self.net.config
        if len(set(net.heads_per_layer)) != 1:
            raise ConfigError("teacher", str(teacher), f"an unpruned teacher (heads per layer: {net.heads_per_layer})")
        if net.config.max_len < student.max_len:
            raise ConfigError("teacher", str(teacher), f"a teacher whose max_len ({net.config.max_len}) is at least "
                              f"the student's ({student.max_len})")
        if net.config.vocab_size != student.vocab_size:
            raise ConfigError("teacher", str(teacher), f"a teacher whose vocabulary is the student data's: teacher "
                              f"{net.config.vocab_size} tokens, student data {student.vocab_size}")
        check_head_map(head_map, attention_loss, net.heads_per_layer[0], student.n_heads,
                       net.config.d_model, student.d_model)
        mapped = make_layer_map(list(layer_map) if not isinstance(layer_map, str) else layer_map,
                                len(net.blocks), len(self.net.blocks))
        self.layer_pairs = [(s, t) for s, t in enumerate(mapped) if t is not None]
        self.__dict__["teacher_net"] = net  # not a submodule: kept out of state_dict, optimiser and .train()
        # the teacher scored on the student's own test batches: how much it has to pass on (C11's prerequisite)
        self.teacher_test_metrics = self.test_metrics.clone(prefix="test/teacher_")

    # ---- Lightning hooks --------------------------------------------------------------------
    def setup(self, stage: str) -> None:
        """The teacher's vocabulary against the student data's tokenizer (before any training step)."""
        datamodule = getattr(self.trainer, "datamodule", None) if self._trainer is not None else None
        tokenizer = getattr(datamodule, "tokenizer", None)
        if tokenizer is not None:
            check_vocabulary(self.teacher_dir, tokenizer.tokens)

    def on_fit_start(self) -> None:
        self.teacher_net.to(self.device)

    def on_test_start(self) -> None:
        self.teacher_net.to(self.device).eval()

    def test_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        """The student's test metrics, and the frozen teacher's on the same batches (`test/teacher_acc`,
        `test/teacher_f1`): inputs cut to the student's max_len, as the teacher sees them in training."""
        super().test_step(batch, batch_idx)
        with torch.no_grad():
            logits = self.teacher_net(batch["input_ids"], batch["attention_mask"], domain_ids=batch.get("domain_ids")).logits
        self.teacher_test_metrics.update(logits, batch["labels"])

    def on_test_epoch_end(self) -> None:
        self.log_dict(self.teacher_test_metrics.compute())
        self.teacher_test_metrics.reset()
        super().on_test_epoch_end()

    def training_loss(self, batch: dict[str, torch.Tensor], template_kl: bool) -> tuple[Any, torch.Tensor, torch.Tensor | None]:
        """CE on the labelled rows + alpha * KD(logits) + beta * attention loss; the step adds the rest."""
        ids, mask, labels = batch["input_ids"], batch["attention_mask"], batch["labels"]
        labelled = labels != UNLABELLED  # distill.unlabelled: rows the teacher teaches, without a label
        if self.alpha == 0 and self.beta == 0 and bool(labelled.all()):
            return super().training_loss(batch, template_kl)  # nothing to distil: exactly a plain run
        points = points_needed(self.attention_loss, self.head_map) if self.beta > 0 else ()
        with torch.no_grad():
            t_out, t_points = forward_with_points(self.teacher_net, points, ids, mask, domain_ids=batch.get("domain_ids"))
        student = self.net if points else self._train_forward  # hooks need the module itself, not a compiled one
        s_out, s_points = forward_with_points(student, points, ids, mask, template_kl=template_kl,
                                              domain_ids=batch.get("domain_ids"))
        logits = s_out.logits
        loss_ce = F.cross_entropy(logits[labelled], labels[labelled]) if labelled.any() else logits.sum() * 0.0
        loss_kd = logit_kd(t_out.logits, logits, self.temperature) if self.alpha > 0 else loss_ce.new_zeros(())
        loss_attn = (attention_transfer(t_points, s_points, mask, self.layer_pairs, self.attention_loss, self.head_map)
                     if points else loss_ce.new_zeros(()))
        self.log_dict({"train/loss_ce": loss_ce.detach(), "train/loss_kd": loss_kd.detach(),
                       "train/loss_attn": loss_attn.detach()}, batch_size=len(logits))
        return s_out, loss_ce + self.alpha * loss_kd + self.beta * loss_attn, labelled


def forward_with_points(net: torch.nn.Module, points: Sequence[str], input_ids: torch.Tensor,
                        attention_mask: torch.Tensor, **kwargs: Any) -> tuple[Any, dict[str, list[torch.Tensor]]]:
    """`net(...)` and, for each named point (headlab.model.hooks), every layer's tensor at it.

    No points: the fast attention path. Any point: the weight path (`return_patterns=True`), where
    scores and patterns exist; Q/K/V are read on either path. `hook_q`/`hook_k` are read where the
    scores take them: after RoPE (`hook_rot_q`/`hook_rot_k`) in a RoPE layer.
    """
    found: dict[str, list[torch.Tensor]] = {point: [] for point in points}
    with _reading(net, found):
        out = net(input_ids, attention_mask, return_patterns=bool(points), **kwargs)
    return out, found


@contextmanager
def _reading(net: torch.nn.Module, found: dict[str, list[torch.Tensor]]) -> Iterator[None]:
    blocks = getattr(net, "blocks", None) or getattr(getattr(net, "_orig_mod", None), "blocks", [])
    handles = [_scored_point(block.attn, point).register_forward_hook(lambda m, a, out, p=point: found[p].append(out))
               for point in found for block in blocks]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def _scored_point(attn: torch.nn.Module, point: str) -> torch.nn.Module:
    """The module of `point` on `attn`, queries and keys after RoPE where the layer rotates them."""
    rotated = getattr(attn, point.replace("hook_", "hook_rot_"), None) if point in ("hook_q", "hook_k") else None
    return rotated if rotated is not None else getattr(attn, point)
