"""Build a local checkpoint suite to try `headlab-analyze-hf suite=...` without network.

    .venv/bin/python scripts/build_tiny_suite.py logs/tiny-suite            # 2 seeds x 300 steps, GPT-NeoX
    .venv/bin/headlab-analyze-hf suite=logs/tiny-suite data=en_news threads=1

A tiny GPT-NeoX (2 layers x 4 heads, d_model 64) trained on the shipped English text, saved with
`save_pretrained` at steps 0, 1, 2, 4, ..., 256, 300 for each seed (`headlab.lit.hf_lm.build_tiny_suite`: one
`lightning.Trainer` fit per seed on the CPU);
`--family bert` (or roberta, distilbert, electra) trains an encoder with BERT's masked-token objective.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="the suite folder to write (suite.yaml, seed{s}/step{k}/)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--family", default="gpt_neox",
                        choices=["gpt2", "gpt_neox", "llama", "bert", "roberta", "distilbert", "electra"])
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    if args.steps < 1:
        print(f"invalid --steps {args.steps}: expected an integer >= 1 (optimiser steps per seed)", file=sys.stderr)
        return 2
    import torch

    torch.set_num_threads(args.threads)
    from headlab.lit.hf_lm import build_tiny_suite

    build_tiny_suite(args.out, tuple(args.seeds), args.steps, args.family, log=lambda line: print(line, file=sys.stderr))
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
