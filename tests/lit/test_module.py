import functools
import types

import pytest
import torch

from headlab.errors import ConfigError
from headlab.lit import HeadClassifierModule, NonFiniteLossError
from headlab.lit.schedule import WarmupSchedule
from headlab.model import ModelConfig

CONFIG = ModelConfig(vocab_size=20, n_classes=3, max_len=12, d_model=16, n_heads=2, n_layers=1)


def _batch():
    ids = torch.randint(3, 20, (4, 8))
    ids[:, 0] = 1
    return {"input_ids": ids, "attention_mask": torch.ones(4, 8, dtype=torch.bool), "labels": torch.tensor([0, 1, 2, 0])}


ADAMW = functools.partial(torch.optim.AdamW, lr=1e-3, weight_decay=0.01, betas=(0.9, 0.98))


@pytest.mark.parametrize("kwargs, key", [({"schedule": "step"}, "optim.schedule"), ({"warmup_ratio": 1.5}, "optim.warmup_ratio"),
                                         ({"warmup_steps": -1}, "optim.warmup_steps")])
def test_bad_schedule_settings_name_the_key(kwargs, key):
    with pytest.raises(ConfigError, match=key):
        WarmupSchedule(**kwargs)


def test_model_step_is_cross_entropy_of_the_networks_logits():
    torch.manual_seed(0)
    module = HeadClassifierModule(CONFIG).eval()
    batch = _batch()
    loss, logits = module.model_step(batch)
    expected = torch.nn.functional.cross_entropy(module.net(batch["input_ids"], batch["attention_mask"]).logits, batch["labels"])
    assert torch.allclose(loss, expected) and logits.shape == (4, 3)


def test_non_finite_loss_stops_training_naming_the_step(monkeypatch):
    module = HeadClassifierModule(CONFIG)
    nan_loss = (types.SimpleNamespace(logits=torch.zeros(4, 3)), torch.tensor(float("nan")), None)
    monkeypatch.setattr(module, "training_loss", lambda batch, template_kl: nan_loss)
    with pytest.raises(NonFiniteLossError, match="step 0"):
        module.training_step(_batch(), 0)


def test_checkpoint_hyperparameters_rebuild_the_same_network_and_optimiser():
    module = HeadClassifierModule(CONFIG, optimizer=functools.partial(torch.optim.SGD, lr=5e-4, momentum=0.9),
                                  scheduler=WarmupSchedule("linear", warmup_steps=3))
    assert module.hparams.optimizer == {"_target_": "torch.optim.sgd.SGD", "_partial_": True, "lr": 5e-4, "momentum": 0.9}
    rebuilt = HeadClassifierModule(**module.hparams)
    assert rebuilt.net.config == CONFIG
    optimizer = rebuilt.optimizer_factory(rebuilt.net.parameters())
    assert type(optimizer) is torch.optim.SGD and optimizer.defaults["lr"] == 5e-4 and optimizer.defaults["momentum"] == 0.9
    assert vars(rebuilt.scheduler_factory) == vars(module.scheduler_factory)


def _configured(module: HeadClassifierModule, total_steps: int = 10) -> dict:
    module._trainer = type("FakeTrainer", (), {"estimated_stepping_batches": total_steps})()
    return module.configure_optimizers()


def test_weight_decay_applies_to_matrices_only():
    """Biases, LayerNorm and embeddings sit in the group with no decay; every matrix takes the optimiser's."""
    module = HeadClassifierModule(CONFIG, optimizer=ADAMW)
    decay, no_decay = _configured(module)["optimizer"].param_groups
    names = {id(p): n for n, p in module.net.named_parameters()}
    assert decay["weight_decay"] == 0.01 and no_decay["weight_decay"] == 0.0
    assert all(p.ndim >= 2 and "embed" not in names[id(p)] for p in decay["params"])
    assert {names[id(p)] for p in no_decay["params"]} == {n for n, p in module.net.named_parameters() if p.ndim < 2 or "embed" in n}


def test_the_scheduler_gets_the_total_step_count():
    module = HeadClassifierModule(CONFIG, optimizer=ADAMW, scheduler=WarmupSchedule("linear", warmup_steps=2))
    scheduler = _configured(module, total_steps=12)["lr_scheduler"]["scheduler"]
    lrs = []
    for _ in range(12):
        lrs.append(scheduler.get_last_lr()[0])
        scheduler.optimizer.step()
        scheduler.step()
    # warm-up 1/2, 2/2, then linear decay over the remaining 10 steps: 1 - k/10
    assert lrs[:4] == pytest.approx([5e-4, 1e-3, 1e-3, 9e-4]) and lrs[-1] == pytest.approx(1e-4)


def test_an_optimiser_without_a_scheduler_keeps_its_lr_and_none_cannot_train():
    assert set(_configured(HeadClassifierModule(CONFIG, optimizer=ADAMW))) == {"optimizer"}
    with pytest.raises(ValueError, match="without an optimizer"):
        _configured(HeadClassifierModule(CONFIG))


def _optimiser_steps(fused: bool, n_steps: int = 3) -> tuple[torch.optim.Optimizer, torch.nn.Module]:
    """`n_steps` of the module's own optimiser (schedule included) on the same seeded batches."""
    torch.manual_seed(0)
    module = HeadClassifierModule(CONFIG, optimizer=functools.partial(ADAMW, fused=fused), scheduler=WarmupSchedule(warmup_steps=0))
    optim = _configured(module)
    optimizer, scheduler = optim["optimizer"], optim["lr_scheduler"]["scheduler"]
    torch.manual_seed(1)
    for _ in range(n_steps):
        optimizer.zero_grad()
        module.model_step(_batch())[0].backward()
        optimizer.step()
        scheduler.step()
    return optimizer, module.net


def test_fused_adamw_takes_the_same_steps_as_torchs_default():
    fused_opt, fused_net = _optimiser_steps(fused=True)
    plain_opt, plain_net = _optimiser_steps(fused=False)
    assert all(g.get("fused") for g in fused_opt.param_groups) and not any(g.get("fused") for g in plain_opt.param_groups)
    for (name, a), b in zip(fused_net.state_dict().items(), plain_net.state_dict().values()):
        if name.endswith("k_proj.bias"):  # softmax ignores a shift shared by all keys: its gradient is
            continue  # rounding noise, which Adam's normalisation blows up to +-lr either way
        assert torch.allclose(a, b, atol=1e-6, rtol=1e-5), name
    assert not torch.equal(fused_net.tok_emb.weight, HeadClassifierModule(CONFIG).net.tok_emb.weight)  # it moved
