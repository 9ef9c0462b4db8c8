"""Section ``pruning``: inference speed of a head-pruned network vs the same network unpruned.

The claim under test (founding article, 5.2): removing 20-30% of the heads makes the model
15-20% faster. Both arms are the SAME network, one with `prune_heads` applied (the Q/K/V rows and
O columns removed), timed interleaved round by round in eval mode on the fast attention path, at
batch 1 and batch 64. The table puts the speed-up next to the share of heads and of parameters
removed: attention projections are only part of a block (the MLP and embeddings stay), so the
parameter share, not the head share, bounds what pruning heads can save.

By default the network is built at the benchmark's shape with random weights (speed does not
depend on the values) and `--prune-fraction` of each layer's heads removed. On a real run:
`python -m benchmarks.pruning --pruned RUN_DIR/pruned/ablation-ft0.ckpt` times that checkpoint
against the unpruned checkpoint it was pruned from.
"""

from __future__ import annotations

import argparse
import copy
from typing import Any

import torch
from torch import nn

from benchmarks.options import add_machine_options, configure_process
from benchmarks.report import median, table
from headlab.interventions.timing import time_forward  # the one timing method (headlab-prune's speed-up too)

BATCHES = (1, 64)


def build_pair(args: argparse.Namespace) -> tuple[nn.Module, nn.Module]:
    """(unpruned, pruned) at the benchmark's shape, `prune_fraction` of every layer's heads removed."""
    from headlab.model import HeadlabClassifier, ModelConfig

    config = ModelConfig(vocab_size=args.vocab, n_classes=2, max_len=args.seq, n_layers=args.layers, n_heads=args.heads,
                         d_model=args.d_model, d_ff=args.ff, dropout=0.0)
    torch.manual_seed(0)
    full = HeadlabClassifier(config).eval()
    n_drop = max(1, round(args.prune_fraction * args.heads))
    pruned = copy.deepcopy(full)
    pruned.prune_heads({layer: list(range(n_drop)) for layer in range(args.layers)})
    return full, pruned


def load_pair(path: str) -> tuple[nn.Module, nn.Module]:
    """A headlab-prune checkpoint and the unpruned checkpoint it names in `pruned_from`."""
    from headlab.lit.checkpointing import load_checkpoint
    from headlab.reload import load_network
    from headlab.store.run_dir import run_dir_of_pruned

    source = load_checkpoint(path).get("pruned_from")
    if not source:
        raise SystemExit(f"{path}: not a headlab-prune checkpoint (no 'pruned_from')")
    # recorded relative to the run dir (checkpoints/last.ckpt): works from any directory
    return load_network(run_dir_of_pruned(path).recorded_path(source)), load_network(path)


def measure(full: nn.Module, pruned: nn.Module, args: argparse.Namespace, seq: int, vocab: int) -> dict[str, Any]:
    from headlab.model import count_parameters

    full, pruned = full.to(args.device), pruned.to(args.device)
    heads = sum(full.heads_per_layer), sum(pruned.heads_per_layer)
    params = count_parameters(full, non_embedding=True), count_parameters(pruned, non_embedding=True)
    rows = []
    for batch in BATCHES:
        ms = time_forward({"unpruned": full, "pruned": pruned}, batch, seq, vocab, args.steps, args.warmup, args.device)
        a, b = median(ms["unpruned"]), median(ms["pruned"])
        rows.append({"batch": batch, "unpruned_ms": a, "pruned_ms": b, "speedup": a / b, "ms_all": ms})
    return {"heads": heads, "params_non_embedding": params, "fraction_heads_removed": 1 - heads[1] / heads[0],
            "fraction_params_removed": 1 - params[1] / params[0], "seq": seq, "rows": rows}


def print_table(result: dict[str, Any], where: str) -> None:
    print(f"\n## Pruned vs unpruned inference\n\n{where}; {result['heads'][0]} -> {result['heads'][1]} heads "
          f"({result['fraction_heads_removed']:.0%} removed), non-embedding parameters {result['params_non_embedding'][0]} -> "
          f"{result['params_non_embedding'][1]} ({result['fraction_params_removed']:.1%} removed), seq {result['seq']}, "
          "eval mode, fast attention path, median of the measured rounds\n")
    print(table(["batch", "unpruned ms", "pruned ms", "speed-up (unpruned / pruned)"],
                [[r["batch"], r["unpruned_ms"], r["pruned_ms"], r["speedup"]] for r in result["rows"]]))


def section(args: argparse.Namespace, out: dict[str, Any]) -> None:
    """The `pruning` section of `python -m benchmarks`, at the benchmark's model shape."""
    args.prune_fraction = getattr(args, "prune_fraction", 0.25)
    full, pruned = build_pair(args)
    result = measure(full, pruned, args, args.seq, args.vocab)
    out["pruning"] = result
    print_table(result, f"random weights, {args.layers} layers x {args.heads} heads, d_model {args.d_model}, "
                f"{args.prune_fraction:.0%} of each layer's heads pruned, {args.device}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.pruning", description=__doc__.splitlines()[0])
    add_machine_options(p)
    p.add_argument("--pruned", default=None, help="a headlab-prune checkpoint (RUN_DIR/pruned/*.ckpt)")
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--steps", type=int, default=60)  # fewer rounds: batch-1 medians swing by 2x on a loaded machine
    p.add_argument("--warmup", type=int, default=3)
    args = p.parse_args(argv)
    configure_process(args.threads)
    if args.pruned:
        full, pruned = load_pair(args.pruned)
        seq = min(args.seq, full.config.max_len)
        result = measure(full, pruned, args, seq, full.config.vocab_size)
        print_table(result, f"{args.pruned} vs its unpruned checkpoint, {args.device}, {args.threads} threads")
    else:
        args.prune_fraction, args.vocab, args.layers, args.heads, args.d_model, args.ff = 0.25, 8000, 4, 8, 128, 512
        section(args, {})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
