"""C10 (pruning, article 5.2): the verdict its rule gives on hand-made sweep_prune_runs.csv tables,
and the per-job prune command it asks the runner for at each scale. Since version 5 the heads are
pruned on validation half A (prune.selection=val_half) and the drop is read on test: a direct
statistic, decided on its interval."""

from __future__ import annotations

import math
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
from scipy import stats

from headlab.reproduce.evidence import evaluate_claim
from headlab.reproduce.spec import PerJob, load_spec
from headlab.reproduce.verdict import ABSENT, INCONCLUSIVE, NOT_MEASURED, NOT_TESTABLE, SUPPORTED
from tests.reproduce.recorded import record_jobs

SPEC = Path(__file__).resolve().parents[2] / "conf" / "reproduce" / "c10_pruning.yaml"
LABEL = "ablation-valhalf-ft0"  # the label of prune.selection=val_half


def prune_runs(pruned: list[float], speedup: list[float], n_heads: int = 8, test_drop: list[float] | None = None,
               acc: float = 0.26) -> pd.DataFrame:
    """sweep_prune_runs.csv: seeds 0.. of the pruned config (unpruned next-token test accuracy about `acc`),
    plus rows the statistics must not read (the same jobs pruned on the whole val set, a random-ranking
    control that pruned much, a fine-tuned variant that pruned nothing)."""
    test_drop = test_drop or [0.004] * len(pruned)
    rows = [{"job": str(s), "seed": s, "model.n_heads": n_heads, "label": LABEL, "ranking": "ablation", "selection": "val_half",
             "fraction_heads_pruned": p, "speedup_b64": v, "test_acc_drop": d, "test_acc_before": acc + 0.002 * (s % 3)}
            for s, (p, v, d) in enumerate(zip(pruned, speedup, test_drop))]
    rows.append({"job": "0", "seed": 0, "model.n_heads": n_heads, "label": "ablation-ft0", "ranking": "ablation",
                 "selection": "val", "fraction_heads_pruned": 0.9, "speedup_b64": 3.0, "test_acc_drop": 0.3})
    rows.append({"job": "0", "seed": 0, "model.n_heads": n_heads, "label": "random-valhalf-ft0", "ranking": "random",
                 "selection": "val_half", "fraction_heads_pruned": 0.9, "speedup_b64": 3.0, "test_acc_drop": 0.3})
    rows.append({"job": "1", "seed": 1, "model.n_heads": n_heads, "label": "ablation-valhalf-ft50", "ranking": "ablation",
                 "selection": "val_half", "fraction_heads_pruned": 0.0, "speedup_b64": 1.0, "test_acc_drop": 0.0})
    return pd.DataFrame(rows)


def write(root: Path, sweep_name: str, table: pd.DataFrame) -> Path:
    aggregate = root / sweep_name / "2026-11-30_12-00-00_000000" / "aggregate"
    aggregate.mkdir(parents=True)
    record_jobs(aggregate.parent, load_spec(SPEC), "full" if sweep_name.endswith("-full") else "quick")
    table.to_csv(aggregate / "sweep_prune_runs.csv", index=False)
    return aggregate / "sweep_prune_runs.csv"


@pytest.mark.parametrize("pruned, speedup, verdict", [
    ([0.25, 0.3125, 0.25], [1.18, 1.20, 1.16], INCONCLUSIVE),    # [0.18, 0.36]: straddles a fifth
    ([0.3125, 0.3125, 0.375], [1.01, 1.02, 1.02], SUPPORTED),     # a third of the heads: beyond the 0.2 margin
    ([0.0625, 0.0625, 0.125], [1.03, 1.02, 1.04], ABSENT),  # one or two heads of 16: [0, 0.17] holds 0, short of a fifth
    ([0.375, 0.0625, 0.25], [1.30, 1.00, 1.15], INCONCLUSIVE),   # seeds disagree: the interval straddles the margin
])
def test_c10_is_decided_against_a_fifth_of_the_heads_pruned_on_val_half_a(tmp_path, pruned, speedup, verdict):
    """Heads chosen on half A of validation, the drop read on test: a direct statistic, so the interval
    decides; the rows pruned on the whole val set (label ablation-ft0) are not read."""
    source = write(tmp_path, "lm-prune", prune_runs(pruned, speedup, test_drop=[0.002, 0.006, 0.004]))
    result = evaluate_claim(load_spec(SPEC), tmp_path)
    assert result.verdict == verdict, result.reason
    assert "proxy" not in result.reason
    assert result.source == str(source)
    s = result.statistics["pruned"]
    half = stats.t.ppf(0.975, 2) * pd.Series(pruned).std(ddof=1) / math.sqrt(3)
    assert s.n == 3 and s.mean == pytest.approx(sum(pruned) / 3)  # the control and the fine-tuned label are not read
    low, high = max(0.0, sum(pruned) / 3 - half), min(1.0, sum(pruned) / 3 + half)  # a share: clipped to [0, 1]
    assert (s.ci_low, s.ci_high) == (pytest.approx(low), pytest.approx(high))
    assert result.statistics["speedup"].mean == pytest.approx(sum(speedup) / 3)
    drop = result.statistics["test_drop"]  # secondary: the held-out test-accuracy drop, mean over seeds
    assert drop.n == 3 and drop.mean == pytest.approx(0.004)


def test_the_full_scale_reads_its_own_sweep(tmp_path):
    write(tmp_path, "lm-prune-zh-full", prune_runs([0.25, 0.25, 0.3333, 0.25, 0.1667], [1.2, 1.17, 1.21, 1.18, 1.16]))
    result = evaluate_claim(load_spec(SPEC), tmp_path, scale="full")
    assert result.verdict == INCONCLUSIVE and result.statistics["pruned"].n == 5  # 0.25 [0.18, 0.32]: straddles a fifth


def test_an_lm_whose_induction_circuit_did_not_form_is_not_testable(tmp_path):
    """Pruned shares far beyond a fifth, from LMs that copy nothing (accuracy 0.02): no verdict on the margin."""
    write(tmp_path, "lm-prune", prune_runs([0.5, 0.5625, 0.5], [1.5, 1.6, 1.5], acc=0.02))
    result = evaluate_claim(load_spec(SPEC), tmp_path)
    assert result.verdict == NOT_TESTABLE and "formed.ci_low > 0.2" in result.reason, result.reason


def test_without_pruned_jobs_the_claim_is_not_measured(tmp_path):
    assert evaluate_claim(load_spec(SPEC), tmp_path).verdict == NOT_MEASURED
    table = prune_runs([0.25, 0.3, 0.25], [1.2, 1.2, 1.2])
    write(tmp_path, "lm-prune", table[table["label"] != LABEL])  # pruned on the whole val set only
    missing = evaluate_claim(load_spec(SPEC), tmp_path)
    assert missing.verdict == NOT_MEASURED and f"no usable rows with label={LABEL}" in missing.reason


def test_the_runner_prunes_every_lm_job_at_every_scale():
    spec = load_spec(SPEC)
    args = ("prune.ranking=ablation", "prune.max_drop=0.005", "prune.selection=val_half")
    for scale in ("quick", "cpu", "full"):
        assert spec.per_job(scale) == (PerJob("headlab-prune", args, ()),)
    assert not spec.proxy and spec.version >= 8 and spec.rules_frozen == "2026-12-04"
    # version 7: version 6's rule on the induction LM (2 x 8 heads), the induction circuit formed first;
    # version 8: the same rule on 15 fresh seeds, in one 8-head sweep with C18
    assert spec.confirmatory_seeds == tuple(range(2100, 2115)) and spec.evidence.sweep == "lm_roles"
    assert spec.prerequisite.text == "formed.ci_low > 0.2"
    assert "model.n_heads=8" in spec.overrides("cpu") and spec.sweep_name("cpu") == "lm8-cpu-v8"


def test_the_cpu_sweep_shared_with_c18_runs_both_per_job_commands_on_every_job(tmp_path, monkeypatch):
    """C10 v8 and C18 v8 read one sweep (lm8-cpu-v8): the plan holds it once, for both claims, and the
    runner prunes every completed job and scores its head importance, each once, then aggregates; the
    quick and full scales keep a sweep per claim."""
    from headlab.reproduce.jobs import sweep_jobs
    from headlab.reproduce.runner import Runner, run_plan
    from tests.reproduce.test_runner import TOOL, TRAIN, _calls

    c10, c18 = load_spec(SPEC), load_spec(SPEC.with_name("c18_gradients.yaml"))
    assert c18.confirmatory_seeds == c10.confirmatory_seeds and c18.overrides("cpu") == c10.overrides("cpu")
    prune = PerJob("headlab-prune", ("prune.ranking=ablation", "prune.max_drop=0.005", "prune.selection=val_half"), ())
    importance = PerJob("headlab-importance", ("importance.curves=false",), ())
    jobs = sweep_jobs([c10, c18], "cpu")
    assert [(j.sweep_name, j.claims, j.per_job) for j in jobs] == [("lm8-cpu-v8", ("C10", "C18"), (prune, importance))]
    for scale in ("quick", "full"):
        assert [(j.claims, j.per_job) for j in sweep_jobs([c10, c18], scale)] == [(("C10",), (prune,)), (("C18",), (importance,))]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("headlab-train", TRAIN), ("headlab-aggregate", TOOL), ("headlab-prune", TOOL),
                       ("headlab-importance", TOOL)):
        (bin_dir / name).write_text(f"#!{sys.executable}\n{textwrap.dedent(body)}")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("CALLS", str(tmp_path / "calls.jsonl"))
    runner = Runner(tmp_path / "sweeps", tmp_path / "runs", "cpu", "joblib", lanes=1, bin_dir=bin_dir, say=lambda _: None)
    run_plan(runner, jobs, [])
    calls = _calls(tmp_path)
    assert calls[0][0] == "headlab-train" and "sweep_name=lm8-cpu-v8" in calls[0]
    folder = Path(next(a.split("=", 1)[1] for a in calls[0] if a.startswith("hydra.sweep.dir=")))
    completed = sorted(str(d) for d in folder.iterdir() if (d / "summary.json").is_file())
    assert len(completed) == 4  # the stand-in trains 4 jobs
    for step in (prune, importance):
        ran = [c for c in calls if c[0] == step.command]
        assert sorted(c[1] for c in ran) == completed and all(c[2:2 + len(step.args)] == list(step.args) for c in ran)
    assert [c[0] for c in calls[1:]] == ["headlab-prune"] * 4 + ["headlab-importance"] * 4 + ["headlab-aggregate"]
    assert [(r.status, r.claims) for r in runner.results] == [("done", "C10 C18")]
