"""Section ``memory``: peak RSS added by one probe measurement, streamed vs all maps kept.

`stream` is `headlab.measure.measure_probe` (what the training callback runs: chunks of 64,
longest first, per-head sums only); `materialise` is what a naive loop does: keep every chunk's
`[batch, head, q, k]` maps and reduce at the end. Each row runs in a fresh process; the kernels
are paged in by a warm-up chunk, freed heap is handed back, and VmHWM is reset just before measuring.

One row alone: `python -m benchmarks.memory --mode stream|materialise --size N [--threads 2]`
prints one JSON line (Linux only: it reads /proc/self/status).
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import importlib.util
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks.fresh import print_result, run_fresh
from benchmarks.options import add_machine_options, configure_process
from benchmarks.report import table

PROBE_SIZES = (256, 2048, 8192)
QUICK_PROBE_SIZES = (256, 1024)
MODES = ("stream", "materialise")
CHUNK_SIZE = 64


def train_probe(size: int):
    """`size` zh_reviews sequences drawn from the train split (val holds ~1.7k reviews), as the demo encodes them."""
    from headlab.data import TextDataModule
    from headlab.data.probe import select_probe

    dm = TextDataModule(source="zh_reviews", max_len=128, seed=0, min_freq=2)
    dm.setup("fit")
    train = dm.train_dataloader().dataset  # the encoded train split, in split order
    ids, labels = zip(*(train[i] for i in range(len(train))))
    probe = select_probe(ids, labels, size, 0, dm.tokenizer.punctuation_ids)
    return probe, dm.vocab_size, dm.n_classes


def arm(mode: str, size: int) -> dict[str, Any]:
    """Measure a probe of `size` sequences once with the demo-shaped model; RSS before, peak, seconds."""
    from headlab.analysis import ProbeLayerAccumulator
    from headlab.measure import capture_patterns, measure_probe, probe_chunks, snapshot_weights
    from headlab.model import HeadlabClassifier, ModelConfig

    probe, vocab_size, n_classes = train_probe(size)
    torch.manual_seed(0)
    net = HeadlabClassifier(ModelConfig(vocab_size=vocab_size, n_classes=n_classes, max_len=128, n_layers=2,
                                        n_heads=4, d_model=128, pooling="mean"))
    chunks = probe_chunks(probe, CHUNK_SIZE)
    n_layers, n_heads = len(net.blocks), net.config.n_heads
    grads = torch.zeros(n_layers, n_heads)  # the callback passes the last and cumulative gradient norms
    init = snapshot_weights(net)

    def stream(chunks_: list[dict[str, torch.Tensor]]) -> None:
        measure_probe(net, chunks_, init_weights=init, grad_norm=grads, cum_grad_norm=grads)

    stream(chunks[:1])  # page in torch's kernels first: RSS counts code too
    release_free_heap()  # else "before" holds whatever set-up freed but glibc kept: +-50 MB noise
    before = current_rss_mb()
    resettable = reset_peak()
    t0 = time.perf_counter()
    if mode == "stream":
        stream(chunks)
    else:  # what a naive loop does: keep every chunk's maps, reduce at the end
        net.eval()
        with torch.no_grad():
            kept = [(chunk, capture_patterns(net, chunk["input_ids"], chunk["attention_mask"])) for chunk in chunks]
            accs = [ProbeLayerAccumulator() for _ in range(n_layers)]
            for chunk, patterns in kept:
                for acc, pattern in zip(accs, patterns):
                    acc.update(pattern, chunk["attention_mask"], chunk["cls_mask"], chunk["punct_mask"])
            [acc.compute() for acc in accs]
    seconds = time.perf_counter() - t0
    peak = proc_status_mb("VmHWM")
    return {"mode": mode, "size": size, "rss_before_mb": before, "peak_mb": peak, "extra_mb": peak - before,
            "seconds": seconds, "peak_reset": resettable}


def proc_status_mb(field_name: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"{field_name} not in /proc/self/status")


def current_rss_mb() -> float:
    if importlib.util.find_spec("psutil") is not None:
        import psutil

        return psutil.Process().memory_info().rss / 2**20
    return proc_status_mb("VmRSS")


def release_free_heap() -> None:
    """Collect garbage and hand free heap pages back to the OS (glibc `malloc_trim`; no-op elsewhere)."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def reset_peak() -> bool:
    """Reset VmHWM (Linux >= 4.0: write 5 to clear_refs); False where not possible."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def flatness(rows: list[dict[str, Any]], sizes: tuple[int, ...]) -> tuple[bool, str]:
    """Whether streaming's added peak stays within 1.5x from the smallest to the largest probe.

    >>> rows = [{"mode": "stream", "size": 256, "extra_mb": 100.0}, {"mode": "stream", "size": 8192, "extra_mb": 140.0},
    ...         {"mode": "materialise", "size": 256, "extra_mb": 100.0},
    ...         {"mode": "materialise", "size": 8192, "extra_mb": 1000.0}]
    >>> flatness(rows, (256, 8192))[0], flatness(rows, (256, 8192))[1].split(": ")[-1]
    (True, 'flat')
    """
    stream = {r["size"]: r["extra_mb"] for r in rows if r["mode"] == "stream"}
    mat = {r["size"]: r["extra_mb"] for r in rows if r["mode"] == "materialise"}
    small, big = stream[sizes[0]], stream[sizes[-1]]
    flat = big <= 1.5 * small  # bounded by the largest chunk's working set, not by the probe size
    verdict = (f"streaming: {small:.0f} MB at {sizes[0]} vs {big:.0f} MB at {sizes[-1]} sequences "
               f"({big / max(small, 1e-9):.2f}x for {sizes[-1] // sizes[0]}x the probe; materialising: "
               f"{mat[sizes[-1]] / max(mat[sizes[0]], 1e-9):.2f}x): {'flat' if flat else 'NOT flat'}")
    return flat, verdict


def section(args: argparse.Namespace, out: dict[str, Any]) -> None:
    if not Path("/proc/self/status").exists():
        print("\n## Probe memory\n\nskipped: needs Linux /proc (VmHWM) to read a per-measurement peak")
        out["memory"] = {"skipped": "no /proc"}
        return
    sizes = QUICK_PROBE_SIZES if args.quick else PROBE_SIZES
    results = [run_fresh("benchmarks.memory", ["--mode", mode, "--size", str(size)], args)
               for mode in MODES for size in sizes]
    rows = [[r["mode"], r["size"], r["rss_before_mb"], r["peak_mb"], r["extra_mb"], r["seconds"]] for r in results]
    print(f"\n## Probe memory (demo model, zh_reviews sequences, chunks of {CHUNK_SIZE} by length; fresh process per row)\n")
    print(table(["mode", "probe sequences", "RSS before MB", "peak RSS MB", "peak added by measuring MB", "seconds"], rows))
    flat, verdict = flatness(results, sizes)
    print(f"\n- {verdict}")
    out["memory"] = {"rows": results, "flat": flat, "verdict": verdict}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.memory", description="one row of the memory section")
    p.add_argument("--mode", required=True, choices=MODES)
    p.add_argument("--size", required=True, type=int, help="probe sequences (from the zh_reviews train split)")
    add_machine_options(p)
    args = p.parse_args(argv)
    configure_process(args.threads)
    print_result(arm(args.mode, args.size))


if __name__ == "__main__":
    main()
