"""Section ``overhead``: what the head-metrics callback adds to one epoch of the demo.

Two readings of the same cost: the wall time of `trainer.fit` with vs without the callback, each
arm a fresh process (so it carries run-to-run noise of a few %), and the callback's own account
of the time inside its hooks in the measured run (exact, but blind to cache effects). Figures,
drawn once per run, are listed apart.

One arm alone: `python -m benchmarks.overhead --arm on|off [--quick] [--threads 2] [--device cpu]`
prints one JSON line (fit seconds and the run summary's timing keys).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.fresh import print_result, run_fresh
from benchmarks.options import add_machine_options, configure_process
from benchmarks.report import table

QUICK_TRAIN_BATCHES, QUICK_VAL_BATCHES = 40, 5


def arm(measure: bool, quick: bool = False, device: str = "cpu") -> dict[str, Any]:
    """One `train(cfg)` of the demo for 1 epoch, `trainer.fit` timed by a `FitTimer` callback."""
    from hydra import compose, initialize_config_module

    from headlab.tasks.train import train

    with tempfile.TemporaryDirectory(prefix="headlab-bench-") as tmp:
        run_dir, timer = Path(tmp) / "run", Path(tmp) / "fit.json"
        overrides = ["experiment=demo", "trainer.max_epochs=1", "test=false", "trainer.enable_progress_bar=false",
                     "callbacks.progress_bar=null", f"paths.output_dir={run_dir}", f"paths.log_dir={run_dir}",
                     "+callbacks.bench_fit_timer._target_=benchmarks.fit_timer.FitTimer",
                     f"+callbacks.bench_fit_timer.path={timer}"]
        if not measure:  # every other callback (checkpoints, lr monitor) stays: the difference is the head metrics alone
            overrides.append("callbacks.head_metrics=null")
        if quick:
            overrides += [f"trainer.limit_train_batches={QUICK_TRAIN_BATCHES}",
                          f"trainer.limit_val_batches={QUICK_VAL_BATCHES}"]
        if device == "cuda":
            overrides.append("trainer.accelerator=gpu")
        with initialize_config_module("headlab.conf", version_base="1.3"):
            cfg = compose("train", overrides=overrides)
        summary = train(cfg)
        fit_s = json.loads(timer.read_text())["fit_s"]
    return {"fit_s": fit_s, "figures_s": summary.get("figures_s", 0.0),
            "steps": summary.get("global_step"), "n_measurements": summary.get("n_measurements", 0),
            "measure_s": summary.get("measure_s", 0.0), "capture_s": summary.get("measure_capture_s", 0.0),
            "metrics_s": summary.get("measure_metrics_s", 0.0), "hooks_s": summary.get("head_metrics_s", 0.0),
            "grad_norm_s": summary.get("head_metrics_grad_norm_s", 0.0),
            "write_s": summary.get("head_metrics_write_s", 0.0), "val_acc": summary.get("val_acc")}


def summarise(on: dict[str, Any], off: dict[str, Any]) -> dict[str, float]:
    """The overhead fractions from the two arms' numbers (figures excluded from both readings).

    >>> s = summarise({"fit_s": 110.0, "hooks_s": 8.0, "figures_s": 2.0, "measure_s": 4.0, "write_s": 0.4,
    ...                "grad_norm_s": 0.5, "n_measurements": 4, "steps": 100, "capture_s": 1.0, "metrics_s": 3.0},
    ...               {"fit_s": 100.0})
    >>> {k: round(v, 4) for k, v in s.items()}  # doctest: +NORMALIZE_WHITESPACE
    {'overhead_fraction': 0.08, 'overhead_fraction_accounted': 0.08, 'steady_epoch_fraction': 0.016,
     'per_measurement_s': 1.0, 'per_capture_s': 0.25, 'per_metrics_s': 0.75, 'train_s': 100.0,
     'steps_per_measurement': 1.0}
    """
    n = max(on["n_measurements"], 1)
    train_s = on["fit_s"] - on["hooks_s"] - on["figures_s"]  # the measured run's fit without the callback
    per = on["measure_s"] / n
    steps = max(on["steps"] or 1, 1)
    return {
        "overhead_fraction": (on["fit_s"] - on["figures_s"] - off["fit_s"]) / off["fit_s"],
        "overhead_fraction_accounted": on["hooks_s"] / train_s,
        # an epoch past the early cadence: one measurement, its write, and a gradient norm per step
        "steady_epoch_fraction": (per + on["write_s"] / n + on["grad_norm_s"]) / train_s,
        "per_measurement_s": per, "per_capture_s": on["capture_s"] / n, "per_metrics_s": on["metrics_s"] / n,
        "train_s": train_s, "steps_per_measurement": per / (train_s / steps),
    }


def section(args: argparse.Namespace, out: dict[str, Any]) -> None:
    off = run_fresh("benchmarks.overhead", ["--arm", "off"], args)
    on = run_fresh("benchmarks.overhead", ["--arm", "on"], args)
    s = summarise(on, off)
    n = max(on["n_measurements"], 1)
    print(f"\n## Measurement overhead (zh_reviews, demo model, 1 epoch"
          f"{f' shortened to {QUICK_TRAIN_BATCHES} steps' if args.quick else ''}, {on['steps']} steps, fresh process per arm)\n")
    print(table(["", "fit wall s", "measurements", "measure s (capture + metrics)", "grad norms s", "writes s",
                 "figures s (once per run)"],
                [["callbacks.head_metrics=null", off["fit_s"], 0, "", "", "", ""],
                 ["head metrics, default cadence", on["fit_s"], on["n_measurements"],
                  f"{on['measure_s']:.2f} ({on['capture_s']:.2f} + {on['metrics_s']:.2f})", on["grad_norm_s"],
                  on["write_s"], on["figures_s"]]]))
    print(f"\nOverhead of this first epoch, figures excluded: {s['overhead_fraction']:.1%} from the wall times (A/B), "
          f"{s['overhead_fraction_accounted']:.1%} from the callback's own accounting ({on['hooks_s']:.2f} s inside its "
          f"hooks over {s['train_s']:.2f} s of training). It holds the early cadence ({n} measurements). A later epoch "
          f"measures once: {s['steady_epoch_fraction']:.1%} (one measurement, its write and {max(on['steps'] or 1, 1)} "
          f"gradient norms over the same epoch time).")
    print(f"One probe measurement (mean of {n}): {s['per_measurement_s']:.3f} s = {s['per_capture_s']:.3f} s capture "
          f"+ {s['per_metrics_s']:.3f} s metrics, i.e. {s['steps_per_measurement']:.1f} training steps.")
    out["overhead"] = {"off": off, "on": on, **{k: v for k, v in s.items() if k not in ("train_s", "steps_per_measurement")}}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.overhead", description="one arm of the overhead section")
    p.add_argument("--arm", required=True, choices=("on", "off"), help="head-metrics callback on or off")
    add_machine_options(p)
    args = p.parse_args(argv)
    configure_process(args.threads)
    print_result(arm(args.arm == "on", quick=args.quick, device=args.device))


if __name__ == "__main__":
    main()
