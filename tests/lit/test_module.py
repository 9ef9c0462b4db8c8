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
