"""The benchmark's own arithmetic: ratios and verdicts come from the measured numbers, the fit timer
brackets what `trainer.fit` does, the options a fresh-process arm inherits. Fast: nothing is timed here."""

from __future__ import annotations

import doctest
import json
import time

import lightning as L
import pytest
from lightning.pytorch.demos.boring_classes import BoringModel

import benchmarks.fresh
import benchmarks.lm
import benchmarks.memory
import benchmarks.overhead
import benchmarks.report
import benchmarks.speed
from benchmarks.__main__ import RUNNERS
from benchmarks.fit_timer import FitTimer
from benchmarks.fresh import last_json_line
from benchmarks.options import SECTIONS, machine_argv, parse_args
from benchmarks.steps import Candidate, headlab_config


@pytest.mark.parametrize("module", [benchmarks.fresh, benchmarks.lm, benchmarks.memory, benchmarks.overhead, benchmarks.report,
                                    benchmarks.speed])
def test_docstring_examples_hold(module):
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_every_section_runs_in_the_documented_order():
    assert tuple(RUNNERS) == SECTIONS == ("train", "profile", "compile", "overhead", "memory", "sweep", "pruning", "lm")


def test_overhead_fractions_come_from_the_arms_numbers():
    on = {"fit_s": 63.6, "hooks_s": 3.6, "figures_s": 4.8, "measure_s": 3.0, "capture_s": 1.2, "metrics_s": 1.8,
          "write_s": 0.3, "grad_norm_s": 0.24, "n_measurements": 6, "steps": 220}
    s = benchmarks.overhead.summarise(on, {"fit_s": 60.0})
    assert s["overhead_fraction"] == pytest.approx((63.6 - 4.8 - 60.0) / 60.0)  # -2 %: the A/B can be negative
    assert s["train_s"] == pytest.approx(63.6 - 3.6 - 4.8)
    assert s["overhead_fraction_accounted"] == pytest.approx(3.6 / 55.2)
    assert s["per_measurement_s"] == pytest.approx(0.5)
    assert s["steady_epoch_fraction"] == pytest.approx((0.5 + 0.05 + 0.24) / 55.2)
    assert s["steps_per_measurement"] == pytest.approx(0.5 / (55.2 / 220))


def test_train_verdicts_compare_against_the_fastest_anchor_only():
    ms = {"headlab (fast path)": 100.0, "headlab (weight path)": 150.0, "torch nn.TransformerEncoder": 125.0}
    found = benchmarks.speed.verdicts(ms, flops=100e9, peak_gflops=2000.0)
    assert found == ["headlab fast / fastest anchor (torch nn.TransformerEncoder) = 0.800 (target <= 1.0): met",
                     "headlab fast path at 50.0% of the matmul peak (target >= 60%): NOT met"]  # no HF eager: no line


def test_model_flops_of_the_published_shape():
    """BENCHMARKS.md: 793,602 non-embedding params and 45.4 GFLOP a step at batch 64, seq 128, 4 layers."""
    from headlab.model import HeadlabClassifier

    args = parse_args([])
    net = HeadlabClassifier(headlab_config(args))
    params = Candidate("headlab", net, loss=lambda batch: None).non_embedding_params
    assert params == 793_602
    assert benchmarks.speed.model_flops(args.batch, args.seq, args.layers, args.d_model, params) == 45_449_576_448


def test_memory_growth_past_one_and_a_half_is_not_flat():
    rows = [{"mode": m, "size": n, "extra_mb": mb} for m, n, mb in
            (("stream", 256, 100.0), ("stream", 1024, 151.0), ("materialise", 256, 100.0), ("materialise", 1024, 400.0))]
    flat, verdict = benchmarks.memory.flatness(rows, (256, 1024))
    assert not flat
    assert verdict == ("streaming: 100 MB at 256 vs 151 MB at 1024 sequences (1.51x for 4x the probe; "
                       "materialising: 4.00x): NOT flat")


def test_quick_shape_and_what_an_arm_inherits():
    args = parse_args(["--quick", "--threads", "1"])
    assert (args.steps, args.warmup, args.batch, args.seq, args.layers) == (5, 1, 16, 64, 2)
    assert machine_argv(args) == ["--threads", "1", "--device", "cpu", "--quick"]
    with pytest.raises(SystemExit):
        parse_args(["--amp", "bf16"])  # autocast needs --device cuda
    with pytest.raises(SystemExit):
        parse_args(["--sections", "train,nope"])


def test_a_failed_arm_is_an_error_with_its_stderr():
    with pytest.raises(RuntimeError, match="Traceback: boom"):
        last_json_line('{"fit_s": 1}\n', "overhead --arm on", returncode=1, stderr="Traceback: boom")
    with pytest.raises(RuntimeError):
        last_json_line("no json here\n", "memory")


class _SlowFitEnd(L.Callback):
    """Stands in for the head-metrics figures: work in `on_fit_end` that `trainer.fit` pays for."""

    def on_fit_end(self, trainer, pl_module):
        time.sleep(0.3)


def test_fit_timer_brackets_fit_including_its_end(tmp_path):
    path = tmp_path / "fit.json"
    trainer = L.Trainer(max_epochs=1, limit_train_batches=2, limit_val_batches=1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        callbacks=[_SlowFitEnd(), FitTimer(str(path))], default_root_dir=tmp_path)
    t0 = time.perf_counter()
    trainer.fit(BoringModel())
    outside = time.perf_counter() - t0
    fit_s = json.loads(path.read_text())["fit_s"]
    assert 0.3 <= fit_s <= outside
