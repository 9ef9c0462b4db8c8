"""The LLC and per-head refined LLC where the answer is known: devinterp's own call on the same model,
data and seed; a zeroed head; the same and different seeds; the head masks against the per-head
weight views; and (slow) induction heads whose rLLC rises when they form."""

from __future__ import annotations

import copy
import gc
import warnings

import numpy as np
import pytest
import torch

pytest.importorskip("devinterp", reason="devinterp not installed: pip install -e '.[llc]'")

from headlab.data.repeat_tokens import repeat_token_batch  # noqa: E402
from headlab.interventions.llc import (ROW_COLUMNS, SGLDSettings, estimate_head_llcs, estimate_llc, head_metric_frame,  # noqa: E402
                                      head_param_masks, llc_rows)
from headlab.store.tables import HEAD_METRIC_COLUMNS  # noqa: E402
from headlab.model.lm import HeadlabLM, LMConfig  # noqa: E402

VOCAB, SEQ, D_MODEL, D_HEAD = 16, 9, 16, 8
FAST = SGLDSettings(chains=2, draws=12, burnin=0, batch_size=16, seed=3)


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    """devinterp draws a progress bar per chain and warns about unsaved samples: neither is under test."""
    monkeypatch.setenv("TQDM_DISABLE", "1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _train(net: HeadlabLM, tokens: torch.Tensor, lr: float, batch_size: int = 32, keep=()) -> dict[int, dict]:
    """AdamW on next-token loss over `tokens` once, in order; the state dicts at the steps in `keep`."""
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=0.0)
    states = {}
    for step, ids in enumerate(tokens.split(batch_size)):
        if step in keep:
            states[step] = copy.deepcopy(net.state_dict())
        logits = net(ids).logits[:, :-1]
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), ids[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return states


@pytest.fixture(scope="module")
def trained():
    """A 1-layer, 2-head LM trained 150 steps on short repeat_tokens sequences, and 64 held-out ones."""
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(0)
    train = repeat_token_batch(32 * 150, VOCAB, SEQ, 2, 4, generator=generator)
    held_out = repeat_token_batch(64, VOCAB, SEQ, 2, 4, generator=generator)
    torch.manual_seed(0)
    net = HeadlabLM(LMConfig(vocab_size=VOCAB, max_len=SEQ, n_layers=1, n_heads=2, d_model=D_MODEL))
    _train(net, train, lr=1e-2)
    return net, held_out


def test_whole_model_llc_is_devinterps_own_call(trained):
    """devinterp's `llc()` on the same model, the same rows as a HuggingFace dataset, its own
    cross-entropy and the same seed gives the same per-chain numbers as `devinterp_value`."""
    from datasets import Dataset
    from devinterp.slt.llc import llc

    net, tokens = trained
    ours = estimate_llc(net, tokens, FAST)
    rows = Dataset.from_dict({"input_ids": tokens.tolist()}).with_format("torch")
    gc.freeze()  # devinterp's gc.collect() per chain, ~1 s each over the test process's heap; numbers unchanged
    theirs = llc(net, rows, {}, lr=FAST.lr, n_beta=FAST.nbeta, num_chains=FAST.chains, num_draws=FAST.draws,
                 batch_size=FAST.batch_size, num_init_loss_batches=len(tokens) // FAST.batch_size,
                 init_seed=FAST.seed, localization=FAST.localization, device="cpu")
    gc.unfreeze()
    assert ours.devinterp_value == pytest.approx(float(theirs.llc_mean), rel=1e-5)
    assert ours.loss_trace == pytest.approx(theirs.loss_trace.values, rel=1e-5)
    # 64 rows in batches of 16, 12 draws: every batch is drawn 3 times, so the draws' batches are the
    # init-loss batches and the paired estimate is devinterp's to float rounding
    assert ours.value == pytest.approx(ours.devinterp_value, abs=1e-3 * abs(ours.devinterp_value) + 1e-4)
    assert ours.n_chains == 2 and ours.value > 0


@pytest.mark.slow  # two devinterp runs (~5 s each on 2 cores); make test-all
def test_burn_in_steps_are_left_out_of_the_estimate(trained):
    """With burn-in, the estimate is devinterp's loss at the draws only (its `sampling_loss` array)."""
    from devinterp.slt.sampling import sample
    from datasets import Dataset

    net, tokens = trained
    settings = SGLDSettings(chains=1, draws=8, burnin=8, batch_size=16, seed=5)
    ours = estimate_llc(net, tokens, settings)
    rows = Dataset.from_dict({"input_ids": tokens.tolist()}).with_format("torch")
    gc.freeze()
    data = sample(net, rows, {}, lr=settings.lr, n_beta=settings.nbeta, num_chains=1, num_draws=8, num_burnin_steps=8,
                  batch_size=16, num_init_loss_batches=4, init_seed=5, localization=settings.localization, device="cpu").dataset
    gc.unfreeze()
    draws_only = settings.nbeta * (float(data.sampling_loss.values.mean()) - float(data.init_loss.values.mean()))
    assert ours.devinterp_value == pytest.approx(draws_only, rel=1e-5)
    assert ours.loss_trace.shape == (1, 16)


def test_paired_estimate_cancels_the_batches_own_spread():
    """Every row the same sequence: each step's batch is the init-loss batch, so the trained weights'
    loss on it (`reference`) is `init_loss` at every step and both estimators agree exactly."""
    torch.manual_seed(1)
    net = HeadlabLM(LMConfig(vocab_size=VOCAB, max_len=SEQ, n_layers=1, n_heads=2, d_model=D_MODEL))
    tokens = torch.randint(0, VOCAB, (1, SEQ)).repeat(32, 1)
    e = estimate_llc(net, tokens, SGLDSettings(chains=1, draws=6, burnin=0, batch_size=16))
    assert e.reference == pytest.approx(np.full(6, e.init_loss), rel=1e-5)
    assert e.value == pytest.approx(e.devinterp_value, rel=1e-4)


def test_a_zeroed_head_has_no_refined_llc(trained):
    """Head 0 with its W_V and W_O set to 0 adds nothing to the residual stream and the loss depends on
    its weights only through the product W_V W_O, flat to second order: sampling its weights barely
    moves the loss, so its rLLC is ~0, where the same head live carries a clear positive rLLC."""
    net, tokens = trained
    settings = SGLDSettings(chains=2, draws=30, burnin=20, batch_size=16, seed=0)
    live = estimate_llc(net, tokens, settings, layer=0, head=0)
    zeroed = copy.deepcopy(net)
    attn = zeroed.blocks[0].attn
    with torch.no_grad():
        attn.v_proj.weight[:D_HEAD] = 0
        attn.v_proj.bias[:D_HEAD] = 0
        attn.out_proj.weight[:, :D_HEAD] = 0
    dead = estimate_llc(zeroed, tokens, settings, layer=0, head=0)
    assert live.value > 0.2
    assert abs(dead.value) < 0.25 * live.value


def test_same_seed_same_number_other_seed_another(trained):
    net, tokens = trained
    settings = SGLDSettings(chains=1, draws=8, burnin=0, batch_size=16, seed=11)
    first, again = (estimate_llc(net, tokens, settings, layer=0, head=1) for _ in range(2))
    other = estimate_llc(net, tokens, SGLDSettings(chains=1, draws=8, burnin=0, batch_size=16, seed=12), layer=0, head=1)
    assert first.value == again.value and np.array_equal(first.loss_trace, again.loss_trace)
    assert other.value != first.value


@pytest.mark.slow  # two devinterp runs (~5 s each on 2 cores); make test-all
def test_an_unsettled_chain_is_not_flat(trained):
    """A step size too small for its 40 steps and no burn-in: the loss still climbs towards its
    equilibrium through the draws (time constant ~2 / (lr * localization) ~ 70 steps), the drift flags
    every chain, and the estimate falls short of a settled chain's (lr 1e-3, 60 burn-in steps)."""
    net, tokens = trained
    slow = estimate_llc(net, tokens, SGLDSettings(lr=3e-4, chains=2, draws=40, burnin=0, batch_size=16))
    settled = estimate_llc(net, tokens, SGLDSettings(lr=1e-3, chains=2, draws=40, burnin=60, batch_size=16))
    assert not slow.flat
    assert (slow.drift > 0.5).all() and (slow.drift_p < 0.05).all()
    assert settled.value > 1.5 * slow.value


def test_head_masks_select_exactly_the_heads_weight_views(trained):
    net, _ = trained
    probe = copy.deepcopy(net)
    masks = head_param_masks(probe, 0, 1)
    params = dict(probe.named_parameters())
    with torch.no_grad():
        for name, mask in masks.items():
            params[name][mask] = float("nan")
    weights = probe.blocks[0].attn.head_weights()
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V"):
        view = getattr(weights, name)
        assert torch.isnan(view[1]).all() and not torch.isnan(view[0]).any(), name
    assert not torch.isnan(weights.b_O).any()  # out_proj's bias is every head's
    assert sum(int(m.sum()) for m in masks.values()) == 4 * D_MODEL * D_HEAD + 3 * D_HEAD


@pytest.mark.parametrize(("layer", "head", "match"), [(1, 0, r"layer must be an integer in \[0, 0\]; got 1"),
                                                      (0, 2, r"head must be an integer in \[0, 1\] in layer 0; got 2")])
def test_a_head_that_does_not_exist_is_named(trained, layer, head, match):
    with pytest.raises(ValueError, match=match):
        head_param_masks(trained[0], layer, head)


@pytest.mark.parametrize(("key", "value", "match"), [("lr", 0.0, r"invalid config llc.lr=0.0: expected a number > 0$"),
                                                     ("chains", 0, r"invalid config llc.chains=0: expected an integer >= 1$"),
                                                     ("draws", 2, r"invalid config llc.draws=2: expected an integer >= 4$"),
                                                     ("localization", -1.0, r"invalid config llc.localization=-1.0: expected a number >= 0$")])
def test_bad_settings_are_named(key, value, match):
    from headlab.errors import ConfigError

    with pytest.raises(ConfigError, match=match):
        SGLDSettings(**{key: value})


def test_more_rows_per_batch_than_given_is_named(trained):
    with pytest.raises(ValueError, match="llc.batch_size=128 is more than the 64 sequences given"):
        estimate_llc(trained[0], trained[1], SGLDSettings(batch_size=128))


def test_rows_are_one_per_estimate_with_the_whole_model_at_minus_one(trained):
    net, tokens = trained
    loader = torch.utils.data.DataLoader(tokens, batch_size=16)  # a loader of next-token batches works too
    estimates = estimate_head_llcs(net, loader, SGLDSettings(chains=1, draws=4, burnin=0, batch_size=16))
    rows = llc_rows(700, estimates)
    assert tuple(rows.columns) == ROW_COLUMNS
    assert rows[["layer", "head", "metric"]].values.tolist() == [[-1, -1, "llc"], [0, 0, "rllc"], [0, 1, "rllc"]]
    assert (rows["step"] == 700).all() and rows["value"].tolist() == [e.value for e in estimates]
    table = head_metric_frame("run", 700, 3, estimates)  # heads only: the whole model is no head
    assert tuple(table.columns) == HEAD_METRIC_COLUMNS
    assert table["metric"].tolist() == ["rllc", "rllc_std", "rllc", "rllc_std"]
    np.testing.assert_array_equal(table["value"], [v for e in estimates[1:] for v in (e.value, e.std)])  # std: NaN for 1 chain
    assert table["layer"].tolist() == [0, 0, 0, 0] and table["head"].tolist() == [0, 0, 1, 1]


@pytest.mark.slow
def test_induction_heads_rllc_rises_when_they_form():
    """The induction LM (2 layers x 4 heads, attention only) trained on repeat_tokens as
    experiment=induction does: the two strongest layer-1 induction heads at step 2,000 (score > 0.3 on
    the probe; with this data and seed all four layer-1 heads form) gain their rLLC between step 800,
    before the probe loss drops, and step 2,000, after it: from ~0.05 to ~1 (2026-12-02)."""
    from headlab.data.lm_datamodule import RepeatTokensDataModule
    from headlab.measure.lm_probe import measure_lm_probe

    torch.set_num_threads(1)
    data = RepeatTokensDataModule(n_train=32 * 2000)
    data.setup()
    torch.manual_seed(0)
    net = HeadlabLM(LMConfig(vocab_size=64, max_len=33, n_layers=2, n_heads=4, d_model=64))
    order = torch.randperm(32 * 2000, generator=torch.Generator().manual_seed(0))
    before = _train(net, data.splits["train"][order], lr=3e-3, keep={800})[800]
    induction = measure_lm_probe(net, data.probe, data.probe_half_len).per_layer[1]["induction_score"]
    formed = [h for h in induction.argsort(descending=True)[:2].tolist() if induction[h] > 0.3]
    assert len(formed) == 2, f"layer-1 induction scores at step 2,000: {induction.tolist()}"
    settings = SGLDSettings(chains=2, draws=60, burnin=40)
    tokens = data.splits["val"]
    after = {h: estimate_llc(net, tokens, settings, layer=1, head=h).value for h in formed}
    net.load_state_dict(before)
    assert measure_lm_probe(net, data.probe, data.probe_half_len).per_layer[1]["induction_score"].max() < 0.1
    early = {h: estimate_llc(net, tokens, settings, layer=1, head=h).value for h in formed}
    for h in formed:
        assert after[h] > 0.5 and after[h] > 5 * early[h], (h, early[h], after[h])


def _classifier(dropout: float = 0.0):
    from headlab.model import HeadlabClassifier, ModelConfig

    torch.manual_seed(0)
    return HeadlabClassifier(ModelConfig(vocab_size=VOCAB, n_classes=2, max_len=SEQ, d_model=D_MODEL, n_heads=2,
                                         n_layers=1, dropout=dropout)).eval()


def _examples(n: int = 48) -> list[tuple[list[int], int]]:
    """Variable-length sequences; the label: whether token 3 occurs (some head must find it)."""
    generator = torch.Generator().manual_seed(2)
    out = []
    for _ in range(n):
        length = int(torch.randint(3, SEQ + 1, (1,), generator=generator))
        ids = torch.randint(4, VOCAB, (length,), generator=generator).tolist()
        label = int(torch.rand(1, generator=generator) < 0.5)
        if label:
            ids[int(torch.randint(1, length, (1,), generator=generator))] = 3
        out.append(([1, *ids[1:]], label))
    return out


def test_a_packed_classifier_row_has_the_examples_own_loss():
    """`classification_loss` on packed rows = the classifier's cross-entropy on each example alone
    (no padding at all), repeated over the row: devinterp's mean over positions is the example's loss."""
    from headlab.interventions.llc import classification_loss, classifier_rows

    net, examples = _classifier(), _examples(6)
    rows = classifier_rows(examples)
    assert rows.shape == (6, 2 + max(len(ids) for ids, _ in examples))
    with torch.no_grad():
        packed = classification_loss(net, rows)
        alone = torch.stack([torch.nn.functional.cross_entropy(
            net(torch.tensor([ids]), torch.ones(1, len(ids), dtype=torch.bool)).logits, torch.tensor([label]))
            for ids, label in examples])
    assert packed.shape == (6, rows.size(1) - 1)
    torch.testing.assert_close(packed.mean(dim=1), alone, rtol=1e-5, atol=1e-6)


def test_a_classifiers_dropout_does_not_enter_the_sampled_loss():
    """devinterp samples in train mode: the classifier's dropout (0.3 here) must not add its own noise.
    The same weights with dropout 0.3 and 0 give the same estimate and loss trace, to the bit."""
    from headlab.interventions.llc import classifier_rows

    rows = classifier_rows(_examples(48))
    noisy, clean = _classifier(dropout=0.3), _classifier(dropout=0.0)
    clean.load_state_dict(noisy.state_dict())
    settings = SGLDSettings(chains=1, draws=8, burnin=0, batch_size=16, seed=4)
    a, b = (estimate_llc(net, rows, settings, layer=0, head=1) for net in (noisy, clean))
    assert np.array_equal(a.loss_trace, b.loss_trace) and a.value == b.value
    assert noisy.blocks[0].drop.p == 0.3  # the caller's network is left as it was
