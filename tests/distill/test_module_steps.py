"""`DistillModule` under a real Trainer: with each attention loss the student's attention term goes down.

The teacher is a hand-made run dir (a checkpoint and vocab.json, as headlab-train writes them)
holding a headlab model whose Q/K weights are scaled up, so its attention is peaked and far from a
fresh student's; the student trains on one fixed batch, pulled toward it by the attention term alone.
"""

from __future__ import annotations

import functools
from dataclasses import asdict
from pathlib import Path

import lightning as L
import pytest
import torch

from headlab.data.tokenizer import CharTokenizer
from headlab.distill.module import DistillModule
from headlab.model import HeadlabClassifier, ModelConfig

VOCAB = 20


def _config(n_heads: int, d_model: int) -> ModelConfig:
    return ModelConfig(vocab_size=VOCAB, n_classes=2, max_len=16, n_layers=2, n_heads=n_heads, d_model=d_model,
                       dropout=0.0, pos_encoding="learned")


def make_teacher_dir(root: Path, config: ModelConfig, seed: int = 1) -> Path:
    torch.manual_seed(seed)
    net = HeadlabClassifier(config)
    with torch.no_grad():
        for block in net.blocks:
            block.attn.q_proj.weight.mul_(2.0)
            block.attn.k_proj.weight.mul_(2.0)
    (root / "checkpoints").mkdir(parents=True)
    torch.save({"state_dict": {f"net.{k}": v for k, v in net.state_dict().items()},
                "hyper_parameters": {"model_config": asdict(config)}}, root / "checkpoints" / "last.ckpt")
    CharTokenizer.fit(["abcdefghijklmnopq"]).save(root / "vocab.json")  # 3 specials + 17 letters = VOCAB
    return root


class _Record(L.Callback):
    def __init__(self) -> None:
        self.attn: list[float] = []

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        self.attn.append(float(trainer.callback_metrics["train/loss_attn"]))


def _batches():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, VOCAB, (8, 12), generator=g)
    mask = torch.ones(8, 12, dtype=torch.bool)
    mask[4:, 9:] = False
    ids[~mask] = 0
    batch = {"input_ids": ids, "attention_mask": mask, "labels": torch.randint(0, 2, (8,), generator=g)}
    return torch.utils.data.DataLoader([batch] * 20, batch_size=None)  # one fixed batch, 20 times


@pytest.mark.parametrize("loss, head_map, teacher_shape", [
    ("kl", "mean", (4, 32)),        # 4 teacher heads averaged in pairs onto 2 student heads
    ("mse", "mean", (2, 16)),       # TinyBERT: scores of equal head counts, masked cells skipped
    ("kl", "relation", (4, 32)),    # MiniLMv2: Q/K/V relations re-split into the student's 2 heads
])
def test_attention_term_goes_down_with_each_loss(tmp_path, one_thread, loss, head_map, teacher_shape):
    teacher = make_teacher_dir(tmp_path / "teacher", _config(*teacher_shape))
    torch.manual_seed(0)
    module = DistillModule(_config(2, 16), optimizer=functools.partial(torch.optim.Adam, lr=1e-2), teacher=str(teacher),
                           alpha=0.0, beta=1.0, attention_loss=loss, head_map=head_map, layer_map="uniform",
                           teacher_checkpoint="last")
    record = _Record()
    trainer = L.Trainer(max_steps=20, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[record], accelerator="cpu")
    trainer.fit(module, train_dataloaders=_batches())
    assert len(record.attn) == 20 and all(torch.isfinite(torch.tensor(record.attn)))
    assert record.attn[-1] < 0.7 * record.attn[0], record.attn
    assert not any(k.startswith("teacher") for k in module.state_dict())  # the teacher is not saved with the student
    assert all(not p.requires_grad for p in module.teacher_net.parameters())


def test_unlabelled_rows_get_the_teacher_terms_but_no_cross_entropy(tmp_path):
    from headlab.data.datamodule import UNLABELLED
    from headlab.distill.transfer import logit_kd

    teacher = make_teacher_dir(tmp_path / "teacher", _config(4, 32))
    module = DistillModule(_config(2, 16), teacher=str(teacher), alpha=1.0, beta=1.0, teacher_checkpoint="last")
    logged: dict[str, float] = {}
    module.log = lambda name, value, **kw: logged.__setitem__(name, float(value))
    module.log_dict = lambda values, **kw: logged.update({k: float(v) for k, v in values.items()})
    batch = next(iter(_batches()))
    batch["labels"] = torch.tensor([0, 1, 1, 0, UNLABELLED, UNLABELLED, UNLABELLED, UNLABELLED])
    module.training_step(batch, 0)
    with torch.no_grad():
        student = module.net(batch["input_ids"], batch["attention_mask"]).logits
        taught = module.teacher_net(batch["input_ids"], batch["attention_mask"]).logits
    ce = torch.nn.functional.cross_entropy(student[:4], batch["labels"][:4]).item()
    assert logged["train/loss_ce"] == pytest.approx(ce, rel=1e-5)  # the 4 labelled rows only
    assert logged["train/loss_kd"] == pytest.approx(logit_kd(taught, student, 2.0).item(), rel=1e-5)  # all 8 rows
