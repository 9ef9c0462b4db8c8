"""Tiny randomly initialised models of every family, saved in the hubs' layout: what tests and the local suite load.

The local checkpoint suite trains them through Lightning (`headlab.lit.hf_lm.build_tiny_suite`, which
takes its tokenizer, model and step list from here).

Nothing downloads: the tokenizer is trained here (the `tokenizers` library, seconds) on the shipped
English text (`en_news`, gensim's Lee corpus): WordPiece with `[CLS] ... [SEP]` for encoders,
byte-level BPE with a BOS token for decoders, as BERT and GPT-2/Pythia tokenise. The model is built
from its family's HF config (`transformers.<Family>Config`) with a seed and written with
`save_pretrained` (config.json + model.safetensors + tokenizer files), the layout
`headlab.hf.loading.load_model` reads and a hub snapshot has.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from headlab.errors import ConfigError

TINY_FAMILIES = ("bert", "roberta", "distilbert", "electra", "gpt2", "gpt_neox", "llama")


def train_tokenizer(texts: list[str], decoder: bool, vocab_size: int = 512) -> Any:
    """A `PreTrainedTokenizerFast` trained on `texts`: byte-level BPE (decoder) or WordPiece (encoder)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    if decoder:
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>", "<pad>"],
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
        tok.train_from_iterator(texts, trainer)
        return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                                       pad_token="<pad>")
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=special,
                                                                  show_progress=False))
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
                                                       special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
                                   pad_token="[PAD]", mask_token="[MASK]")


def tiny_config(family: str, vocab_size: int, n_layers: int = 2, n_heads: int = 4, d_model: int = 32,
                max_len: int = 160, pad_id: int = 0, bos_id: int | None = None) -> Any:
    """The family's HF config at toy size (eager attention, no dropout: patterns are deterministic)."""
    import transformers as tf

    common = dict(vocab_size=vocab_size, pad_token_id=pad_id)
    if family in ("bert", "roberta", "electra"):
        cls = {"bert": tf.BertConfig, "roberta": tf.RobertaConfig, "electra": tf.ElectraConfig}[family]
        extra = {"embedding_size": d_model} if family == "electra" else {}
        # RoBERTa numbers positions from pad_id + 1: room for max_len real tokens after it
        return cls(hidden_size=d_model, num_hidden_layers=n_layers, num_attention_heads=n_heads,
                   intermediate_size=4 * d_model, max_position_embeddings=max_len + pad_id + 2,
                   hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **extra, **common)
    if family == "distilbert":
        return tf.DistilBertConfig(dim=d_model, n_layers=n_layers, n_heads=n_heads, hidden_dim=4 * d_model,
                                   max_position_embeddings=max_len, dropout=0.0, attention_dropout=0.0, **common)
    if family == "gpt2":
        return tf.GPT2Config(n_embd=d_model, n_layer=n_layers, n_head=n_heads, n_positions=max_len, resid_pdrop=0.0,
                             embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=bos_id, eos_token_id=bos_id, **common)
    if family == "gpt_neox":
        return tf.GPTNeoXConfig(hidden_size=d_model, num_hidden_layers=n_layers, num_attention_heads=n_heads,
                                intermediate_size=4 * d_model, max_position_embeddings=max_len, rotary_pct=0.25,
                                attention_dropout=0.0, hidden_dropout=0.0, bos_token_id=bos_id, eos_token_id=bos_id,
                                tie_word_embeddings=False, **common)
    if family == "llama":
        return tf.LlamaConfig(hidden_size=d_model, num_hidden_layers=n_layers, num_attention_heads=n_heads,
                              num_key_value_heads=max(1, n_heads // 2), intermediate_size=2 * d_model,
                              max_position_embeddings=max_len, bos_token_id=bos_id, eos_token_id=bos_id, **common)
    raise ConfigError("family", family, f"one of {list(TINY_FAMILIES)}")


def build_tiny(family: str, tokenizer: Any, seed: int = 0, **sizes: Any) -> Any:
    """A randomly initialised model of `family` (encoders: the base model; decoders: the causal LM)."""
    import transformers as tf
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # save_pretrained's per-shard bar on stderr
    decoder = family in ("gpt2", "gpt_neox", "llama")
    config = tiny_config(family, len(tokenizer), pad_id=tokenizer.pad_token_id,
                         bos_id=tokenizer.bos_token_id if decoder else None, **sizes)
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    auto = tf.AutoModelForCausalLM if decoder else tf.AutoModel
    return auto.from_config(config, attn_implementation="eager").eval()


def save_tiny(family: str, folder: str | Path, seed: int = 0, texts: list[str] | None = None,
              tokenizer: Any = None, **sizes: Any) -> Path:
    """Build and `save_pretrained` a tiny `family` model with its tokenizer into `folder`; returns it."""
    if texts is None and tokenizer is None:
        from headlab.hf.texts import load_texts

        texts = load_texts("en_news")
    decoder = family in ("gpt2", "gpt_neox", "llama")
    tokenizer = tokenizer or train_tokenizer(texts, decoder)
    model = build_tiny(family, tokenizer, seed, **sizes)
    folder = Path(folder)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def log_spaced_steps(n_steps: int) -> list[int]:
    """0, 1, 2, 4, ... (powers of two below `n_steps`), then `n_steps`: Pythia's early spacing at toy scale."""
    steps, k = [0], 1
    while k < n_steps:
        steps.append(k)
        k *= 2
    return steps + [n_steps]
