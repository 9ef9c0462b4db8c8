#!/usr/bin/env python3
"""The GPU check: `make bench` on CUDA (bf16 autocast) and a short `experiment=demo` training on the GPU,
side by side in one call, so a GPU machine's throughput is measured the way the CPU numbers are.

    .venv/bin/python scripts/gpu_check.py [--out DIR] [--quick]

Writes DIR/bench.json (the benchmark's JSON), DIR/bench.txt and DIR/train.txt (what each printed) and
prints a short summary. Exit 0 when both ran, 1 when one failed, 2 when this machine has no CUDA device
(nothing is run then). CI never has a GPU: this script is for a machine that does.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "logs" / "gpu_check", help="where the outputs go")
    parser.add_argument("--quick", action="store_true", help="the 1-minute benchmark and 1 epoch of training")
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("gpu_check: no CUDA device on this machine: nothing run", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HEADLAB_LOG_DIR": str(args.out / "logs")}
    bench = [sys.executable, "-m", "benchmarks", "--device", "cuda", "--amp", "bf16", "--json", str(args.out / "bench.json"),
             *(["--quick"] if args.quick else [])]
    train = [str(Path(sys.executable).parent / "headlab-train"), "experiment=demo", "trainer.accelerator=gpu",
             "trainer.devices=1", f"trainer.max_epochs={1 if args.quick else 5}", f"hydra.run.dir={args.out / 'demo_gpu'}"]
    failed = 0
    for name, command in (("bench", bench), ("train", train)):
        started = time.perf_counter()
        proc = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
        (args.out / f"{name}.txt").write_text(proc.stdout + proc.stderr, encoding="utf-8")
        print(f"gpu_check: {name}: exit {proc.returncode} in {time.perf_counter() - started:.0f} s ({args.out / (name + '.txt')})")
        failed += proc.returncode != 0
    summary = args.out / "demo_gpu" / "summary.json"
    if summary.is_file():
        s = json.loads(summary.read_text(encoding="utf-8"))
        print(f"gpu_check: demo on {torch.cuda.get_device_name(0)}: val acc {s.get('val_acc')}, wall {s.get('wall_s')} s, "
              f"measuring {s.get('measure_s')} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
