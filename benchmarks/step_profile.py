"""Section ``profile``: where a headlab fast-path training step spends its time (torch.profiler, self time)."""

from __future__ import annotations

import argparse
from typing import Any

import torch

from benchmarks.report import table
from benchmarks.steps import Candidate, headlab_config, logits_loss, make_batch, prepare, train_step

STEPS = 3
TOP_OPS = 15


def section(args: argparse.Namespace, out: dict[str, Any]) -> None:
    from torch.profiler import ProfilerActivity, profile

    from headlab.model import HeadlabClassifier

    device = torch.device(args.device)
    torch.manual_seed(0)
    net = HeadlabClassifier(headlab_config(args))
    c = prepare(Candidate("headlab", net, logits_loss(lambda i, m: net(i, m).logits)), args, device)
    batch = make_batch(args, device)
    for _ in range(2):
        train_step(c, batch, args, device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        for _ in range(STEPS):
            train_step(c, batch, args, device)
    averages = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in averages)
    rows = [[e.key, e.self_cpu_time_total / 1e3 / STEPS, e.self_cpu_time_total / total, e.count // STEPS]
            for e in sorted(averages, key=lambda e: e.self_cpu_time_total, reverse=True)[:TOP_OPS]]
    print(f"\n## Profile of one headlab fast-path training step (torch.profiler, mean of {STEPS} steps, self CPU time)\n")
    print(table(["op", "ms/step", "share", "calls/step"], rows))
    out["profile"] = {"rows": rows, "total_ms_per_step": total / 1e3 / STEPS}
