"""Attention templates: the builder's exact patterns, hard heads in the model, the KL term, config errors."""

from __future__ import annotations

import pytest
import torch

from headlab.errors import ConfigError
from headlab.model import HeadlabClassifier, ModelConfig
from headlab.model.templates import build_template, resolve_template, template_kl, template_weight

# two sequences: 4 real tokens + 2 padding, and 6 real tokens
MASK = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], dtype=torch.bool)


def _config(**kwargs) -> ModelConfig:
    base = dict(vocab_size=12, n_classes=2, max_len=8, d_model=16, n_heads=4, n_layers=2, dropout=0.0)
    return ModelConfig(**{**base, **kwargs})


def test_previous_puts_all_mass_one_key_back_and_the_first_query_on_itself():
    pattern = build_template("previous", MASK)
    for b, n in enumerate((4, 6)):
        assert pattern[b, 0, 0] == 1.0  # [CLS] has no previous token: it attends to itself
        for i in range(1, n):
            expected = torch.zeros(6)
            expected[i - 1] = 1.0
            assert torch.equal(pattern[b, i], expected)


@pytest.mark.parametrize("name, row_of_query_2_len4", [
    ("next", [0, 0, 0, 1, 0, 0]),
    ("first", [1, 0, 0, 0, 0, 0]),
    ("last", [0, 0, 0, 1, 0, 0]),  # the last REAL token, not the padded end
    ("uniform", [0.25, 0.25, 0.25, 0.25, 0, 0]),
    ("local:1", [0, 1 / 3, 1 / 3, 1 / 3, 0, 0]),
    ("local:2", [0.25, 0.25, 0.25, 0.25, 0, 0]),  # keys 0..4, key 4 is padding
])
def test_each_pattern_by_hand(name, row_of_query_2_len4):
    pattern = build_template(name, MASK)
    assert torch.allclose(pattern[0, 2], torch.tensor(row_of_query_2_len4, dtype=torch.float))
    assert torch.allclose(pattern.sum(-1), torch.ones(2, 6))
    assert (pattern[0, :, 4:] == 0).all()  # padding keys never get mass


def test_next_and_last_at_the_end_fall_back_to_self_and_last_follows_each_length():
    nxt, last = build_template("next", MASK), build_template("last", MASK)
    assert nxt[0, 3, 3] == 1.0 and nxt[1, 5, 5] == 1.0
    assert (last[0, :, 3] == 1).all() and (last[1, :, 5] == 1).all()


def test_causal_removes_future_keys_and_renormalises():
    pattern = build_template("local:2", MASK[1:], causal=True)[0]
    assert torch.allclose(pattern[3], torch.tensor([0, 1 / 3, 1 / 3, 1 / 3, 0, 0]))
    assert torch.equal(pattern.triu(1), torch.zeros(6, 6))


def test_presets_resolve_per_layer_and_all_free_is_no_template():
    assert resolve_template("synthetic_layer0", 2, 3) == [["previous", "first", "last"], ["free"] * 3]
    assert resolve_template("synthetic", 1, 5) == [["previous", "first", "last", "uniform", "previous"]]
    assert resolve_template([["free", "free"]], 1, 2) is None


@pytest.mark.parametrize("template, value", [
    ([["previous", "free", "free", "free"]], "[['previous'"),  # one layer for a 2-layer model
    ([["previous", "free"], ["free", "free"]], "[['previous', 'free']"),  # 2 heads for 4
    ([["previous", "local:0", "free", "free"], ["free"] * 4], "'local:0'"),
    ([["previous", "local:x", "free", "free"], ["free"] * 4], "'local:x'"),
    ([["prev", "free", "free", "free"], ["free"] * 4], "'prev'"),
    ("no_such_preset", "'no_such_preset'"),
])
def test_bad_templates_are_one_line_config_errors(template, value):
    with pytest.raises(ConfigError) as info:
        _config(template=template)
    message = str(info.value)
    assert message.startswith(f"invalid config model.template={value}") and "\n" not in message


@pytest.mark.parametrize("kwargs, key", [
    ({"template_mode": "medium"}, "model.template_mode"),
    ({"template_weight": -1.0}, "model.template_weight"),
    ({"template_anneal_steps": -3}, "model.template_anneal_steps"),
    ({"template": [["next"] * 4, ["free"] * 4], "causal": True}, "model.template"),
])
def test_bad_template_settings_name_their_key(kwargs, key):
    with pytest.raises(ConfigError, match=key):
        _config(**kwargs)


def test_hard_previous_head_attends_exactly_one_back_on_both_paths():
    torch.manual_seed(0)
    net = HeadlabClassifier(_config(template=[["previous", "free", "free", "free"], ["free"] * 4])).eval()
    ids = torch.randint(3, 12, MASK.shape).masked_fill(~MASK, 0)
    out = net(ids, MASK, return_patterns=True)
    head = out.patterns[0][:, 0]  # [batch, q, k]
    assert torch.equal(head, build_template("previous", MASK))
    assert head[1, 3, 2] == 1.0 and head[1, 0, 0] == 1.0
    assert not torch.equal(out.patterns[0][:, 1], build_template("previous", MASK))  # free heads stay free
    assert torch.allclose(net(ids, MASK).logits, out.logits, atol=1e-6)  # the fast path applies it too


def test_hard_head_trains_values_and_output_but_not_queries_or_keys():
    torch.manual_seed(0)
    net = HeadlabClassifier(_config(template=[["first", "free", "free", "free"], ["free"] * 4]))
    ids = torch.randint(3, 12, MASK.shape)
    torch.nn.functional.cross_entropy(net(ids, MASK).logits, torch.tensor([0, 1])).backward()
    attn = net.blocks[0].attn
    grads = attn.head_weight_grads()  # W_Q, W_K, W_V, W_O per head
    assert grads[0][0].abs().sum() == 0 and grads[1][0].abs().sum() == 0
    assert grads[2][0].abs().sum() > 0 and grads[3][0].abs().sum() > 0
    assert grads[0][1].abs().sum() > 0  # a free head's queries do learn


def test_kl_is_zero_when_the_head_is_its_template_and_matches_a_reference_otherwise():
    template = build_template("local:1", MASK)[:, None]  # [batch, 1, q, k]
    log_equal = torch.where(template > 0, template.log(), torch.finfo(torch.float).min)
    assert template_kl(template, log_equal, MASK).item() == 0.0
    torch.manual_seed(1)
    scores = torch.randn(2, 1, 6, 6).masked_fill(~MASK[:, None, None, :], torch.finfo(torch.float).min)
    log_pattern = scores.log_softmax(-1)
    reference = torch.nn.functional.kl_div(log_pattern, template, reduction="none").sum(-1)  # [batch, 1, q]
    expected = reference[MASK[:, None, :]].mean()
    assert torch.allclose(template_kl(template, log_pattern, MASK), expected.reshape(1))


def test_soft_uniform_head_with_zero_queries_has_zero_kl_through_the_model():
    torch.manual_seed(0)
    net = HeadlabClassifier(_config(template=[["uniform", "free", "free", "free"], ["free"] * 4], template_mode="soft",
                                    pos_encoding="none"))
    with torch.no_grad():  # head 0's queries are 0: its scores are flat, its pattern uniform over real keys
        net.blocks[0].attn.q_proj.weight[:4].zero_()
        net.blocks[0].attn.q_proj.bias[:4].zero_()
    ids = torch.randint(3, 12, MASK.shape)
    assert net(ids, MASK, template_kl=True).template_kl.abs().item() < 1e-6
    net.blocks[0].attn.template = ["previous", "free", "free", "free"]  # the same head, far from another template
    assert net(ids, MASK, template_kl=True).template_kl.item() > 0.5


def test_soft_templates_leave_the_forward_unchanged_and_report_kl_only_when_asked():
    torch.manual_seed(0)
    free = HeadlabClassifier(_config()).eval()
    torch.manual_seed(0)
    soft = HeadlabClassifier(_config(template="synthetic", template_mode="soft")).eval()
    assert all(torch.equal(a, b) for a, b in zip(free.state_dict().values(), soft.state_dict().values()))
    ids = torch.randint(3, 12, MASK.shape)
    assert torch.equal(free(ids, MASK).logits, soft(ids, MASK).logits)
    assert soft(ids, MASK).template_kl is None and free(ids, MASK, template_kl=True).template_kl is None
    assert soft(ids, MASK, template_kl=True).template_kl > 0


def test_weight_anneals_linearly_to_zero_and_is_zero_without_soft_heads():
    assert [template_weight(s, 2.0, 10) for s in (0, 5, 10, 50)] == [2.0, 1.0, 0.0, 0.0]
    assert template_weight(10_000, 0.3, 0) == 0.3
    assert HeadlabClassifier(_config(template="synthetic")).template_loss_weight(0) == 0.0  # hard: no KL term
    assert HeadlabClassifier(_config(template="synthetic", template_mode="soft", template_weight=0.5,
                                     template_anneal_steps=4)).template_loss_weight(2) == 0.25


def test_free_mode_checks_the_template_but_builds_the_free_model():
    with pytest.raises(ConfigError, match="local:0"):
        _config(template=[["local:0"] * 4, ["free"] * 4], template_mode="free")
    torch.manual_seed(0)
    free = HeadlabClassifier(_config()).eval()
    torch.manual_seed(0)
    off = HeadlabClassifier(_config(template="synthetic", template_mode="free")).eval()
    ids = torch.randint(3, 12, MASK.shape)
    assert off.config.templates is None and torch.equal(free(ids, MASK).logits, off(ids, MASK).logits)


def test_pruning_keeps_each_surviving_heads_template():
    net = HeadlabClassifier(_config(template=[["previous", "first", "free", "last"], ["free"] * 4])).eval()
    net.prune_heads({0: [1]})
    assert net.blocks[0].attn.template == ["previous", "free", "last"]
    out = net(torch.randint(3, 12, MASK.shape), MASK, return_patterns=True)
    assert torch.equal(out.patterns[0][:, 2], build_template("last", MASK))


def test_local_head1_preset_templates_only_the_first_head_of_every_layer():
    assert resolve_template("local_head1", 2, 4) == [["local:2", "free", "free", "free"]] * 2
    assert resolve_template("local_head1", 1, 1) == [["local:2"]]


def test_local_head1_soft_kl_is_the_first_heads_kl_to_a_hand_built_window_averaged_over_layers():
    torch.manual_seed(0)
    net = HeadlabClassifier(_config(template="local_head1", template_mode="soft")).eval()
    ids = torch.randint(3, 12, MASK.shape)
    out = net(ids, MASK, return_patterns=True, template_kl=True)
    per_layer = []
    for pattern in out.patterns:  # [batch, head, q, k]; only head 0 is constrained
        total, queries = 0.0, 0
        for b, n in enumerate((4, 6)):
            for i in range(n):
                keys = [j for j in range(n) if abs(i - j) <= 2]  # the local:2 window over real keys
                t = 1.0 / len(keys)
                total += sum(t * (torch.log(torch.tensor(t)) - torch.log(pattern[b, 0, i, j])).item() for j in keys)
                queries += 1
        per_layer.append(total / queries)
    assert out.template_kl.item() == pytest.approx(sum(per_layer) / 2, rel=1e-4)
    assert [block.attn._heads("soft") for block in net.blocks] == [[0], [0]]
