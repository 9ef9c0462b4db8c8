"""heads=auto: the head whose ablation costs the most loss at step t is the one knocked out."""

from __future__ import annotations

import pytest
import torch

from headlab.tasks.train import train
from headlab.errors import ConfigError
from headlab.lit.callbacks.interventions import HeadIntervention, most_important_head
from headlab.model import HeadlabClassifier, ModelConfig
from tests._runs import TINY, compose_train_config

CONFIG = dict(vocab_size=12, n_classes=2, max_len=10, d_model=16, n_heads=2, n_layers=2, dropout=0.0)
CARRIER = (1, 0)
STEPS = 48


def _batches(n: int = 8, seed: int = 0) -> list[dict[str, torch.Tensor]]:
    """The label is whether the token at position 3 is > 7: only attention can read a position."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, 12, (n, 16, 10), generator=generator)
    ids[:, :, 0] = 1
    labels = (ids[:, :, 3] > 7).long()
    return [{"input_ids": i, "attention_mask": torch.ones_like(i, dtype=torch.bool), "labels": y} for i, y in zip(ids, labels)]


def _only_carrier_net() -> torch.nn.Module:
    """A network trained with every head but CARRIER gated to 0: CARRIER carries the label."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model on a shared machine: extra threads only spin
    torch.manual_seed(0)
    net = HeadlabClassifier(ModelConfig(**CONFIG))
    for layer in range(2):
        for head in range(2):
            if (layer, head) != CARRIER:
                net.set_head_gate(layer, head, 0.0)
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-2)
    for _ in range(STEPS // 8):
        for batch in _batches():
            loss = torch.nn.functional.cross_entropy(net(batch["input_ids"], batch["attention_mask"]).logits, batch["labels"])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    torch.set_num_threads(threads)
    return net.eval()


def test_the_head_that_carries_the_label_is_chosen():
    net = _only_carrier_net()
    head, dloss = most_important_head(net, _batches(4, seed=1))
    assert head == CARRIER
    assert dloss[CARRIER].item() > 0.05                               # removing it costs loss
    others = [dloss[l, h].item() for l in range(2) for h in range(2) if (l, h) != CARRIER]
    assert others == [0.0, 0.0, 0.0]                                  # gated heads: removing them changes nothing


def test_a_resumed_run_keeps_the_head_chosen_before_the_restart():
    chosen = HeadIntervention("knockout", 3, "auto", n_layers=2, n_heads=2)
    chosen.heads, chosen.applied_step, chosen.auto_dloss = [(1, 0)], 3, [[0.0, 0.0], [0.4, 0.1]]
    resumed = HeadIntervention("knockout", 3, "auto", n_layers=2, n_heads=2)
    resumed.load_state_dict(chosen.state_dict())
    assert resumed.describe() == chosen.describe()
    assert resumed.describe()["heads"] == [[1, 0]] and resumed.describe()["heads_requested"] == "auto"


def test_auto_knockout_trains_exactly_as_naming_the_chosen_head(tmp_path):
    common = TINY + ["intervention=knockout", "intervention.knockout.step=3", "test=false", "callbacks.head_metrics=null", "threads=1"]
    auto = train(compose_train_config(tmp_path / "auto", common + ["intervention.knockout.heads=auto"]))
    chosen = auto["intervention"]["heads"]
    dloss = torch.tensor(auto["intervention"]["auto_dloss"])
    assert auto["intervention"]["heads_requested"] == "auto" and len(chosen) == 1
    assert tuple(chosen[0]) == divmod(int(dloss.argmax()), dloss.shape[1])
    named = train(compose_train_config(tmp_path / "named", common + [f"intervention.knockout.heads=[{chosen[0]}]"]))
    assert named["intervention"]["heads"] == chosen
    weights = [torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
               for run in (tmp_path / "auto", tmp_path / "named")]
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_auto_batches_below_one_is_a_config_error():
    with pytest.raises(ConfigError, match="intervention.knockout.auto_batches=0"):
        HeadIntervention("knockout", 3, "auto", n_layers=2, n_heads=2, auto_batches=0)


def test_evaluating_a_checkpoint_from_before_t_keeps_the_runs_facts():
    """After fit, summary.json's best checkpoint may predate t: loading its callback state for the
    evaluation must not erase what the run did."""
    callback = HeadIntervention("knockout", 3, "auto", n_layers=2, n_heads=2)
    callback.heads, callback.applied_step, callback.auto_dloss = [(1, 0)], 3, [[0.0, 0.0], [0.4, 0.1]]
    before = callback.describe()
    callback.load_state_dict({"applied_step": None, "heads": [], "auto_dloss": None})  # the best ckpt at step 2
    assert callback.describe() == before


def test_a_checkpoint_from_before_a_freeze_is_evaluated_unfrozen():
    from headlab.lit import HeadClassifierModule

    module = HeadClassifierModule(ModelConfig(**CONFIG))
    callback = HeadIntervention("freeze_pattern", 3, [[0, 0]], n_layers=2, n_heads=2)
    callback._module, callback.applied_step = module, 3
    module.net.freeze_patterns({0: [0]})
    callback.load_state_dict({"applied_step": 3, "frozen_state": module.net.frozen_state()})  # best after t
    assert module.net.frozen_patterns is not None
    callback.load_state_dict({"applied_step": None})                                          # best before t
    assert module.net.frozen_patterns is None and callback.describe()["applied_step"] == 3
