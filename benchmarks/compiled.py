"""Section ``compile``: `module.compile=true` against eager, through the training module's own step.

Both variants are `HeadClassifierModule`s and run `training_loss(batch, template_kl=False)`, the loss
Lightning trains with, so the compiled one is exactly what `module.compile=true` gives a run.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import torch

from benchmarks.report import median, table
from benchmarks.steps import Candidate, headlab_config, make_batch, prepare, train_step


def module_candidate(name: str, compile: bool, args: argparse.Namespace, device: torch.device) -> Candidate:
    """A `HeadClassifierModule` (seed 0) whose training loss is its own `training_loss`."""
    from headlab.lit import HeadClassifierModule

    torch.manual_seed(0)
    module = HeadClassifierModule(headlab_config(args), compile=compile)
    return prepare(Candidate(name, module.net, lambda batch: module.training_loss(batch, template_kl=False)[1]), args, device)


def section(args: argparse.Namespace, out: dict[str, Any]) -> None:
    if args.quick:
        print("\n## torch.compile\n\nskipped: --quick (compiling takes about a minute on 2 cores)")
        out["compile"] = {"skipped": "--quick"}
        return
    device = torch.device(args.device)
    compiled = module_candidate("headlab compiled (module.compile=true)", True, args, device)
    eager = module_candidate("headlab eager", False, args, device)
    batch = make_batch(args, device)
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
    for r in range(args.warmup + args.steps):
        for c in (cands if r % 2 == 0 else cands[::-1]):
            ms = train_step(c, batch, args, device)
            if r >= args.warmup:
                c.times_ms.append(ms)
    e, cmp = median(eager.times_ms), median(compiled.times_ms)
    print("\n## torch.compile of the training forward (`module.compile=true`), same shape, interleaved\n")
    print(table(["variant", "ms/step", "ratio to eager", "first step (compile) s"],
                [["headlab eager", e, 1.0, ""], ["headlab compiled", cmp, cmp / e, f"{compile_s:.1f}"]]))
    out["compile"] = {"eager_ms": e, "compiled_ms": cmp, "ratio": cmp / e, "compile_s": compile_s, "first_step_ms": first}
