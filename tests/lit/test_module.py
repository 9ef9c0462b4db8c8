import pytest
import torch

from headlab.errors import ConfigError
from headlab.lit import HeadClassifierModule, NonFiniteLossError
from headlab.model import ModelConfig

CONFIG = ModelConfig(vocab_size=20, n_classes=3, max_len=12, d_model=16, n_heads=2, n_layers=1)


def _batch():
    ids = torch.randint(3, 20, (4, 8))
    ids[:, 0] = 1
    return {"input_ids": ids, "attention_mask": torch.ones(4, 8, dtype=torch.bool), "labels": torch.tensor([0, 1, 2, 0])}


@pytest.mark.parametrize("kwargs, key", [({"lr": 0.0}, "optim.lr"), ({"schedule": "step"}, "optim.schedule"),
                                         ({"weight_decay": -1.0}, "optim.weight_decay")])
def test_bad_optimiser_settings_name_the_key(kwargs, key):
    with pytest.raises(ConfigError, match=key):
        HeadClassifierModule(CONFIG, **kwargs)


def test_model_step_is_cross_entropy_of_the_networks_logits():
    torch.manual_seed(0)
    module = HeadClassifierModule(CONFIG).eval()
    batch = _batch()
    loss, logits = module.model_step(batch)
    expected = torch.nn.functional.cross_entropy(module.net(batch["input_ids"], batch["attention_mask"]).logits, batch["labels"])
    assert torch.allclose(loss, expected) and logits.shape == (4, 3)


def test_non_finite_loss_stops_training_naming_the_step(monkeypatch):
    module = HeadClassifierModule(CONFIG)
    monkeypatch.setattr(module, "model_step", lambda batch, training=False: (torch.tensor(float("nan")), torch.zeros(4, 3)))
    with pytest.raises(NonFiniteLossError, match="step 0"):
        module.training_step(_batch(), 0)


def test_checkpoint_hyperparameters_rebuild_the_same_network():
    module = HeadClassifierModule(CONFIG, lr=5e-4)
    rebuilt = HeadClassifierModule(**module.hparams)
    assert rebuilt.net.config == CONFIG and rebuilt.hparams.lr == 5e-4


def _optimiser_steps(fused: bool, n_steps: int = 3) -> tuple[torch.optim.Optimizer, torch.nn.Module]:
    """`n_steps` of the module's own optimiser (schedule included) on the same seeded batches."""
    torch.manual_seed(0)
    module = HeadClassifierModule(CONFIG, fused=fused, warmup_steps=0)
    module._trainer = type("FakeTrainer", (), {"estimated_stepping_batches": 10})()
    optim = module.configure_optimizers()
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
