"""Section ``lm``: the causal LM's training step and what measuring its heads costs, side by side.

Two readings, both of `experiment=induction` (2 layers x 4 heads, d_model 64, attention only,
repeat_tokens, batch 32 of 33 tokens):

- interleaved, in one process: rounds of `LM_STEPS` training steps (forward, next-token loss,
  backward, clipping at 1.0, fused AdamW step; the module's own loss and optimiser) then one
  `measure_lm_probe` on the run's probe, so load on a shared machine hits both alike; the
  overhead is one measurement per `callbacks.lm_metrics.every_n_steps` steps over that many steps;
- a whole run in a fresh process: `headlab-train experiment=induction` for `LM_RUN_STEPS` steps
  (`--quick`: `QUICK_RUN_STEPS`), the callback's own time (`summary.json` `measure_s`: probe
  forward, scores, rows written) over the run's `wall_s`. A short run measures at step 0 and at fit
  end besides the cadence, so its share is above that of the 3,000-step run; both are printed.

One arm alone: `python -m benchmarks.lm --arm run [--quick]` prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks.fresh import print_result, run_fresh
from benchmarks.options import add_machine_options, configure_process
from benchmarks.report import table

LM_STEPS = 20                 # training steps per round
LM_RUN_STEPS, QUICK_RUN_STEPS = 600, 200
EXPERIMENT = ["experiment=induction"]


def _compose(overrides: list[str]) -> Any:
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_module("headlab.conf", version_base="1.3"):
        return compose("train", overrides=EXPERIMENT + overrides)


def interleaved(rounds: int, warmup: int) -> dict[str, Any]:
    """Per round: the mean ms of `LM_STEPS` training steps, then the ms of one probe measurement."""
    from headlab.measure.lm_probe import measure_lm_probe
    from headlab.config import instantiate
    from headlab.tasks.build import build_module

    cfg = _compose([])
    torch.set_num_threads(int(cfg.threads))  # the experiment's threads=1, as in the whole-run arm
    data = instantiate(cfg.data)
    data.setup("fit")
    module = build_module(cfg, data)
    net = module.net.train()
    module.scheduler_factory = None  # adamw_constant's schedule is a constant lr; without a Trainer it cannot size itself
    optimizer = module.configure_optimizers()["optimizer"]  # the module's own (fused) AdamW and parameter groups
    batches = iter(data.train_dataloader())
    size = int(cfg.callbacks.lm_metrics.standard_probe_size)
    repeated = data.repeated_probe(size) if size else None  # the callback's standard test, measured with the probe
    step_ms, measure_ms = [], []
    for r in range(warmup + rounds):
        started = time.perf_counter()
        for _ in range(LM_STEPS):
            tokens = next(batches)["input_ids"]
            loss = module.next_token_loss(net(tokens).logits, tokens)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), float(cfg.trainer.gradient_clip_val))
            optimizer.step()
        steps = (time.perf_counter() - started) * 1000 / LM_STEPS
        started = time.perf_counter()
        measure_lm_probe(net, data.probe, data.probe_half_len, int(cfg.callbacks.lm_metrics.chunk_size), repeated)
        measured = (time.perf_counter() - started) * 1000
        if r >= warmup:
            step_ms.append(steps)
            measure_ms.append(measured)
    every = int(cfg.callbacks.lm_metrics.every_n_steps)
    step, measure = statistics.median(step_ms), statistics.median(measure_ms)
    return {"step_ms": step_ms, "measure_ms": measure_ms, "step_ms_median": step, "measure_ms_median": measure,
            "every_n_steps": every, "overhead_fraction": overhead_fraction(measure, step, every)}


def overhead_fraction(measure_ms: float, step_ms: float, every_n_steps: int) -> float:
    """One measurement per `every_n_steps` steps, over those steps' time.

    >>> round(overhead_fraction(112.0, 104.0, 100), 4)
    0.0108
    """
    return measure_ms / (every_n_steps * step_ms)


def run_arm(quick: bool = False) -> dict[str, Any]:
    """`train(cfg)` of experiment=induction, shortened; the summary's timing keys."""
    from headlab.tasks.train import train

    steps = QUICK_RUN_STEPS if quick else LM_RUN_STEPS
    with tempfile.TemporaryDirectory(prefix="headlab-bench-lm-") as tmp:
        run_dir = Path(tmp) / "run"
        cfg = _compose([f"trainer.max_steps={steps}", "test=false", "callbacks.lm_metrics.figures=false",
                        f"paths.output_dir={run_dir}", f"paths.log_dir={run_dir}"])
        summary = train(cfg)
    return {"steps": summary.get("global_step"), "wall_s": summary.get("wall_s"), "measure_s": summary.get("measure_s"),
            "n_measurements": summary.get("n_measurements")}


def run_fraction(run: dict[str, Any], full_steps: int = 3000, every_n_steps: int = 100) -> dict[str, float]:
    """The run's measured share, and the same per-measurement time extrapolated to the full run
    (measurements at 0, every `every_n_steps` and the end: full_steps / every_n_steps + 1).

    >>> {k: round(v, 4) for k, v in run_fraction({"steps": 200, "wall_s": 20.0, "measure_s": 0.3, "n_measurements": 3}).items()}
    {'fraction': 0.015, 'per_measurement_s': 0.1, 'full_run_fraction': 0.0104}
    """
    per = run["measure_s"] / max(run["n_measurements"], 1)
    step_s = (run["wall_s"] - run["measure_s"]) / max(run["steps"], 1)
    n_full = full_steps // every_n_steps + 1
    return {"fraction": run["measure_s"] / run["wall_s"], "per_measurement_s": per,
            "full_run_fraction": per * n_full / (per * n_full + step_s * full_steps)}


def section(args: argparse.Namespace, out: dict[str, Any]) -> None:
    rounds, warmup = (3, 1) if args.quick else (5, 1)
    side = interleaved(rounds, warmup)
    run = run_fresh("benchmarks.lm", ["--arm", "run"], args)
    whole = run_fraction(run, every_n_steps=side["every_n_steps"])
    print(f"\n## Language model (experiment=induction: 2 layers x 4 heads, d_model 64, attention only, batch 32 x 33 tokens)\n")
    print(table(["what", "value", "how"], [
        ["training step", f"{side['step_ms_median']:.1f} ms",
         f"median of {rounds} rounds of {LM_STEPS} steps ({min(side['step_ms']):.1f}-{max(side['step_ms']):.1f}), after {warmup} warm-up round"],
        ["one LM probe measurement", f"{side['measure_ms_median']:.1f} ms",
         f"median of {rounds}, one after each round of steps ({min(side['measure_ms']):.1f}-{max(side['measure_ms']):.1f})"],
        ["measurement overhead, interleaved", f"{side['overhead_fraction']:.2%}",
         f"one measurement per {side['every_n_steps']} steps: {side['measure_ms_median']:.1f} / ({side['every_n_steps']} x {side['step_ms_median']:.1f})"],
        [f"measurement overhead, {run['steps']}-step run", f"{whole['fraction']:.2%}",
         f"fresh process: measure_s {run['measure_s']:.2f} s over wall_s {run['wall_s']:.1f} s, {run['n_measurements']} measurements"],
        ["same, extrapolated to 3,000 steps", f"{whole['full_run_fraction']:.2%}",
         f"{whole['per_measurement_s'] * 1000:.0f} ms per measurement x 31 measurements"],
    ]))
    out["lm"] = {"interleaved": side, "run": run, **whole}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.lm", description="the lm section (or its whole-run arm)")
    p.add_argument("--arm", choices=("run", "interleaved"), default="interleaved")
    add_machine_options(p)
    args = p.parse_args(argv)
    configure_process(args.threads)
    if args.arm == "run":
        print_result(run_arm(quick=args.quick))
    else:
        rounds, warmup = (3, 1) if args.quick else (5, 1)
        print(json.dumps(interleaved(rounds, warmup)))


if __name__ == "__main__":
    main()
