#!/usr/bin/env python
"""`make bench`: how fast headlab trains and measures, side by side with what a user would pick instead.

Sections (all on by default; `--sections` picks some):

- ``train``: one training step (forward, cross-entropy, backward, AdamW step) of headlab's fast
  path, headlab's weight path (attention maps materialised), a `torch.nn.TransformerEncoder`
  classifier and Hugging Face `BertForSequenceClassification` with `attn_implementation` sdpa and
  eager, all at one shape and dropout, interleaved round by round (the order rotates each round)
  with a 2048x2048 matmul, so machine drift hits every candidate alike. Warm-up rounds are
  discarded; the table gives the median. Model FLOPs per step:
  6 x non-embedding params x tokens + 12 x layers x seq x d_model x tokens.
- ``profile``: torch.profiler table of one headlab fast-path step (where the time goes).
- ``compile``: `torch.compile` of the training forward, as `model.compile=true` does it: compile
  time (first step) and the step-time ratio to eager, interleaved.
- ``overhead``: wall time of one epoch (`trainer.fit`, validation included) on zh_reviews with
  the demo model, head-metrics callback at its default cadence vs `callbacks.head_metrics=null`, each in a
  fresh process, next to the callback's own account of the time inside its hooks; the figures,
  drawn once per run, apart; the cost of one probe measurement, split into capture and metrics.
- ``memory``: peak RSS added by measuring probes of 256, 2048 and 8192 sequences, streamed (what
  the callback does) vs all maps materialised first, each in a fresh process.
- ``sweep``: the `smoke` sweep with the basic launcher vs joblib `n_jobs=2`.

`--quick` runs a ~1-minute version (fewer steps, a shortened epoch, smaller probes, no sweep) that
checks the script works; its numbers are not meant to be quoted. `--device cuda` runs the
`train` and `compile` sections on a GPU, `--amp bf16|fp16` under autocast there (fp16 with a
GradScaler); the matmul peak is then measured in the autocast dtype.

Run: `make bench` (installs the `bench` extra: transformers, psutil) or
`.venv/bin/python scripts/bench.py [--quick] [--device cuda --amp bf16] [--json out.json]`.
A candidate whose package is missing is skipped with the reason printed.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib.util
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

REPO = Path(__file__).resolve().parents[1]
PROBE_SIZES = (256, 2048, 8192)
QUICK_PROBE_SIZES = (256, 1024)
SECTIONS = ("train", "profile", "compile", "overhead", "memory", "sweep")


# --------------------------------------------------------------------------- arguments
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="~1-minute version that checks the script works")
    p.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated subset of {','.join(SECTIONS)}")
    p.add_argument("--device", default="cpu", help="cpu or cuda (train and compile sections)")
    p.add_argument("--amp", default="none", choices=("none", "bf16", "fp16"), help="autocast dtype on cuda")
    p.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    p.add_argument("--steps", type=int, default=None, help="measured rounds (default 10, quick 5)")
    p.add_argument("--warmup", type=int, default=None, help="discarded warm-up rounds (default 2, quick 1)")
    p.add_argument("--batch", type=int, default=None, help="default 64 (quick 16)")
    p.add_argument("--seq", type=int, default=None, help="default 128 (quick 64)")
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--layers", type=int, default=None, help="default 4 (quick 2)")
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--ff", type=int, default=512)
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--dropout", type=float, default=0.1, help="hidden dropout of every candidate (attention dropout 0)")
    p.add_argument("--optimizer", default="fused", choices=("fused", "foreach"),
                   help="AdamW implementation of every candidate: fused (headlab's default) or torch's default foreach")
    p.add_argument("--json", type=Path, default=None, help="also write all results as JSON here")
    # internal: one arm of a section, run in a fresh process by the parent
    p.add_argument("--_arm", nargs="+", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    quick = args.quick
    args.steps = args.steps or (5 if quick else 10)
    args.warmup = args.warmup if args.warmup is not None else (1 if quick else 2)
    args.batch = args.batch or (16 if quick else 64)
    args.seq = args.seq or (64 if quick else 128)
    args.layers = args.layers or (2 if quick else 4)
    args.sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = set(args.sections) - set(SECTIONS)
    if unknown:
        p.error(f"unknown sections {sorted(unknown)}")
    if args.device not in ("cpu", "cuda"):
        p.error("--device must be cpu or cuda")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda but torch.cuda.is_available() is False")
    if args.amp != "none" and args.device != "cuda":
        p.error("--amp needs --device cuda (CPU runs are fp32)")
    return args


# --------------------------------------------------------------------------- helpers
def machine_info() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    info = {"date": dt.datetime.now().isoformat(timespec="seconds"), "cpu": cpu, "cores": os.cpu_count(),
            "torch": torch.__version__, "python": platform.python_version(), "threads": torch.get_num_threads()}
    with contextlib.suppress(OSError):
        info["loadavg_start"] = [round(x, 2) for x in os.getloadavg()]
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def amp_dtype(args: argparse.Namespace) -> torch.dtype | None:
    return {"none": None, "bf16": torch.bfloat16, "fp16": torch.float16}[args.amp]


def adamw(params: Any, args: argparse.Namespace) -> torch.optim.Optimizer:
    """The same AdamW for every candidate, so the comparison is of the models, not the optimisers."""
    return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01, **({"fused": True} if args.optimizer == "fused" else {}))


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def table(headers: list[str], rows: list[list[Any]]) -> str:
    def fmt(x: Any) -> str:
        if isinstance(x, float):
            return "n/a" if math.isnan(x) else (f"{x:.3f}" if abs(x) < 10 else f"{x:.1f}")
        return str(x)

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(fmt(x) for x in row) + " |" for row in rows]
    return "\n".join(lines)


def run_arm(args: argparse.Namespace, *arm: str, timeout: float = 1800) -> dict[str, Any]:
    """Run `bench.py --_arm ...` in a fresh process; its last stdout line is JSON."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--threads", str(args.threads), "--device", args.device]
    if args.quick:
        cmd.append("--quick")
    cmd += ["--_arm", *arm]
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"arm {' '.join(arm)} failed (rc {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1])


# --------------------------------------------------------------------------- candidates
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


@dataclass
class Candidate:
    name: str
    model: nn.Module
    logits: Callable[[Tensor, Tensor], Tensor]
    note: str = ""
    optimizer: torch.optim.Optimizer | None = None
    scaler: Any = None
    times_ms: list[float] = field(default_factory=list)

    @property
    def params(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    @property
    def non_embedding_params(self) -> int:
        emb = sum(m.weight.numel() for m in self.model.modules() if isinstance(m, nn.Embedding))
        return self.params - emb


def headlab_config(args: argparse.Namespace):
    from headlab.model import ModelConfig

    return ModelConfig(vocab_size=args.vocab, n_classes=2, max_len=args.seq, n_layers=args.layers, n_heads=args.heads,
                       d_model=args.d_model, d_ff=args.ff, dropout=args.dropout, attn_dropout=0.0)


def build_candidates(args: argparse.Namespace, device: torch.device) -> tuple[list[Candidate], list[str]]:
    from headlab.model import HeadlabClassifier

    skipped = []
    torch.manual_seed(0)
    fast = HeadlabClassifier(headlab_config(args))
    weight = HeadlabClassifier(headlab_config(args))
    cands = [
        Candidate("headlab (fast path)", fast, lambda i, m, net=fast: net(i, m).logits, "SDPA, no attention weights"),
        Candidate("headlab (weight path)", weight, lambda i, m, net=weight: net(i, m, return_patterns=True).logits,
                  "explicit softmax, [batch, head, q, k] kept"),
    ]
    te = TorchEncoderClassifier(args.vocab, args.seq, args.d_model, args.layers, args.heads, args.ff, args.dropout)
    cands.append(Candidate("torch nn.TransformerEncoder", te, te, "pre-norm, GELU, key padding mask"))
    if importlib.util.find_spec("transformers") is None:
        skipped.append("HF BertForSequenceClassification (sdpa, eager): `transformers` is not installed "
                       "(`pip install -e '.[bench]'`)")
    else:
        from transformers import BertConfig, BertForSequenceClassification
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        for impl in ("sdpa", "eager"):
            config = BertConfig(vocab_size=args.vocab, hidden_size=args.d_model, num_hidden_layers=args.layers,
                                num_attention_heads=args.heads, intermediate_size=args.ff, hidden_act="gelu",
                                hidden_dropout_prob=args.dropout, attention_probs_dropout_prob=0.0,
                                max_position_embeddings=args.seq, num_labels=2, attn_implementation=impl)
            bert = BertForSequenceClassification(config)
            got = bert.config._attn_implementation
            if got != impl:
                skipped.append(f"HF BERT {impl}: transformers gave attn_implementation={got!r}")
                continue
            cands.append(Candidate(f"HF BERT ({impl})", bert,
                                   lambda i, m, net=bert: net(input_ids=i, attention_mask=m.long()).logits,
                                   "post-norm, + token-type emb. and pooler"))
    for c in cands:
        c.model.to(device).train()
        c.optimizer = adamw(c.model.parameters(), args)
        if args.amp == "fp16":
            c.scaler = torch.amp.GradScaler("cuda")
    return cands, skipped


def make_batch(args: argparse.Namespace, device: torch.device) -> dict[str, Tensor]:
    """Random ids; [CLS]=1 first; lengths uniform in [seq/4, seq] with one full row (realistic padding)."""
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(args.seq // 4, args.seq + 1, (args.batch,), generator=g)
    lengths[0] = args.seq
    mask = torch.arange(args.seq)[None, :] < lengths[:, None]
    ids = torch.randint(3, args.vocab, (args.batch, args.seq), generator=g).masked_fill(~mask, 0)
    ids[:, 0] = 1
    labels = torch.randint(0, 2, (args.batch,), generator=g)
    return {"input_ids": ids.to(device), "attention_mask": mask.to(device), "labels": labels.to(device)}


def train_step(c: Candidate, batch: dict[str, Tensor], args: argparse.Namespace, device: torch.device) -> float:
    """One optimiser step; returns its wall time in ms (synchronised on cuda)."""
    dtype = amp_dtype(args)
    autocast = torch.autocast(device.type, dtype=dtype) if dtype is not None else contextlib.nullcontext()
    sync(device)
    t0 = time.perf_counter()
    with autocast:
        loss = F.cross_entropy(c.logits(batch["input_ids"], batch["attention_mask"]), batch["labels"])
    if c.scaler is not None:
        c.scaler.scale(loss).backward()
        c.scaler.step(c.optimizer)
        c.scaler.update()
    else:
        loss.backward()
        c.optimizer.step()
    c.optimizer.zero_grad(set_to_none=True)
    sync(device)
    return (time.perf_counter() - t0) * 1e3


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


def model_flops(args: argparse.Namespace, non_embedding_params: int) -> float:
    tokens = args.batch * args.seq
    return 6 * non_embedding_params * tokens + 12 * args.layers * args.seq * args.d_model * tokens


def interleave(cands: list[Candidate], batch: dict[str, Tensor], args: argparse.Namespace, device: torch.device,
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


def section_train(args: argparse.Namespace, device: torch.device, out: dict[str, Any]) -> None:
    cands, skipped = build_candidates(args, device)
    batch = make_batch(args, device)
    peak_dtype = amp_dtype(args) or torch.float32
    peaks = interleave(cands, batch, args, device, peak_dtype)
    peak = median(peaks)
    flops = model_flops(args, cands[0].non_embedding_params)
    anchors = [c for c in cands if not c.name.startswith("headlab")]
    fastest = min(anchors, key=lambda c: median(c.times_ms)) if anchors else None
    head = median(cands[0].times_ms)
    rows, results = [], []
    for c in cands:
        ms = median(c.times_ms)
        gflops = flops / (ms / 1e3) / 1e9
        ratio = head / ms if not c.name.startswith("headlab") else float("nan")
        rows.append([c.name, ms, ratio, gflops, gflops / peak, f"{c.params / 1e6:.2f}M", c.note])
        results.append({"name": c.name, "ms_median": ms, "ms_all": c.times_ms, "headlab_ratio": ratio,
                        "gflops": gflops, "peak_fraction": gflops / peak, "params": c.params,
                        "non_embedding_params": c.non_embedding_params})
    weight, eager = median(cands[1].times_ms), next((median(c.times_ms) for c in cands if c.name == "HF BERT (eager)"), float("nan"))
    print(f"\n## Training step ({args.device}, {args.amp if args.amp != 'none' else 'fp32'}, batch {args.batch}, seq {args.seq}, "
          f"d_model {args.d_model}, {args.layers} layers, {args.heads} heads, FF {args.ff}, vocab {args.vocab}, "
          f"dropout {args.dropout}, attention dropout 0, AdamW ({args.optimizer}), {torch.get_num_threads()} threads; "
          f"median of {args.steps} interleaved rounds after {args.warmup} warm-up)\n")
    print(f"Model FLOPs per step (headlab's {cands[0].non_embedding_params:,} non-embedding params): {flops / 1e9:.1f} GFLOP; "
          f"measured {peak_dtype} matmul peak (2048x2048, median of the same rounds): {peak:.1f} GFLOP/s\n")
    print(table(["candidate", "ms/step", "headlab fast / this", "GFLOP/s", "fraction of matmul peak", "params", "note"], rows))
    for s in skipped:
        print(f"\nskipped: {s}")
    verdicts = []
    if fastest is not None:
        ratio = head / median(fastest.times_ms)
        verdicts.append(f"headlab fast / fastest anchor ({fastest.name}) = {ratio:.3f} (target <= 1.0): "
                        f"{'met' if ratio <= 1.0 else 'NOT met'}")
    if not math.isnan(eager):
        verdicts.append(f"headlab weight path / HF eager = {weight / eager:.3f} (target <= 1.0): "
                        f"{'met' if weight <= eager else 'NOT met'}")
    frac = flops / (head / 1e3) / 1e9 / peak
    verdicts.append(f"headlab fast path at {frac:.1%} of the matmul peak (target >= 60%): {'met' if frac >= 0.6 else 'NOT met'}")
    print("\n" + "\n".join(f"- {v}" for v in verdicts))
    out["train"] = {"candidates": results, "skipped": skipped, "peak_gflops": peak, "peak_all": peaks,
                    "model_gflop": flops / 1e9, "verdicts": verdicts}


def section_compile(args: argparse.Namespace, device: torch.device, out: dict[str, Any]) -> None:
    """`model.compile=true`: HeadClassifierModule wraps the net in torch.compile for training steps."""
    from headlab.lit import HeadClassifierModule

    if args.quick:
        print("\n## torch.compile\n\nskipped: --quick (compiling takes about a minute on 2 cores)")
        out["compile"] = {"skipped": "--quick"}
        return
    torch.manual_seed(0)
    module = HeadClassifierModule(headlab_config(args), compile=True)
    torch.manual_seed(0)
    eager_net = HeadClassifierModule(headlab_config(args)).net
    batch = make_batch(args, device)
    compiled = Candidate("headlab compiled (model.compile=true)", module.net,
                         lambda i, m: module._train_forward(i, m).logits)
    eager = Candidate("headlab eager", eager_net, lambda i, m: eager_net(i, m).logits)
    for c in (compiled, eager):
        c.model.to(device).train()
        c.optimizer = adamw(c.model.parameters(), args)
        if args.amp == "fp16":
            c.scaler = torch.amp.GradScaler("cuda")
    try:
        t0 = time.perf_counter()
        first = train_step(compiled, batch, args, device)
        compile_s = time.perf_counter() - t0
    except Exception as err:  # no C++ compiler, unsupported platform, ...
        reason = f"torch.compile failed: {type(err).__name__}: {str(err).splitlines()[0][:200]}"
        print(f"\n## torch.compile\n\nskipped: {reason}")
        out["compile"] = {"skipped": reason}
        return
    cands = [eager, compiled]
    for c in cands:
        c.times_ms.clear()
    for r in range(args.warmup + args.steps):
        for c in (cands if r % 2 == 0 else cands[::-1]):
            ms = train_step(c, batch, args, device)
            if r >= args.warmup:
                c.times_ms.append(ms)
    e, cmp = median(eager.times_ms), median(compiled.times_ms)
    print("\n## torch.compile of the training forward (`model.compile=true`), same shape, interleaved\n")
    print(table(["variant", "ms/step", "ratio to eager", "first step (compile) s"],
                [["headlab eager", e, 1.0, ""], ["headlab compiled", cmp, cmp / e, f"{compile_s:.1f}"]]))
    out["compile"] = {"eager_ms": e, "compiled_ms": cmp, "ratio": cmp / e, "compile_s": compile_s, "first_step_ms": first}


def section_profile(args: argparse.Namespace, device: torch.device, out: dict[str, Any]) -> None:
    """Where a headlab fast-path training step spends its time (torch.profiler, ops by self time)."""
    from torch.profiler import ProfilerActivity, profile

    from headlab.model import HeadlabClassifier

    torch.manual_seed(0)
    net = HeadlabClassifier(headlab_config(args)).to(device).train()
    c = Candidate("headlab", net, lambda i, m: net(i, m).logits)
    c.optimizer = adamw(net.parameters(), args)
    batch = make_batch(args, device)
    for _ in range(2):
        train_step(c, batch, args, device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    steps = 3
    with profile(activities=activities) as prof:
        for _ in range(steps):
            train_step(c, batch, args, device)
    averages = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in averages)
    rows = []
    for e in sorted(averages, key=lambda e: e.self_cpu_time_total, reverse=True)[:15]:
        rows.append([e.key, e.self_cpu_time_total / 1e3 / steps, e.self_cpu_time_total / total, e.count // steps])
    print(f"\n## Profile of one headlab fast-path training step (torch.profiler, mean of {steps} steps, self CPU time)\n")
    print(table(["op", "ms/step", "share", "calls/step"], rows))
    out["profile"] = {"rows": rows, "total_ms_per_step": total / 1e3 / steps}


# --------------------------------------------------------------------------- overhead (fresh process per arm)
def arm_overhead(args: argparse.Namespace, measure: bool) -> dict[str, Any]:
    """One `train(cfg)` of the demo for 1 epoch; times `trainer.fit` (train epoch + validation + fit end)."""
    import lightning as L
    from hydra import compose, initialize_config_module

    import headlab.plots
    from headlab.cli.train import train

    fit_s: list[float] = []
    fit = L.Trainer.fit

    def timed_fit(self, *a, **k):  # the real fit, timed from outside
        t0 = time.perf_counter()
        try:
            return fit(self, *a, **k)
        finally:
            fit_s.append(time.perf_counter() - t0)

    L.Trainer.fit = timed_fit
    figures_s: list[float] = []
    draw = headlab.plots.write_run_figures

    def timed_figures(*a, **k):
        t0 = time.perf_counter()
        try:
            return draw(*a, **k)
        finally:
            figures_s.append(time.perf_counter() - t0)

    headlab.plots.write_run_figures = timed_figures
    run_dir = tempfile.mkdtemp(prefix="headlab-bench-")
    overrides = ["experiment=demo", "trainer.max_epochs=1", "test=false", "trainer.enable_progress_bar=false",
                 "callbacks.progress_bar=null", f"paths.output_dir={run_dir}", f"paths.log_dir={run_dir}"]
    if not measure:  # every other callback (checkpoints, lr monitor) stays: the difference is the head metrics alone
        overrides.append("callbacks.head_metrics=null")
    if args.quick:
        overrides += ["trainer.limit_train_batches=40", "trainer.limit_val_batches=5"]
    if args.device == "cuda":
        overrides.append("trainer.accelerator=gpu")
    with initialize_config_module("headlab.conf", version_base="1.3"):
        cfg = compose("train", overrides=overrides)
    summary = train(cfg)
    return {"fit_s": fit_s[0], "figures_s": sum(figures_s), "steps": summary.get("global_step"),
            "n_measurements": summary.get("n_measurements", 0), "measure_s": summary.get("measure_s", 0.0),
            "capture_s": summary.get("measure_capture_s", 0.0), "metrics_s": summary.get("measure_metrics_s", 0.0),
            "hooks_s": summary.get("head_metrics_s", 0.0), "grad_norm_s": summary.get("head_metrics_grad_norm_s", 0.0),
            "write_s": summary.get("head_metrics_write_s", 0.0), "val_acc": summary.get("val_acc")}


def section_overhead(args: argparse.Namespace, out: dict[str, Any]) -> None:
    """Two readings of the same cost: fit wall time with vs without the callback (fresh
    processes, so it carries run-to-run noise of a few %), and the callback's own accounting of
    the time spent inside its hooks in the measured run (exact, but blind to cache effects)."""
    off = run_arm(args, "overhead", "off")
    on = run_arm(args, "overhead", "on")
    n = max(on["n_measurements"], 1)
    train_s = on["fit_s"] - on["hooks_s"] - on["figures_s"]  # the measured run's fit without the callback
    ab = (on["fit_s"] - on["figures_s"] - off["fit_s"]) / off["fit_s"]
    inside = on["hooks_s"] / train_s
    per = on["measure_s"] / n
    steps = max(on["steps"] or 1, 1)
    # an epoch past the early cadence: one measurement, its write, and a gradient norm per step
    steady = (per + on["write_s"] / n + on["grad_norm_s"]) / train_s
    print(f"\n## Measurement overhead (zh_reviews, demo model, 1 epoch{' shortened to 40 steps' if args.quick else ''}, "
          f"{on['steps']} steps, fresh process per arm)\n")
    print(table(["", "fit wall s", "measurements", "measure s (capture + metrics)", "grad norms s", "writes s",
                 "figures s (once per run)"],
                [["callbacks.head_metrics=null", off["fit_s"], 0, "", "", "", ""],
                 ["head metrics, default cadence", on["fit_s"], on["n_measurements"],
                  f"{on['measure_s']:.2f} ({on['capture_s']:.2f} + {on['metrics_s']:.2f})", on["grad_norm_s"],
                  on["write_s"], on["figures_s"]]]))
    print(f"\nOverhead of this first epoch, figures excluded: {ab:.1%} from the wall times (A/B), {inside:.1%} "
          f"from the callback's own accounting ({on['hooks_s']:.2f} s inside its hooks over {train_s:.2f} s of "
          f"training). It holds the early cadence ({n} measurements). A later epoch measures once: "
          f"{steady:.1%} (one measurement, its write and {steps} gradient norms over the same epoch time).")
    print(f"One probe measurement (mean of {n}): {per:.3f} s = {on['capture_s'] / n:.3f} s capture "
          f"+ {on['metrics_s'] / n:.3f} s metrics, i.e. {per / (train_s / steps):.1f} training steps.")
    out["overhead"] = {"off": off, "on": on, "overhead_fraction": ab, "overhead_fraction_accounted": inside,
                       "steady_epoch_fraction": steady, "per_measurement_s": per,
                       "per_capture_s": on["capture_s"] / n, "per_metrics_s": on["metrics_s"] / n}


# --------------------------------------------------------------------------- probe memory (fresh process per arm)
def _rss_mb(field_name: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"{field_name} not in /proc/self/status")


def _current_rss_mb() -> float:
    if importlib.util.find_spec("psutil") is not None:
        import psutil

        return psutil.Process().memory_info().rss / 2**20
    return _rss_mb("VmRSS")


def _release_free_heap() -> None:
    """Collect garbage and hand free heap pages back to the OS (glibc `malloc_trim`; no-op elsewhere)."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _reset_peak() -> bool:
    """Reset VmHWM (Linux >= 4.0: write 5 to clear_refs); False where not possible."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def arm_memory(args: argparse.Namespace, mode: str, size: int) -> dict[str, Any]:
    """Measure a probe of `size` zh_reviews sequences once: streamed (the callback) or all maps kept."""
    import types

    from headlab.analysis import ProbeLayerAccumulator
    from headlab.data import TextDataModule
    from headlab.data.probe import select_probe
    from headlab.lit.callbacks.head_metrics import HeadMetricsCallback, capture_patterns, probe_chunks
    from headlab.model import HeadlabClassifier, ModelConfig

    dm = TextDataModule(source="zh_reviews", max_len=128, seed=0, min_freq=2)
    dm.setup("fit")
    train_split = dm._data().splits["train"]  # val holds ~1.7k reviews; larger probes come from train
    probe = select_probe(train_split.input_ids, train_split.labels, size, 0, dm.tokenizer.punctuation_ids)
    torch.manual_seed(0)
    net = HeadlabClassifier(ModelConfig(vocab_size=dm.vocab_size, n_classes=dm.n_classes, max_len=128, n_layers=2,
                                        n_heads=4, d_model=128, pooling="mean"))
    cb = HeadMetricsCallback(output_dir=tempfile.mkdtemp(prefix="headlab-bench-"))
    cb._probe = probe_chunks(probe, cb.chunk_size)  # as on_fit_start builds them
    n_layers, n_heads = len(net.blocks), net.config.n_heads
    cb._init_weights = None
    cb._cum_grad, cb._last_grad = torch.zeros(n_layers, n_heads), torch.zeros(n_layers, n_heads)
    warm = HeadMetricsCallback(output_dir=cb.output_dir)  # page in torch's kernels first: RSS counts code too
    warm._probe, warm._init_weights = cb._probe[:1], None
    warm._cum_grad, warm._last_grad = cb._cum_grad, cb._last_grad
    warm.measure(types.SimpleNamespace(net=net), step=0, epoch=0)
    _release_free_heap()  # else "before" holds whatever set-up freed but glibc kept: +-50 MB noise
    before = _current_rss_mb()
    resettable = _reset_peak()
    t0 = time.perf_counter()
    if mode == "stream":
        cb.measure(types.SimpleNamespace(net=net), step=0, epoch=0)
    else:  # what a naive loop does: keep every chunk's maps, reduce at the end
        net.eval()
        with torch.no_grad():
            kept = [(chunk, capture_patterns(net, chunk["input_ids"], chunk["attention_mask"])) for chunk in cb._probe]
            accs = [ProbeLayerAccumulator() for _ in range(n_layers)]
            for chunk, patterns in kept:
                for acc, pattern in zip(accs, patterns):
                    acc.update(pattern, chunk["attention_mask"], chunk["cls_mask"], chunk["punct_mask"])
            [acc.compute() for acc in accs]
    seconds = time.perf_counter() - t0
    peak = _rss_mb("VmHWM")
    return {"mode": mode, "size": size, "rss_before_mb": before, "peak_mb": peak, "extra_mb": peak - before,
            "seconds": seconds, "peak_reset": resettable}


def section_memory(args: argparse.Namespace, out: dict[str, Any]) -> None:
    if not Path("/proc/self/status").exists():
        print("\n## Probe memory\n\nskipped: needs Linux /proc (VmHWM) to read a per-measurement peak")
        out["memory"] = {"skipped": "no /proc"}
        return
    sizes = QUICK_PROBE_SIZES if args.quick else PROBE_SIZES
    results = [run_arm(args, "memory", mode, str(size)) for mode in ("stream", "materialise") for size in sizes]
    rows = [[r["mode"], r["size"], r["rss_before_mb"], r["peak_mb"], r["extra_mb"], r["seconds"]] for r in results]
    print("\n## Probe memory (demo model, zh_reviews sequences, chunks of 64 by length; fresh process per row)\n")
    print(table(["mode", "probe sequences", "RSS before MB", "peak RSS MB", "peak added by measuring MB", "seconds"], rows))
    stream = {r["size"]: r["extra_mb"] for r in results if r["mode"] == "stream"}
    small, big = stream[sizes[0]], stream[sizes[-1]]
    mat = {r["size"]: r["extra_mb"] for r in results if r["mode"] == "materialise"}
    flat = big <= 1.5 * small  # bounded by the largest chunk's working set, not by the probe size
    verdict = (f"streaming: {small:.0f} MB at {sizes[0]} vs {big:.0f} MB at {sizes[-1]} sequences "
               f"({big / max(small, 1e-9):.2f}x for {sizes[-1] // sizes[0]}x the probe; materialising: "
               f"{mat[sizes[-1]] / max(mat[sizes[0]], 1e-9):.2f}x): {'flat' if flat else 'NOT flat'}")
    print(f"\n- {verdict}")
    out["memory"] = {"rows": results, "flat": flat, "verdict": verdict}


# --------------------------------------------------------------------------- sweep
def section_sweep(args: argparse.Namespace, out: dict[str, Any]) -> None:
    from importlib.resources import files

    if args.quick:
        reason = "--quick (a sweep takes minutes)"
    elif not (files("headlab.conf") / "sweep" / "smoke.yaml").is_file():
        reason = "conf/sweep/smoke.yaml does not exist yet"
    elif importlib.util.find_spec("hydra_plugins.hydra_joblib_launcher") is None:
        reason = "hydra-joblib-launcher is not installed (`pip install -e '.[launchers]'`)"
    else:
        reason = None
    if reason:
        print(f"\n## Sweep throughput\n\nskipped: {reason}")
        out["sweep"] = {"skipped": reason}
        return
    rows, results = [], {}
    for name, extra in (("basic", []), ("joblib n_jobs=2", ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"])):
        log_dir = tempfile.mkdtemp(prefix="headlab-bench-sweep-")
        env = {**os.environ, "HEADLAB_LOG_DIR": log_dir, "OMP_NUM_THREADS": str(args.threads)}
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "headlab.cli.train", "-m", "sweep=smoke", *extra],
                              capture_output=True, text=True, env=env, cwd=REPO)
        wall = time.perf_counter() - t0
        summaries = [json.loads(p.read_text()) for p in Path(log_dir).rglob("summary.json")]
        done = sum(s.get("status") == "completed" for s in summaries)
        if proc.returncode != 0:
            print(f"sweep {name} failed (rc {proc.returncode}): {proc.stderr[-1500:]}")
        results[name] = {"wall_s": wall, "jobs": len(summaries), "completed": done, "rc": proc.returncode}
        rows.append([name, wall, len(summaries), done, 60 * done / wall])
    base, par = results["basic"]["wall_s"], results["joblib n_jobs=2"]["wall_s"]
    print("\n## Sweep throughput (`headlab-train -m sweep=smoke`)\n")
    print(table(["launcher", "wall s", "jobs", "completed", "jobs/min"], rows))
    print(f"\n- joblib n_jobs=2 vs basic: {base / par:.2f}x")
    out["sweep"] = results


# --------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    os.environ.setdefault("MPLCONFIGDIR", str(Path(tempfile.gettempdir()) / "headlab-bench-mpl"))
    os.environ.setdefault("WANDB_MODE", "offline")
    if args._arm:
        kind, *rest = args._arm
        result = arm_overhead(args, rest[0] == "on") if kind == "overhead" else arm_memory(args, rest[0], int(rest[1]))
        print(json.dumps(result))
        return 0
    device = torch.device(args.device)
    out: dict[str, Any] = {"machine": machine_info(), "args": {k: v for k, v in vars(args).items() if k != "_arm"}}
    m = out["machine"]
    print(f"# headlab bench {'(--quick: checks the script, do not quote) ' if args.quick else ''}{m['date']}")
    print(f"\nmachine: {m['cpu']}, {m['cores']} cores, torch {m['torch']}, {m['threads']} threads"
          f"{', GPU ' + m['gpu'] if 'gpu' in m else ''}; load average at start {m.get('loadavg_start')}")
    started = time.perf_counter()
    sections = {"train": lambda: section_train(args, device, out), "profile": lambda: section_profile(args, device, out),
                "compile": lambda: section_compile(args, device, out),
                "overhead": lambda: section_overhead(args, out), "memory": lambda: section_memory(args, out),
                "sweep": lambda: section_sweep(args, out)}
    for name in SECTIONS:
        if name in args.sections:
            t0 = time.perf_counter()
            sections[name]()
            out.setdefault("section_s", {})[name] = round(time.perf_counter() - t0, 1)
            sys.stdout.flush()
    with contextlib.suppress(OSError):
        out["machine"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    print(f"\nbench took {time.perf_counter() - started:.0f} s; load average at end {out['machine'].get('loadavg_end')}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
