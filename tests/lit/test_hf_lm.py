"""The HF language-model LightningModule and the suite builder on it, against a hand-written AdamW loop.

The reference loop is the one `build_tiny_suite` ran before it trained through Lightning: per step,
random window starts (then, for an encoder, a 15 % mask) from one seeded generator, HF's LM loss,
zero_grad / backward / AdamW step. The tiny models have no dropout, so both paths are deterministic.
"""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

import lightning as L
import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("transformers")
pytestmark = pytest.mark.usefixtures("one_thread")

from headlab.hf.tiny import build_tiny, log_spaced_steps, train_tokenizer  # noqa: E402
from headlab.lit.hf_base import fit_on_cpu  # noqa: E402
from headlab.lit.hf_lm import HFLanguageModelModule, SavePretrained, build_tiny_suite, lm_batches  # noqa: E402

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "build_tiny_suite.py"
TEXTS = [f"The {w} sat on the mat, and the {v} ran home at {i} o'clock." for i, (w, v) in
         enumerate(zip(["cat", "dog", "bird", "cow", "fox", "owl"] * 4, ["boy", "girl", "man", "kid"] * 6))]
SEQ, BATCH, LR = 12, 4, 3e-3


def _tiny(family: str):
    """(tokenizer, LM-head model, token stream): 2 layers x 2 heads, d_model 16, no dropout."""
    import transformers as tf

    decoder = family == "gpt_neox"
    tok = train_tokenizer(TEXTS, decoder=decoder, vocab_size=120)
    model = build_tiny(family, tok, seed=0, n_layers=2, n_heads=2, d_model=16, max_len=SEQ + 1)
    if not decoder:
        torch.manual_seed(0)
        model = tf.AutoModelForMaskedLM.from_config(model.config, attn_implementation="eager")
    end = tok.eos_token_id if decoder else tok.sep_token_id
    stream = torch.tensor([i for t in TEXTS for i in tok(t, add_special_tokens=False)["input_ids"] + [end]])
    return tok, model, stream


def _plain_loop(model, stream: torch.Tensor, n_steps: int, seed: int, mask_id: int | None, batch=BATCH, seq=SEQ,
                lr=LR) -> list[float]:
    """The builder's former loop, written out: returns the loss of every step."""
    model.train()
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    generator = torch.Generator().manual_seed(seed)
    losses = []
    for _ in range(n_steps):
        starts = torch.randint(0, len(stream) - seq - 1, (batch,), generator=generator)
        tokens = torch.stack([stream[s:s + seq + 1] for s in starts.tolist()])
        if mask_id is None:
            loss = model(input_ids=tokens, labels=tokens).loss
        else:
            masked = torch.rand(tokens.shape, generator=generator) < 0.15
            labels = torch.where(masked, tokens, torch.full_like(tokens, -100))
            loss = model(input_ids=torch.where(masked, torch.full_like(tokens, mask_id), tokens), labels=labels).loss
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    return losses


class _Seen(L.Callback):
    """Each step's loss, and the in-memory logits on `probe` after each step in `steps` (0: before any)."""

    def __init__(self, probe: torch.Tensor, steps: list[int]) -> None:
        self.probe, self.steps = probe, set(steps)
        self.losses: list[float] = []
        self.logits: dict[int, torch.Tensor] = {}

    def _look(self, trainer, module) -> None:
        if trainer.global_step in self.steps:
            was = module.net.training
            module.net.eval()
            with torch.no_grad():
                self.logits[trainer.global_step] = module(self.probe).clone()
            module.net.train(was)

    def on_train_start(self, trainer, module) -> None:
        self._look(trainer, module)

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        self.losses.append(float(outputs["loss"]))
        self._look(trainer, module)


@pytest.mark.parametrize("family", ["gpt_neox", "bert"])
def test_the_lightning_module_trains_what_the_plain_adamw_loop_trains(family):
    tok, model, stream = _tiny(family)
    mask_id = None if family == "gpt_neox" else tok.mask_token_id
    reference = copy.deepcopy(model)
    expected = _plain_loop(reference, stream, 6, seed=3, mask_id=mask_id)
    batches = lm_batches(stream, 6, SEQ, BATCH, torch.Generator().manual_seed(3), mask_id)
    start = copy.deepcopy(model.state_dict())
    seen = _Seen(batches[0]["input_ids"], [])
    flag = torch.are_deterministic_algorithms_enabled()
    fit_on_cpu(HFLanguageModelModule(model, lr=LR, weight_decay=0.01), batches, [seen], deterministic=True)
    assert torch.are_deterministic_algorithms_enabled() == flag  # Lightning's global switch is put back
    assert seen.losses == pytest.approx(expected, abs=1e-5)
    moved = 0.0
    for (name, got), (_, want) in zip(model.named_parameters(), reference.named_parameters()):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=0, msg=name)
        moved = max(moved, float((got.detach() - start[name]).abs().max()))
    assert moved > 1e-3  # six steps at lr 3e-3 moved the weights: the comparison is not of two untrained copies


@pytest.mark.parametrize("family", ["gpt_neox", "bert"])
def test_the_objective_is_the_next_token_for_a_decoder_and_the_masked_tokens_for_an_encoder(family):
    """The module's loss against cross-entropy computed by hand from the logits."""
    tok, model, stream = _tiny(family)
    decoder = family == "gpt_neox"
    batch = lm_batches(stream, 1, SEQ, BATCH, torch.Generator().manual_seed(0), None if decoder else tok.mask_token_id)[0]
    module = HFLanguageModelModule(model, lr=LR)
    logits = module(batch["input_ids"])
    vocab = logits.shape[-1]
    if decoder:
        assert torch.equal(batch["input_ids"], batch["labels"])
        want = F.cross_entropy(logits[:, :-1].reshape(-1, vocab), batch["input_ids"][:, 1:].reshape(-1))
    else:
        masked = batch["labels"] != -100
        assert 0 < masked.float().mean() < 0.3  # about 15 % of the tokens
        assert (batch["input_ids"][masked] == tok.mask_token_id).all()
        assert (batch["input_ids"][~masked] != tok.mask_token_id).all() and (batch["labels"][masked] >= 0).all()
        want = F.cross_entropy(logits[masked], batch["labels"][masked])
    torch.testing.assert_close(module.loss(batch), want, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("family", ["gpt_neox", "bert"])
def test_checkpoints_land_at_the_log_spaced_steps_and_reload_as_the_model_was(family, tmp_path):
    import transformers as tf

    tok, model, stream = _tiny(family)
    mask_id = None if family == "gpt_neox" else tok.mask_token_id
    steps = log_spaced_steps(5)
    assert steps == [0, 1, 2, 4, 5]
    batches = lm_batches(stream, 5, SEQ, BATCH, torch.Generator().manual_seed(1), mask_id)
    initial = copy.deepcopy(model.state_dict())
    probe = batches[0]["input_ids"]
    saver = SavePretrained(steps, lambda step: tmp_path / f"step{step}", tok)
    seen = _Seen(probe, steps)
    fit_on_cpu(HFLanguageModelModule(model, lr=LR), batches, [saver, seen], deterministic=True)
    assert saver.saved == steps and sorted(p.name for p in tmp_path.iterdir()) == sorted(f"step{k}" for k in steps)
    auto = tf.AutoModelForCausalLM if family == "gpt_neox" else tf.AutoModelForMaskedLM
    at0 = auto.from_pretrained(tmp_path / "step0", attn_implementation="eager")
    for name, value in at0.state_dict().items():
        assert torch.equal(value, initial[name]), name  # step 0 is the untrained model
    for step in steps:
        again = auto.from_pretrained(tmp_path / f"step{step}", attn_implementation="eager").eval()
        with torch.no_grad():
            torch.testing.assert_close(again(input_ids=probe).logits, seen.logits[step], atol=1e-5, rtol=0)
    assert not torch.allclose(seen.logits[0], seen.logits[5])
    reloaded = tf.AutoTokenizer.from_pretrained(tmp_path / "step5")
    assert reloaded.get_vocab() == tok.get_vocab()


def test_the_suite_builder_writes_the_layout_and_the_plain_loops_weights(tmp_path):
    """build_tiny_suite end to end (3 steps): suite.yaml and folders at the log-spaced steps per seed,
    step 0 = the seeded initial model, the last step = the plain loop on the suite's own tokenizer."""
    import transformers as tf
    import yaml

    from headlab.hf.texts import load_texts

    root = build_tiny_suite(tmp_path / "suite", seeds=(0, 1), n_steps=3, log=lambda line: None)
    suite = yaml.safe_load((root / "suite.yaml").read_text(encoding="utf-8"))
    want = [{"seed": s, "step": k, "path": f"seed{s}/step{k}"} for s in (0, 1) for k in (0, 1, 2, 3)]
    assert suite == {"name": "suite", "checkpoints": want}
    assert sorted(p.name for p in root.iterdir()) == ["seed0", "seed1", "suite.yaml"]
    assert sorted(p.name for p in (root / "seed1").iterdir()) == ["step0", "step1", "step2", "step3"]
    tok = tf.AutoTokenizer.from_pretrained(root / "seed1" / "step0")
    initial = build_tiny("gpt_neox", tok, seed=1, n_layers=2, n_heads=4, d_model=64, max_len=65)
    at0, at3 = (tf.AutoModelForCausalLM.from_pretrained(root / "seed1" / f"step{k}", attn_implementation="eager")
                .state_dict() for k in (0, 3))
    assert at0.keys() == initial.state_dict().keys()
    assert all(torch.equal(at0[k], v) for k, v in initial.state_dict().items())  # step 0: the seeded initial model
    texts = load_texts("en_news")
    stream = torch.tensor([i for t in texts for i in tok(t, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]])
    _plain_loop(initial, stream, 3, seed=1, mask_id=None, batch=16, seq=64, lr=3e-3)
    for name, value in initial.state_dict().items():
        torch.testing.assert_close(at3[name], value, atol=1e-5, rtol=0, msg=name)
    key = "gpt_neox.layers.0.attention.query_key_value.weight"
    assert (at3[key] - at0[key]).abs().max() > 1e-3


def test_the_script_refuses_zero_steps_in_one_line_and_writes_nothing(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("build_tiny_suite_script", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main([str(tmp_path / "out"), "--steps", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--steps 0" in err[0] and ">= 1" in err[0]
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="n_steps"):
        build_tiny_suite(tmp_path / "out", n_steps=0, log=lambda line: None)
    assert not (tmp_path / "out").exists()
