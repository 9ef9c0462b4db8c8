"""C10 (pruning, article 5.2): the verdict its rule gives on hand-made sweep_prune_runs.csv tables,
and the per-job prune command it asks the runner for at each scale."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from scipy import stats

from headlab.reproduce.evidence import evaluate_claim
from headlab.reproduce.spec import PerJob, load_spec
from headlab.reproduce.verdict import INCONCLUSIVE, NOT_MEASURED
from tests.reproduce.recorded import record_jobs

SPEC = Path(__file__).resolve().parents[2] / "conf" / "reproduce" / "c10_pruning.yaml"


def prune_runs(pruned: list[float], speedup: list[float], n_heads: int = 8) -> pd.DataFrame:
    """sweep_prune_runs.csv: seeds 0.. of the pruned config, plus rows the statistics must not read
    (a random-ranking control that pruned much, a fine-tuned variant that pruned nothing)."""
    rows = [{"job": str(s), "seed": s, "model.n_heads": n_heads, "label": "ablation-ft0", "ranking": "ablation",
             "fraction_heads_pruned": p, "speedup_b64": v} for s, (p, v) in enumerate(zip(pruned, speedup))]
    rows.append({"job": "0", "seed": 0, "model.n_heads": n_heads, "label": "random-ft0", "ranking": "random",
                 "fraction_heads_pruned": 0.9, "speedup_b64": 3.0})
    rows.append({"job": "1", "seed": 1, "model.n_heads": n_heads, "label": "ablation-ft50", "ranking": "ablation",
                 "fraction_heads_pruned": 0.0, "speedup_b64": 1.0})
    return pd.DataFrame(rows)


def write(root: Path, sweep_name: str, table: pd.DataFrame) -> Path:
    aggregate = root / sweep_name / "2026-11-30_12-00-00_000000" / "aggregate"
    aggregate.mkdir(parents=True)
    record_jobs(aggregate.parent, load_spec(SPEC), "full" if sweep_name.endswith("-full") else "quick")
    table.to_csv(aggregate / "sweep_prune_runs.csv", index=False)
    return aggregate / "sweep_prune_runs.csv"


@pytest.mark.parametrize("pruned, speedup, before", [
    ([0.25, 0.3125, 0.25], [1.18, 1.20, 1.16], None),          # [0.18, 0.36]: straddles a fifth
    ([0.3125, 0.3125, 0.375], [1.01, 1.02, 1.02], "supported"),  # a third of the heads: beyond the 0.2 margin
    ([0.0625, 0.0625, 0.125], [1.03, 1.02, 1.04], "contradicted"),  # one or two heads of 16: short of a fifth
    ([0.375, 0.0625, 0.25], [1.30, 1.00, 1.15], None),   # seeds disagree: the interval straddles the margin
])
def test_c10_is_read_against_a_fifth_of_the_heads_but_never_decided_on_its_proxy(tmp_path, pruned, speedup, before):
    """Heads pruned against the validation set that also chose them: whatever the interval says, the
    verdict stays inconclusive (the reason says what it would have been and why not)."""
    source = write(tmp_path, "heads-zh_reviews", prune_runs(pruned, speedup))
    result = evaluate_claim(load_spec(SPEC), tmp_path)
    assert result.verdict == INCONCLUSIVE, result.reason
    if before:
        assert result.reason.startswith(f"{before} on a proxy, so not decisive (the heads are pruned against")
    assert result.source == str(source)
    s = result.statistics["pruned"]
    half = stats.t.ppf(0.975, 2) * pd.Series(pruned).std(ddof=1) / math.sqrt(3)
    assert s.n == 3 and s.mean == pytest.approx(sum(pruned) / 3)  # the control and the fine-tuned label are not read
    low, high = max(0.0, sum(pruned) / 3 - half), min(1.0, sum(pruned) / 3 + half)  # a share: clipped to [0, 1]
    assert (s.ci_low, s.ci_high) == (pytest.approx(low), pytest.approx(high))
    assert result.statistics["speedup"].mean == pytest.approx(sum(speedup) / 3)


def test_the_full_scale_reads_the_12_head_jobs(tmp_path):
    write(tmp_path, "heads-zh_reviews-full", prune_runs([0.25, 0.25, 0.3333, 0.25, 0.1667], [1.2, 1.17, 1.21, 1.18, 1.16],
                                                        n_heads=12))
    result = evaluate_claim(load_spec(SPEC), tmp_path, scale="full")
    assert result.verdict == INCONCLUSIVE and result.statistics["pruned"].n == 5  # a proxy: read, not decided


def test_without_pruned_jobs_the_claim_is_not_measured(tmp_path):
    assert evaluate_claim(load_spec(SPEC), tmp_path).verdict == NOT_MEASURED
    table = prune_runs([0.25, 0.3, 0.25], [1.2, 1.2, 1.2])
    write(tmp_path, "heads-zh_reviews", table[table["label"] != "ablation-ft0"])
    missing = evaluate_claim(load_spec(SPEC), tmp_path)
    assert missing.verdict == NOT_MEASURED and "no usable rows with label=ablation-ft0" in missing.reason


def test_the_runner_prunes_the_8_head_jobs_quick_and_the_12_head_jobs_full():
    spec = load_spec(SPEC)
    args = ("prune.ranking=ablation", "prune.max_drop=0.005")
    assert spec.per_job("quick") == (PerJob("headlab-prune", args, (("model.n_heads", 8),)),)
    assert spec.per_job("full") == (PerJob("headlab-prune", args, (("model.n_heads", 12),)),)
