"""Wall-clock time of a forward pass, for comparing networks that do the same job (a pruned one
against the network it was pruned from): headlab-prune's speed-up and `benchmarks.pruning` both
time through `time_forward`, so the measured speed-up means one thing.

The networks are timed interleaved, round by round (alternating which goes first), in eval mode
under `torch.inference_mode`: a slow spell of a shared machine then hits every network alike, and
the median over rounds ignores the rounds it spoiled. Pure torch: networks in, milliseconds out.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch
from torch import nn

WARMUP = 3  # untimed rounds first: allocator and kernel caches


def time_forward(nets: dict[str, nn.Module], batch: int, seq: int, vocab: int, steps: int, warmup: int = WARMUP,
                 device: str = "cpu") -> dict[str, list[float]]:
    """Milliseconds per forward of each network on the same `batch` x `seq` token ids (all positions
    real), `steps` timed rounds after `warmup` untimed ones, interleaved round by round."""
    g = torch.Generator().manual_seed(batch)
    ids = torch.randint(1, vocab, (batch, seq), generator=g).to(device)
    mask = torch.ones_like(ids, dtype=torch.bool)
    times: dict[str, list[float]] = {name: [] for name in nets}
    modes = {name: net.training for name, net in nets.items()}
    for net in nets.values():
        net.eval()
    try:
        with torch.inference_mode():
            for round_ in range(warmup + steps):
                for name, net in (list(nets.items()) if round_ % 2 else list(nets.items())[::-1]):
                    _sync(device)
                    t0 = time.perf_counter()
                    net(ids, mask)
                    _sync(device)
                    if round_ >= warmup:
                        times[name].append((time.perf_counter() - t0) * 1e3)
    finally:
        for name, net in nets.items():
            net.train(modes[name])
    return times


@dataclass(frozen=True)
class Speedup:
    """Median ms per forward of the reference and the candidate network; `ratio` = reference / candidate
    (above 1: the candidate is faster)."""

    batch: int
    reference_ms: float
    candidate_ms: float

    @property
    def ratio(self) -> float:
        return self.reference_ms / self.candidate_ms


def measure_speedup(reference: nn.Module, candidate: nn.Module, batch: int, seq: int, vocab: int, steps: int,
                    warmup: int = WARMUP, device: str = "cpu") -> Speedup:
    """`time_forward` of the two networks and the medians of their rounds."""
    ms = time_forward({"reference": reference, "candidate": candidate}, batch, seq, vocab, steps, warmup, device)
    return Speedup(batch, statistics.median(ms["reference"]), statistics.median(ms["candidate"]))


def _sync(device: str) -> None:
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()
