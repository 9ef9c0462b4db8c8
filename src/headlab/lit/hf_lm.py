"""Training a Hugging Face language model through Lightning, saved in the hubs' layout at chosen steps.

`HFLanguageModelModule` trains an HF model with a language-model head (`AutoModelForCausalLM` for a
decoder, `AutoModelForMaskedLM` for an encoder) on the loss that head computes from `labels`: the
next token for a causal head (it shifts the labels itself), the masked tokens for a masked head
(positions labelled -100 are not scored). `lm_batches` draws those batches from a token stream
(BERT's masking: 15 % of the tokens replaced by [MASK] and scored). `SavePretrained` writes
`save_pretrained` (weights, config) and the tokenizer at the given steps, step 0 before any update.
`build_tiny_suite` puts them together into the local checkpoint suite (`scripts/build_tiny_suite.py`);
the optimiser and step are `headlab.lit.hf_base`'s, the ones fine-tuning uses.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import lightning as L
import torch

from headlab.errors import ConfigError
from headlab.hf.tiny import TINY_FAMILIES, build_tiny, log_spaced_steps, train_tokenizer
from headlab.lit.hf_base import HFTrainModule, fit_on_cpu, trained_loss

MASK_SHARE = 0.15  # BERT's share of masked tokens


class HFLanguageModelModule(HFTrainModule):
    """An HF causal- or masked-LM model trained with AdamW (`lr`, `weight_decay`) on its own LM loss."""

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.net(input_ids=input_ids).logits

    def loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.net(input_ids=batch["input_ids"], labels=batch["labels"]).loss


def lm_batches(stream: torch.Tensor, n_batches: int, seq_len: int, batch_size: int, generator: torch.Generator,
               mask_token_id: int | None = None) -> list[dict[str, torch.Tensor]]:
    """`n_batches` batches of `batch_size` windows of `seq_len + 1` tokens at random starts in `stream`.

    Without `mask_token_id` (a decoder): labels = input_ids. With it (an encoder): each token is
    masked with probability `MASK_SHARE`, replaced by `mask_token_id` in the input and kept as the
    label, every other label -100. Each batch draws its starts, then its mask, from `generator`."""
    batches = []
    for _ in range(n_batches):
        starts = torch.randint(0, len(stream) - seq_len - 1, (batch_size,), generator=generator)
        tokens = torch.stack([stream[s:s + seq_len + 1] for s in starts.tolist()])
        if mask_token_id is None:
            batches.append({"input_ids": tokens, "labels": tokens})
            continue
        masked = torch.rand(tokens.shape, generator=generator) < MASK_SHARE
        batches.append({"input_ids": torch.where(masked, torch.full_like(tokens, mask_token_id), tokens),
                        "labels": torch.where(masked, tokens, torch.full_like(tokens, -100))})
    return batches


class SavePretrained(L.Callback):
    """`net.save_pretrained` and `tokenizer.save_pretrained` into `folder(step)` after `step` optimiser
    steps, for each step in `steps` (0: before the first update); `saved` lists the steps written."""

    def __init__(self, steps: Iterable[int], folder: Callable[[int], Path], tokenizer: Any = None) -> None:
        self.steps, self.folder, self.tokenizer = set(steps), folder, tokenizer
        self.saved: list[int] = []

    def _save(self, module: HFTrainModule, step: int) -> None:
        if step in self.steps and step not in self.saved:
            folder = self.folder(step)
            module.net.save_pretrained(folder)
            if self.tokenizer is not None:
                self.tokenizer.save_pretrained(folder)
            self.saved.append(step)

    def on_train_start(self, trainer: L.Trainer, module: HFTrainModule) -> None:
        self._save(module, trainer.global_step)

    def on_train_batch_end(self, trainer: L.Trainer, module: HFTrainModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        self._save(module, trainer.global_step)


def build_tiny_suite(out: str | Path, seeds: tuple[int, ...] = (0, 1), n_steps: int = 300, family: str = "gpt_neox",
                     seq_len: int = 64, batch_size: int = 16, lr: float = 3e-3, vocab_size: int = 512,
                     log: Callable[[str], Any] = print) -> Path:
    """A local checkpoint suite in the hubs' layout: `family` trained `n_steps` steps on the shipped
    English text (`en_news`) per seed, next-token prediction for a decoder, masked-token prediction
    (15 % of tokens, BERT's objective) for an encoder, `save_pretrained` at `log_spaced_steps` into
    `out/seed{s}/step{k}/`, and `out/suite.yaml` naming every (seed, step, path). The seed sets the
    initialisation and the batch order; the tokenizer is shared, as in a real suite. Each seed is one
    `lightning.Trainer` fit of `HFLanguageModelModule` (AdamW, weight decay 0.01) on the CPU."""
    import yaml

    from headlab.hf.texts import load_texts

    if family not in TINY_FAMILIES:
        raise ConfigError("family", family, f"one of {list(TINY_FAMILIES)}")
    if isinstance(n_steps, bool) or not isinstance(n_steps, int) or n_steps < 1:
        raise ConfigError("n_steps", n_steps, "an integer >= 1")
    decoder = family in ("gpt2", "gpt_neox", "llama")
    out = Path(out)
    texts = load_texts("en_news")
    tokenizer = train_tokenizer(texts, decoder=decoder, vocab_size=vocab_size)
    end = tokenizer.eos_token_id if decoder else tokenizer.sep_token_id
    stream = torch.tensor([i for t in texts for i in tokenizer(t, add_special_tokens=False)["input_ids"] + [end]])
    save_at = log_spaced_steps(n_steps)
    entries = []
    for seed in seeds:
        t0 = time.perf_counter()
        model = build_tiny(family, tokenizer, seed=seed, n_layers=2, n_heads=4, d_model=64, max_len=seq_len + 1)
        if not decoder:  # the encoder under a masked-LM head; save_pretrained keeps the hub's layout (prefix + head)
            import transformers as tf

            torch.manual_seed(seed)
            model = tf.AutoModelForMaskedLM.from_config(model.config, attn_implementation="eager")
        batches = lm_batches(stream, n_steps, seq_len, batch_size, torch.Generator().manual_seed(seed),
                             None if decoder else tokenizer.mask_token_id)
        saver = SavePretrained(save_at, lambda step, seed=seed: out / f"seed{seed}" / f"step{step}", tokenizer)
        trainer = fit_on_cpu(HFLanguageModelModule(model, lr=lr, weight_decay=0.01), batches, [saver],
                             deterministic=True)
        entries += [{"seed": seed, "step": step, "path": f"seed{seed}/step{step}"} for step in saver.saved]
        log(f"seed {seed}: {n_steps} steps, final loss {trained_loss(trainer):.3f}, {len(saver.saved)} checkpoints, "
            f"{time.perf_counter() - t0:.1f} s")
    (out / "suite.yaml").write_text(yaml.safe_dump({"name": out.name, "checkpoints": entries}, sort_keys=False),
                                    encoding="utf-8")
    return out
