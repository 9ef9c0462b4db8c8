"""Iterative pruning on the hand-built model: the label-carrying head survives, the stop rule holds."""

from __future__ import annotations

import pytest
import torch

from headlab.interventions import evaluate_gated
from headlab.interventions.pruning import finetune_steps, iterative_prune, least_important
from headlab.model.encoder import count_parameters

from ._planted import PLANTED, planted_batches, planted_model


def _prune(ranking, max_drop, **kw):
    net = planted_model()
    splits = {"val": planted_batches(), "test": planted_batches(seed=2)}
    return net, splits, iterative_prune(net, splits, ranking=ranking, fraction_per_step=0.3, max_drop=max_drop,
                                        count_parameters=count_parameters, **kw)


def test_ablation_ranking_prunes_everything_but_the_planted_head_without_loss():
    net, splits, result = _prune("ablation", 0.0)
    layer, head = PLANTED
    assert head not in result.removed[layer]
    assert result.net.heads_per_layer == [1, 1]  # every head but one per layer is idle
    assert all(s.accepted and float(s.scores["val"].acc[0]) == 1.0 for s in result.steps)
    assert net.heads_per_layer == [4, 4]  # the argument is untouched


def test_pruned_network_equals_the_gated_original():
    net, splits, result = _prune("random", 1.0)
    gates = torch.ones(2, 4)
    for layer, heads in enumerate(result.removed):
        gates[layer, heads] = 0.0
    batch = splits["val"][0]
    with torch.no_grad():
        pruned = result.net(batch["input_ids"], batch["attention_mask"]).logits
        gated = net(batch["input_ids"], batch["attention_mask"], head_gates=gates).logits
    torch.testing.assert_close(pruned, gated, atol=1e-5, rtol=0)


def test_stop_rule_keeps_the_last_network_within_max_drop():
    """Random order with max_drop 0.1: the planted head's removal (acc 1.0 -> 0.5) must be the refused round."""
    for seed in range(6):
        _, splits, result = _prune("random", 0.1, random_seed=seed)
        accepted = [s for s in result.steps if s.accepted]
        assert all(float(s.scores["val"].acc[0]) >= 0.9 for s in accepted)
        if not result.steps[-1].accepted:
            assert PLANTED in result.steps[-1].removed
            assert float(result.steps[-1].scores["val"].acc[0]) == 0.5
        assert float(evaluate_gated(result.net, splits["val"]).acc[0]) == float(accepted[-1].scores["val"].acc[0])


def test_least_important_never_empties_a_layer():
    scores = torch.tensor([[0.0, 0.1, float("nan")], [5.0, 6.0, 7.0]])
    assert least_important(scores, 3) == {0: [0], 1: [0, 1]}


def test_bad_fraction_or_drop_is_refused():
    with pytest.raises(ValueError, match="fraction_per_step"):
        iterative_prune(planted_model(), {"val": planted_batches()}, ranking="ablation", fraction_per_step=1.0,
                        max_drop=0.0, count_parameters=count_parameters)
    with pytest.raises(ValueError, match="max_drop"):
        iterative_prune(planted_model(), {"val": planted_batches()}, ranking="ablation", fraction_per_step=0.5,
                        max_drop=-0.01, count_parameters=count_parameters)


def test_finetune_moves_the_weights_and_keeps_the_pruned_shape():
    net = planted_model()
    net.prune_heads({0: [0]})
    before = net.blocks[0].attn.v_proj.weight.clone()
    finetune_steps(net, planted_batches(), steps=3, lr=1e-2)
    assert not torch.equal(before, net.blocks[0].attn.v_proj.weight)
    assert net.heads_per_layer == [3, 4] and not net.training


def _garbage(batches):
    """The same examples with every label flipped: the planted head now HURTS, so a loop that read this
    split would rank it least important and remove it first."""
    return [{**b, "labels": 1 - b["labels"]} for b in batches]


@pytest.mark.parametrize("ranking", ["ablation", "gradient", "random"])
def test_only_the_selected_split_ranks_and_stops(monkeypatch, ranking):
    """select="a": the heads removed and each round's verdict are those of a run that only has "a",
    whatever the other splits hold; they are scored for the record, never ranked on."""
    import headlab.interventions.pruning as pruning

    a = planted_batches()
    alone = iterative_prune(planted_model(), {"a": a}, ranking=ranking, fraction_per_step=0.3, max_drop=0.1,
                            count_parameters=count_parameters, select="a", random_seed=3)
    ranked_on = []
    for name in ("single_head_ablation", "gradient_importance"):
        real = getattr(pruning, name)
        monkeypatch.setattr(pruning, name, lambda net, batches, *args, _real=real, **kw: (ranked_on.append(batches), _real(net, batches, *args, **kw))[1])
    splits = {"a": a, "b": _garbage(planted_batches(seed=2)), "test": _garbage(planted_batches(seed=3))}
    both = iterative_prune(planted_model(), splits, ranking=ranking, fraction_per_step=0.3, max_drop=0.1,
                           count_parameters=count_parameters, select="a", random_seed=3)
    assert [(s.removed, s.accepted) for s in both.steps] == [(s.removed, s.accepted) for s in alone.steps]
    assert both.removed == alone.removed and len(both.steps) > 2
    assert all(batches is a for batches in ranked_on) and (ranking == "random") == (not ranked_on)
    assert all(set(s.scores) == {"a", "b", "test"} for s in both.steps)  # the held-out splits are on the record
    assert float(both.steps[0].scores["b"].acc[0]) == 0.0  # and they really are garbage to this network
    assert PLANTED not in [h for s in both.steps if s.accepted for h in s.removed]


def test_select_must_name_a_split():
    with pytest.raises(ValueError, match="select must name one of the splits"):
        iterative_prune(planted_model(), {"val": planted_batches()}, ranking="ablation", fraction_per_step=0.5,
                        max_drop=0.0, count_parameters=count_parameters, select="val_a")


def test_finetune_is_repeatable_with_dropout_and_leaves_the_global_rng_alone():
    """Dropout draws from the seeded fork: the same seed gives the same weights, another seed others."""
    from headlab.model import HeadlabClassifier, ModelConfig

    def tuned(seed: int) -> torch.Tensor:
        torch.manual_seed(1234)  # the net's init, then an unrelated global state
        net = HeadlabClassifier(ModelConfig(vocab_size=10, n_classes=2, max_len=8, n_layers=1, n_heads=2, d_model=8,
                                            d_ff=8, dropout=0.5, pos_encoding="none", pooling="cls"))
        torch.rand(int(seed == 99) + 1)  # a different global RNG state for the same fine-tune seed
        finetune_steps(net, planted_batches(), steps=3, lr=1e-2, seed=seed % 99)
        return torch.cat([p.detach().flatten() for p in net.parameters()])

    assert torch.equal(tuned(0), tuned(99))  # seed 0 both times, the global state differs
    assert not torch.equal(tuned(0), tuned(1))
    net, batches = planted_model(), planted_batches()
    state = torch.get_rng_state()
    finetune_steps(net, batches, steps=2, lr=1e-2, seed=5)
    assert torch.equal(state, torch.get_rng_state())
