"""The benchmark's command line: one parser for the whole run, one for a fresh-process arm."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import torch

SECTIONS = ("train", "profile", "compile", "overhead", "memory", "sweep", "pruning", "lm")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Options of `python -m benchmarks`; shape defaults depend on `--quick`."""
    p = argparse.ArgumentParser(prog="python -m benchmarks", description="headlab speed and measurement benchmark")
    p.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated subset of {','.join(SECTIONS)}")
    add_machine_options(p)
    p.add_argument("--amp", default="none", choices=("none", "bf16", "fp16"), help="autocast dtype on cuda")
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
    p.add_argument("--json", default=None, help="also write all results as JSON here")
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
    check_device(p, args)
    if args.amp != "none" and args.device != "cuda":
        p.error("--amp needs --device cuda (CPU runs are fp32)")
    return args


def add_machine_options(p: argparse.ArgumentParser) -> None:
    """Options every process of a run shares (the parent passes them on to its fresh-process arms)."""
    p.add_argument("--quick", action="store_true", help="~1-minute version that checks the benchmark works")
    p.add_argument("--device", default="cpu", help="cpu or cuda (train, compile and overhead sections)")
    p.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")


def check_device(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.device not in ("cpu", "cuda"):
        p.error("--device must be cpu or cuda")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda but torch.cuda.is_available() is False")


def machine_argv(args: argparse.Namespace) -> list[str]:
    """The options a fresh-process arm needs to run like its parent."""
    return ["--threads", str(args.threads), "--device", args.device] + (["--quick"] if args.quick else [])


def configure_process(threads: int) -> None:
    """Torch threads, and caches in a temp dir with W&B offline: a benchmark writes nothing to $HOME."""
    torch.set_num_threads(threads)
    os.environ.setdefault("MPLCONFIGDIR", str(Path(tempfile.gettempdir()) / "headlab-bench-mpl"))
    os.environ.setdefault("WANDB_MODE", "offline")
