"""Section ``train``: one training step of headlab against what a user would pick instead.

Candidates run interleaved round by round (the order rotates each round) with one 2048x2048
matmul per round for the peak, so machine drift hits every candidate alike.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import time
from typing import Any

import torch
from torch import Tensor, nn

from benchmarks.report import median, table
from benchmarks.steps import Batch, Candidate, amp_dtype, headlab_config, logits_loss, make_batch, prepare, sync, train_step


class TorchEncoderClassifier(nn.Module):
    """What a user writes with `nn.TransformerEncoder`: same widths, pre-norm, GELU, [CLS] pooling."""

    def __init__(self, vocab: int, seq: int, d_model: int, layers: int, heads: int, ff: int, dropout: float) -> None:
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, d_model, padding_idx=0)
        self.pos_emb = nn.Embedding(seq, d_model)
        self.drop = nn.Dropout(dropout)
        layer = nn.TransformerEncoderLayer(d_model, heads, ff, dropout, activation="gelu", batch_first=True, norm_first=True)
        layer.self_attn.dropout = 0.0  # attention dropout 0, as headlab's default (it forces a slow SDPA path)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.ln_f = nn.LayerNorm(d_model)
        self.classifier = nn.Linear(d_model, 2)

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        pos = torch.arange(input_ids.size(1), device=input_ids.device)
        x = self.drop(self.tok_emb(input_ids) + self.pos_emb(pos))
        x = self.encoder(x, src_key_padding_mask=~attention_mask)
        return self.classifier(self.drop(self.ln_f(x[:, 0])))


def build_candidates(args: argparse.Namespace, device: torch.device) -> tuple[list[Candidate], list[str]]:
    """headlab fast and weight path first (the ratios refer to them), then the anchors; and what was skipped."""
    from headlab.model import HeadlabClassifier

    torch.manual_seed(0)
    fast = HeadlabClassifier(headlab_config(args))
    weight = HeadlabClassifier(headlab_config(args))
    cands = [
        Candidate("headlab (fast path)", fast, logits_loss(lambda i, m: fast(i, m).logits), "SDPA, no attention weights"),
        Candidate("headlab (weight path)", weight, logits_loss(lambda i, m: weight(i, m, return_patterns=True).logits),
                  "explicit softmax, [batch, head, q, k] kept"),
    ]
    te = TorchEncoderClassifier(args.vocab, args.seq, args.d_model, args.layers, args.heads, args.ff, args.dropout)
    cands.append(Candidate("torch nn.TransformerEncoder", te, logits_loss(te), "pre-norm, GELU, key padding mask"))
    bert, skipped = hf_bert_candidates(args)
    cands += bert
    return [prepare(c, args, device) for c in cands], skipped


def hf_bert_candidates(args: argparse.Namespace) -> tuple[list[Candidate], list[str]]:
    """`BertForSequenceClassification` at the same shape, sdpa and eager attention, if transformers is installed."""
    if importlib.util.find_spec("transformers") is None:
        return [], ["HF BertForSequenceClassification (sdpa, eager): `transformers` is not installed "
                    "(`pip install -e '.[bench]'`)"]
    from transformers import BertConfig, BertForSequenceClassification
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    cands, skipped = [], []
    for impl in ("sdpa", "eager"):
        config = BertConfig(vocab_size=args.vocab, hidden_size=args.d_model, num_hidden_layers=args.layers,
                            num_attention_heads=args.heads, intermediate_size=args.ff, hidden_act="gelu",
                            hidden_dropout_prob=args.dropout, attention_probs_dropout_prob=0.0,
                            max_position_embeddings=args.seq, num_labels=2, attn_implementation=impl)
        bert = BertForSequenceClassification(config)
        got = bert.config._attn_implementation  # transformers' own record of what it chose
        if got != impl:
            skipped.append(f"HF BERT {impl}: transformers gave attn_implementation={got!r}")
            continue
        cands.append(Candidate(f"HF BERT ({impl})", bert,
                               logits_loss(lambda i, m, net=bert: net(input_ids=i, attention_mask=m.long()).logits),
                               "post-norm, + token-type emb. and pooler"))
    return cands, skipped


def matmul_sample(device: torch.device, dtype: torch.dtype, n: int = 2048) -> float:
    """GFLOP/s of one n x n matmul (2 n^3 FLOPs), after the operands exist."""
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    reps = 20 if device.type == "cuda" else 1
    sync(device)
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    sync(device)
    return 2 * n**3 * reps / (time.perf_counter() - t0) / 1e9


def model_flops(batch: int, seq: int, layers: int, d_model: int, non_embedding_params: int) -> float:
    """FLOPs of one training step: 6 N T (weights) + 12 L S D T (attention scores and mixing).

    >>> model_flops(batch=2, seq=4, layers=1, d_model=8, non_embedding_params=100)
    7872
    """
    tokens = batch * seq
    return 6 * non_embedding_params * tokens + 12 * layers * seq * d_model * tokens


def interleave(cands: list[Candidate], batch: Batch, args: argparse.Namespace, device: torch.device,
               peak_dtype: torch.dtype) -> list[float]:
    """Rounds of (one matmul sample, one step of every candidate in rotating order); warm-up dropped."""
    peaks = []
    for r in range(args.warmup + args.steps):
        gflops = matmul_sample(device, peak_dtype)
        k = r % len(cands)
        for c in cands[k:] + cands[:k]:
            ms = train_step(c, batch, args, device)
            if r >= args.warmup:
                c.times_ms.append(ms)
        if r >= args.warmup:
            peaks.append(gflops)
    return peaks


def verdicts(ms: dict[str, float], flops: float, peak_gflops: float) -> list[str]:
    """The three targets, from the median ms/step of each candidate (by name).

    >>> for v in verdicts({"headlab (fast path)": 90.0, "headlab (weight path)": 120.0, "HF BERT (sdpa)": 100.0,
    ...                    "HF BERT (eager)": 110.0}, flops=6e9, peak_gflops=100.0): print(v)
    headlab fast / fastest anchor (HF BERT (sdpa)) = 0.900 (target <= 1.0): met
    headlab weight path / HF eager = 1.091 (target <= 1.0): NOT met
    headlab fast path at 66.7% of the matmul peak (target >= 60%): met
    """
    head, weight = ms["headlab (fast path)"], ms["headlab (weight path)"]
    anchors = {name: v for name, v in ms.items() if not name.startswith("headlab")}
    out = []
    if anchors:
        fastest = min(anchors, key=anchors.get)
        ratio = head / anchors[fastest]
        out.append(f"headlab fast / fastest anchor ({fastest}) = {ratio:.3f} (target <= 1.0): "
                   f"{'met' if ratio <= 1.0 else 'NOT met'}")
    eager = anchors.get("HF BERT (eager)", float("nan"))
    if not math.isnan(eager):
        out.append(f"headlab weight path / HF eager = {weight / eager:.3f} (target <= 1.0): "
                   f"{'met' if weight <= eager else 'NOT met'}")
    frac = flops / (head / 1e3) / 1e9 / peak_gflops
    out.append(f"headlab fast path at {frac:.1%} of the matmul peak (target >= 60%): {'met' if frac >= 0.6 else 'NOT met'}")
    return out


def section(args: argparse.Namespace, out: dict[str, Any]) -> None:
    device = torch.device(args.device)
    cands, skipped = build_candidates(args, device)
    batch = make_batch(args, device)
    peak_dtype = amp_dtype(args) or torch.float32
    peaks = interleave(cands, batch, args, device, peak_dtype)
    peak = median(peaks)
    flops = model_flops(args.batch, args.seq, args.layers, args.d_model, cands[0].non_embedding_params)
    ms = {c.name: median(c.times_ms) for c in cands}
    head = ms["headlab (fast path)"]
    rows, results = [], []
    for c in cands:
        gflops = flops / (ms[c.name] / 1e3) / 1e9
        ratio = head / ms[c.name] if not c.name.startswith("headlab") else float("nan")
        rows.append([c.name, ms[c.name], ratio, gflops, gflops / peak, f"{c.params / 1e6:.2f}M", c.note])
        results.append({"name": c.name, "ms_median": ms[c.name], "ms_all": c.times_ms, "headlab_ratio": ratio,
                        "gflops": gflops, "peak_fraction": gflops / peak, "params": c.params,
                        "non_embedding_params": c.non_embedding_params})
    print(f"\n## Training step ({args.device}, {args.amp if args.amp != 'none' else 'fp32'}, batch {args.batch}, seq {args.seq}, "
          f"d_model {args.d_model}, {args.layers} layers, {args.heads} heads, FF {args.ff}, vocab {args.vocab}, "
          f"dropout {args.dropout}, attention dropout 0, AdamW ({args.optimizer}), {torch.get_num_threads()} threads; "
          f"median of {args.steps} interleaved rounds after {args.warmup} warm-up)\n")
    print(f"Model FLOPs per step (headlab's {cands[0].non_embedding_params:,} non-embedding params): {flops / 1e9:.1f} GFLOP; "
          f"measured {peak_dtype} matmul peak (2048x2048, median of the same rounds): {peak:.1f} GFLOP/s\n")
    print(table(["candidate", "ms/step", "headlab fast / this", "GFLOP/s", "fraction of matmul peak", "params", "note"], rows))
    for s in skipped:
        print(f"\nskipped: {s}")
    found = verdicts(ms, flops, peak)
    print("\n" + "\n".join(f"- {v}" for v in found))
    out["train"] = {"candidates": results, "skipped": skipped, "peak_gflops": peak, "peak_all": peaks,
                    "model_gflop": flops / 1e9, "verdicts": found}
