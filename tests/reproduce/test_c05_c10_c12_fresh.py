"""C5 v4, C10 v7, C12 v7 (issue 31, item 6) and their rules unchanged on fresh seeds since 2026-12-04 (C5 v5,
C10 v8, C12 v8): each on seeds no earlier version listed, C5 with the article's one soft-templated head, C12 on the
induction LM at equal optimiser steps with the fixed bar as prerequisite, C10 on the induction LM; each with the power
its spec states at the pipeline's alpha. Verdicts on hand-made tables, checked against scipy's t-interval."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.power import TTestPower

from headlab.reproduce.evidence import evaluate_claim
from headlab.reproduce.freeze import freeze_problems
from headlab.reproduce.spec import load_spec
from headlab.reproduce.spec_history import toplevel
from headlab.reproduce.verdict import ABSENT, NOT_TESTABLE, SUPPORTED
from tests.reproduce.recorded import record_jobs

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "conf" / "reproduce"
STAMP = "2026-12-03_12-00-00_000000"


def _sweep(root: Path, spec, table: pd.DataFrame, **changes) -> None:
    aggregate = root / spec.sweep_name("cpu") / STAMP / "aggregate"
    aggregate.mkdir(parents=True)
    record_jobs(aggregate.parent, spec, "cpu", **changes)
    table.to_csv(aggregate / spec.evidence.table, index=False)


def _interval(d: list[float]) -> tuple[float, float]:
    s = pd.Series(d)
    half = stats.t.ppf(0.975, len(s) - 1) * s.std(ddof=1) / math.sqrt(len(s))
    return s.mean() - half, s.mean() + half


@pytest.mark.skipif(toplevel(SPECS) is None, reason="not a git checkout: the specs' history cannot be read")
def test_no_earlier_version_of_c5_c10_c12_listed_their_confirmatory_seeds():
    specs = [load_spec(SPECS / f) for f in ("c05_templates.yaml", "c10_pruning.yaml", "c12_data_size.yaml")]
    assert [(s.version, s.confirmatory_seeds, s.sweep_name("cpu")) for s in specs] == \
        [(6, tuple(range(3400, 3428)), "templates-synthetic-cpu-v6"), (8, tuple(range(2100, 2115)), "lm8-cpu-v8"),
         (8, tuple(range(2800, 2806)), "lm-data-cpu-v8")]
    # each earlier version's confirmatory seeds are read as exploratory now
    assert all(set(earlier) <= set(s.exploratory_seeds)
               for s, earlier in zip(specs, ([*range(700, 716), *range(2400, 2412)], range(1500, 1516), range(1800, 1812))))
    assert [line for line in freeze_problems(specs) if "seeds" in line] == []


def _power(effect: float, sd: float, n: int) -> float:
    return TTestPower().power(effect_size=effect / sd, nobs=n, alpha=0.025 / 18, alternative="larger")


@pytest.mark.parametrize("file, look, margin, sd, sized, stated", [
    # version 4's look (seeds 700-715): +0.110, per-seed SD 0.066; the margin a point of accuracy
    ("c05_templates.yaml", 0.110, 0.01, 0.066, 12, "0.87"),
    # version 7's look (seeds 1500-1515): 0.426 of the heads pruned, SD 0.137; the margin a fifth. Sized for
    # 12 seeds; the sweep is shared with C18, which needs 15
    ("c10_pruning.yaml", 0.426, 0.2, 0.137, 12, "0.9"),
    # version 7's look (seeds 1800-1811): reversed, -0.260 (its size against no effect, 0), SD 0.079
    ("c12_data_size.yaml", 0.260, 0.0, 0.079, 6, "0.9"),
])
def test_c10_seeds_give_the_power_its_spec_states_at_the_pipelines_alpha(file, look, margin, sd, sized, stated):
    """The power each new version's notes state for its seed count, at one-sided 0.025 over 18 claims,
    recomputed with statsmodels from the last look the notes quote."""
    spec = load_spec(SPECS / file)
    notes = " ".join(spec.notes.split())
    assert f"{sized} seeds tell its mean from" in notes and f"with power {stated} at one-sided 0.025 / 18" in notes
    assert f"SD ({sd})" in notes
    power = _power(look - margin, sd, sized)
    digits = len(stated) - 2
    assert math.floor(power * 10 ** digits) / 10 ** digits == float(stated)  # the stated power, never more than this
    assert _power(look - margin, sd, sized - 1) < float(stated)  # sized by power: one seed fewer falls short
    n = len(spec.confirmatory_seeds)
    assert n >= sized and _power(look - margin, sd, n) >= power


def test_c5_reads_free_minus_one_soft_head_and_a_sweep_of_the_old_hard_templates_is_refused(tmp_path):
    spec = load_spec(SPECS / "c05_templates.yaml")
    free = [0.90, 0.91, 0.89, 0.92, 0.90, 0.88, 0.91, 0.90]
    soft = [0.84, 0.86, 0.83, 0.85, 0.86, 0.82, 0.85, 0.84]
    rows = [{"job": f"{m}-{s}", "seed": 2400 + s, "model.template_mode": m, "usable": True, "test_acc": a,
             "steps_to_converge": 300.0 + (60 + 10 * s if m == "soft" else 0)}
            for m, accs in (("free", free), ("soft", soft)) for s, a in enumerate(accs)]
    _sweep(tmp_path / "ok", spec, pd.DataFrame(rows))
    result = evaluate_claim(spec, tmp_path / "ok", scale="cpu")
    gap = result.statistics["acc_gap"]
    low, high = _interval([f - s for f, s in zip(free, soft)])
    assert gap.ci_low == pytest.approx(low) and gap.ci_high == pytest.approx(high) and gap.n == 8
    assert result.verdict == SUPPORTED  # [0.047, 0.066] beyond the one-point margin
    slower = result.statistics["slower"]  # soft minus free steps to converge: 60, 70, ..., 130
    assert slower.mean == pytest.approx(95.0) and slower.ci_low > 0
    # the same table from jobs that templated every head hard (versions 1-3) is another experiment
    _sweep(tmp_path / "old", spec, pd.DataFrame(rows), model__template_mode=["free", "hard"])
    refused = evaluate_claim(spec, tmp_path / "old", scale="cpu")
    assert refused.verdict != SUPPORTED and "model.template_mode is hard in its jobs" in refused.reason


def test_c12_trains_both_arms_the_same_steps_and_is_measured_at_the_same_steps(tmp_path):
    """Version 7: the LM's 3,000 steps are one epoch of 96,000 sequences and 20 of 4,800, so max_steps
    (not the data) ends both arms, and its callback measures on a step grid, never at an epoch's end."""
    from tests._runs import compose_train_config

    spec = load_spec(SPECS / "c12_data_size.yaml")
    assert spec.evidence.sweep == "lm_roles"
    overrides = spec.overrides("cpu")
    assert "data.n_train=4800,96000" in overrides and not any(o.startswith("trainer.") for o in overrides)
    cfg = compose_train_config(tmp_path / "run", ["experiment=induction", "data.n_train=4800", "model.n_heads=8"])
    assert cfg.trainer.max_steps == 3000 and cfg.trainer.max_epochs * 4800 // cfg.data.batch_size >= 3000
    assert cfg.data.n_train * 20 == 96000 and 96000 // cfg.data.batch_size == 3000
    assert cfg.callbacks.lm_metrics.every_n_steps == 100 and "measure_epoch_end" not in cfg.callbacks.lm_metrics


def _c12_rows(calibrated_small: list[float], calibrated_full: list[float], fixed: float) -> pd.DataFrame:
    return pd.DataFrame([{"job": f"{f}-{s}", "seed": 2800 + s, "data.n_train": f, "duplicate_fraction": fixed * (s % 2),
                          "calibrated_duplicate_fraction": c, "min_pair_js": 0.3}
                         for f, values in ((4800, calibrated_small), (96000, calibrated_full)) for s, c in enumerate(values)])


def test_c12_needs_heads_under_the_fixed_bar_before_the_calibrated_bar_decides(tmp_path):
    spec = load_spec(SPECS / "c12_data_size.yaml")
    small, full = [0.125, 0.25, 0.125, 0.0, 0.125, 0.25], [0.125, 0.125, 0.25, 0.125, 0.0, 0.125]
    _sweep(tmp_path / "none", spec, _c12_rows(small, full, 0.0))
    nothing = evaluate_claim(spec, tmp_path / "none", scale="cpu")
    assert nothing.verdict == NOT_TESTABLE and "duplicates_exist" in nothing.reason  # the calibrated bar alone cannot say
    _sweep(tmp_path / "some", spec, _c12_rows(small, full, 0.25))
    decided = evaluate_claim(spec, tmp_path / "some", scale="cpu")
    exist = decided.statistics["duplicates_exist"]  # 0.25 in the odd seeds of both arms: 6 of 12 runs
    low, _ = _interval([0.25 * (s % 2) for s in range(6)] * 2)
    assert exist.mean == pytest.approx(0.125) and exist.ci_low == pytest.approx(low) and low > 0
    d = decided.statistics["more_duplicates"]
    diffs = [a - b for a, b in zip(small, full)]  # 0, 1/8, -1/8, -1/8, 1/8, 1/8
    assert d.mean == pytest.approx(0.125 / 6) and (d.ci_low, d.ci_high) == pytest.approx(_interval(diffs))
    assert decided.verdict == ABSENT  # within a quarter of the heads of no effect on both sides
    assert decided.statistics["fixed_bar"].mean == pytest.approx(0.0)  # the absolute bar, reported beside it
