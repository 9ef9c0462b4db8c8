"""Statistics on hand-made aggregate tables, and the verdicts the shipped rules give on them."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from scipy import stats

from headlab.reproduce.spec_schema import Reduction, StatisticConfig, StatisticKind
from headlab.errors import ConfigError, DataError
from headlab.reproduce.evidence import evaluate_claim
from headlab.reproduce.spec import load_spec, load_specs
from headlab.reproduce.statistics import EvidenceMissing, table_statistic
from headlab.reproduce.verdict import (ABSENT, CONTRADICTED, DIRECTION_ONLY, INCONCLUSIVE, NOT_MEASURED, NOT_TESTABLE, SUPPORTED,
                                      decide)
from tests.reproduce.recorded import record_jobs

REPO = Path(__file__).resolve().parents[2]
SPECS = REPO / "conf" / "reproduce"


def heads_runs(acc8: list[float], acc4: list[float]) -> pd.DataFrame:
    """sweep_runs.csv of a heads sweep: seeds 0.. for 4 and 8 heads, plus one unusable run."""
    rows = [{"job": f"{n}-{s}", "seed": s, "model.n_heads": n, "usable": True, "test_acc": a}
            for n, accs in ((8, acc8), (4, acc4)) for s, a in enumerate(accs)]
    rows.append({"job": "bad", "seed": 0, "model.n_heads": 8, "usable": False, "test_acc": 0.0})
    return pd.DataFrame(rows)


def _t_interval(d: list[float]) -> tuple[float, float]:
    d = pd.Series(d)
    half = stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
    return d.mean() - half, d.mean() + half


def test_the_paired_difference_is_the_t_interval_of_per_seed_differences_over_usable_runs():
    spec = StatisticConfig(StatisticKind.paired_difference, a={"model.n_heads": 8}, b={"model.n_heads": 4}, column="test_acc")
    s = table_statistic(spec, heads_runs([0.85, 0.86, 0.88], [0.83, 0.845, 0.85]))
    low, high = _t_interval([0.02, 0.015, 0.03])
    assert s.n == 3 and s.mean == pytest.approx(0.065 / 3)
    assert (s.ci_low, s.ci_high) == (pytest.approx(low), pytest.approx(high))


@pytest.mark.parametrize("acc8, acc4, verdict", [
    # next-token test accuracies of the induction LM (C8 v6): chance is 1/64, the prerequisite asks acc8 above 0.1
    ([0.31, 0.31, 0.32], [0.28, 0.279, 0.291], SUPPORTED),     # 3 points [2.75, 3.25]: beyond the 1.5-point margin
    ([0.30, 0.30, 0.30], [0.30, 0.301, 0.299], ABSENT),  # no gap: [-0.25, 0.25] points, inside (-1.5, 1.5)
    ([0.306, 0.305, 0.307], [0.30, 0.30, 0.30], DIRECTION_ONLY),  # 0.6 points [0.35, 0.85]: above 0, short of 1.5
    ([0.30, 0.31, 0.33], [0.28, 0.295, 0.30], INCONCLUSIVE),   # 2.2 points [0.27, 4.06]: straddles the margin
    ([0.06, 0.08, 0.04], [0.04, 0.05, 0.03], NOT_TESTABLE),   # not copying (acc8 0.06, near the 0.04 of no positions): the prerequisite fails
])
def test_c08_is_decided_against_the_articles_margin(tmp_path, acc8, acc4, verdict):
    spec = load_spec(SPECS / "c08_heads.yaml")
    aggregate = tmp_path / "lm-heads" / "2026-11-30_12-00-00_000000" / "aggregate"
    aggregate.mkdir(parents=True)
    record_jobs(aggregate.parent, spec)
    heads_runs(acc8, acc4).to_csv(aggregate / "sweep_runs.csv", index=False)
    result = evaluate_claim(spec, tmp_path)
    assert result.verdict == verdict, result.reason
    assert result.source == str(aggregate / "sweep_runs.csv")
    assert str(aggregate.parent) in result.provenance and "commit" in result.provenance
    d = [a - b for a, b in zip(acc8, acc4)]
    if verdict == SUPPORTED:
        assert result.p_value == pytest.approx(stats.ttest_1samp(d, 0.015, alternative="greater").pvalue)
    if verdict == ABSENT:  # TOST: below the margin and above its mirror, -0.015
        assert result.p_value == pytest.approx(max(stats.ttest_1samp(d, 0.015, alternative="less").pvalue,
                                                   stats.ttest_1samp(d, -0.015, alternative="greater").pvalue))


def test_a_claim_without_its_sweep_or_with_one_seed_is_not_decided(tmp_path):
    spec = load_spec(SPECS / "c08_heads.yaml")
    missing = evaluate_claim(spec, tmp_path)
    assert missing.verdict == NOT_MEASURED and "no aggregated sweep 'lm-heads'" in missing.reason
    aggregate = tmp_path / "x" / "aggregate"
    aggregate.mkdir(parents=True)
    record_jobs(aggregate.parent, spec)
    heads_runs([0.32], [0.30]).to_csv(aggregate / "sweep_runs.csv", index=False)
    one_seed = evaluate_claim(spec, tmp_path, {"lm-heads": aggregate.parent})
    assert one_seed.verdict == INCONCLUSIVE and one_seed.reason.startswith("no interval: gap 0.02 [nan, nan] (paired t (undefined: one pair))")


def test_per_run_reductions_of_the_head_table():
    heads = pd.DataFrame([
        {"job": j, "seed": s, "model.pos_encoding": pe, "layer": 0, "head": h, "final_role": role}
        for j, s, pe, roles in (("a0", 0, "none", ["mixed"] * 4), ("a1", 1, "none", ["mixed", "mixed", "mixed", "local"]),
                                ("b0", 0, "rope", ["local", "local", "long_range", "vertical"]),
                                ("b1", 1, "rope", ["local", "previous_token", "long_range", "vertical"]))
        for h, role in enumerate(roles)])
    spec = StatisticConfig(StatisticKind.paired_difference, a={"model.pos_encoding": "none"}, b={"model.pos_encoding": "rope"},
                           column="final_role", reduce=Reduction.fraction_in, values=["mixed"])
    s = table_statistic(spec, heads)
    assert s.n == 2 and s.mean == pytest.approx(((1 - 0) + (0.75 - 0)) / 2)  # per seed: none minus rope
    distinct = StatisticConfig(StatisticKind.mean, where={"model.pos_encoding": "rope"}, column="final_role",
                               reduce=Reduction.distinct_per_layer)
    assert table_statistic(distinct, heads).mean == pytest.approx(3.5)
    # the article's three types (C2, read from the LM pattern-type column): a run whose heads are all
    # untyped has 0 types, and still counts
    kind = {"mixed": "untyped", "local": "local_diagonal", "previous_token": "local_diagonal",
            "long_range": "distant_points", "vertical": "untyped"}
    heads["final_type"] = heads["final_role"].map(kind)
    typed = load_spec(SPECS / "c02_split_roles.yaml").statistics["types"]
    typed.where = {"model.pos_encoding": "none"}
    found = table_statistic(typed, heads)
    assert found.n == 2 and found.mean == pytest.approx((0 + 1) / 2)  # a0: all mixed; a1: one local head
    distinct.where = {"model.n_heads": 4}
    with pytest.raises(EvidenceMissing, match="no column 'model.n_heads'"):
        table_statistic(distinct, heads)


def test_c01_random_directions_concentrate_but_not_into_the_vast_majority():
    """0.67 of angles in 83-97 degrees: beyond a bare majority, short of the three quarters that
    "the vast majority" allows."""
    result = evaluate_claim(load_spec(SPECS / "c01_random_directions.yaml"), "/nonexistent")
    assert result.verdict == DIRECTION_ONLY and result.source == "computed"
    assert result.statistics["random_std"].mean == pytest.approx(0.125, abs=0.002)
    assert result.statistics["init_band"].mean == pytest.approx(0.67, abs=0.02)  # P(|z| < 8 sin 7deg)
    from matplotlib.image import imread

    assert Path(result.figure).name == "angle_histogram.png" and imread(result.figure).shape[1] > 100


def test_a_computed_claims_figure_must_be_one_headlab_draws(tmp_path):
    text = (SPECS / "c01_random_directions.yaml").read_text(encoding="utf-8").replace("angle_histogram.png", "angles.png")
    (tmp_path / "c01_random_directions.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"evidence\.figure='angles\.png'.*angle_histogram\.png"):
        load_spec(tmp_path / "c01_random_directions.yaml")


def test_overlapping_rules_are_an_error_not_a_verdict(tmp_path):
    """A spec without a margin keeps its two written rules (the format before issue 25)."""
    text = (SPECS / "c08_heads.yaml").read_text(encoding="utf-8")
    text = text[:text.index("primary:")] + 'rule: {supported_if: "gap.ci_low > 0", contradicted_if: "gap.ci_low > 0"}\n'
    (tmp_path / "c08_heads.yaml").write_text(text, encoding="utf-8")
    spec = load_spec(tmp_path / "c08_heads.yaml")
    from headlab.reproduce.statistics import Statistic

    with pytest.raises(DataError, match="must exclude each other"):
        decide(spec, {"gap": Statistic(0.02, 0.01, 0.03, 3, "test_acc")})


def test_every_shipped_spec_loads_and_every_claim_c1_to_c18_has_one():
    specs = load_specs(SPECS)
    assert [s.claim for s in specs] == [f"C{i}" for i in range(1, 19)]
    for s in specs:
        assert s.zh and s.en and s.section
        assert s.statistics and s.primary in s.statistics


@pytest.mark.parametrize("edit, match", [
    (("kind: paired_difference", "kind: ratio"), r"statistics\.gap\.kind='ratio'"),
    (("claim: C8", "claim: 8"), r"claim='8'"),
    (("  table: sweep_runs.csv\n", ""), r"evidence\.table=None"),
    (('rule: "acc8.mean > 0.1"', 'rule: "acc8.mean > x"'), r"prerequisite\.rule="),
    (("primary: gap", "primary: gapp"), r"primary='gapp'"),
    (("  value: 0.015", "  value: -0.015"), r"margin\.value=-0\.015"),
    (("  confirmatory: [2000,", "  confirmatory: [2, 2000,"), r"seeds\.confirmatory="),  # 2 is exploratory too
])
def test_a_broken_spec_is_a_config_error_naming_file_and_key(tmp_path, edit, match):
    text = (SPECS / "c08_heads.yaml").read_text(encoding="utf-8").replace(*edit)
    (tmp_path / "c08_heads.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^invalid config c08_heads\.yaml: " + match):
        load_spec(tmp_path / "c08_heads.yaml")


def test_c17_reads_a_run_directory_and_compares_layers_with_welchs_interval(tmp_path):
    """A hand-made MiniLM-like table: deep layers reach farther (distance_norm 0.9 +- 0.1 vs
    0.6 +- 0.1) and shallow ones hold the previous-token heads (prev_score 0.3 vs 0.05)."""
    from headlab.store import append_part

    rows = [{"run_id": "r", "step": 0, "epoch": 0, "layer": layer, "head": h, "metric": metric,
             "value": base + (0.1 if h % 2 else -0.1) * scale}
            for layer in range(6) for h in range(4)
            for metric, base, scale in (("distance_norm", 0.9 if layer >= 3 else 0.6, 1.0),
                                        ("prev_score", 0.05 if layer >= 3 else 0.3, 0.1))]
    run = tmp_path / "runs" / "reproduce" / "c17-minilm-en_news"
    append_part(run / "head_metrics.parquet", 0, pd.DataFrame(rows))
    result = evaluate_claim(load_spec(SPECS / "c17_pretrained_layers.yaml"), tmp_path / "sweeps")
    # beyond the margin, but over the heads of one model: not independent units, so not decisive (issue 31)
    assert result.verdict == INCONCLUSIVE and "heads of one model" in result.reason, result.reason
    assert result.reason.split(" on the heads")[0] == SUPPORTED
    far = result.statistics["deeper_farther"]
    low, high = stats.ttest_ind([r["value"] for r in rows if r["metric"] == "distance_norm" and r["layer"] >= 3],
                                [r["value"] for r in rows if r["metric"] == "distance_norm" and r["layer"] < 3],
                                equal_var=False).confidence_interval()
    assert far.mean == pytest.approx(0.3) and far.n == 24 and (far.ci_low, far.ci_high) == (pytest.approx(low), pytest.approx(high))
    assert result.figure == ""  # the run has no figures/attention_grid.png (yet)
    (run / "figures").mkdir()
    (run / "figures" / "attention_grid.png").write_bytes(b"png")
    figure = evaluate_claim(load_spec(SPECS / "c17_pretrained_layers.yaml"), tmp_path / "sweeps").figure
    assert figure == str(run / "figures" / "attention_grid.png")
    missing = evaluate_claim(load_spec(SPECS / "c17_pretrained_layers.yaml"), tmp_path / "elsewhere" / "sweeps")
    assert missing.verdict == NOT_MEASURED and "run the command of the job list first" in missing.reason


def test_the_report_reads_the_most_recently_aggregated_folder_of_a_sweep(tmp_path):
    """The runner's fixed `reproduce` folder and dated `make sweep` stamps live side by side: the
    evidence is whichever was aggregated last, not whichever name sorts last."""
    import os

    from headlab.reproduce.evidence import find_aggregate

    runner, stamp = (tmp_path / "heads-zh_reviews" / name / "aggregate" for name in ("reproduce", "2026-12-01_09-00-00_000000"))
    for i, folder in enumerate((runner, stamp)):
        folder.mkdir(parents=True)
        os.utime(folder, (1_000_000 + i, 1_000_000 + i))
    assert find_aggregate("heads-zh_reviews", tmp_path, {}) == stamp
    os.utime(runner, (2_000_000, 2_000_000))
    assert find_aggregate("heads-zh_reviews", tmp_path, {}) == runner


def test_bounds_clip_an_interval_to_what_the_value_can_be_and_bad_bounds_are_refused(tmp_path):
    rows = pd.DataFrame({"job": ["a", "b", "c"], "seed": [0, 1, 2], "x": [1.0, 1.0, 0.5]})
    free = table_statistic(StatisticConfig(StatisticKind.mean, column="x"), rows)
    clipped = table_statistic(StatisticConfig(StatisticKind.mean, column="x", bounds=[0, 1]), rows)
    assert free.ci_high > 1 and clipped.ci_high == 1.0 and clipped.ci_low == pytest.approx(free.ci_low)
    text = (SPECS / "c14_seeds.yaml").read_text(encoding="utf-8").replace("bounds: [0, 1]", "bounds: [1, 0]")
    (tmp_path / "c14_seeds.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"same_role\.bounds=\[1\.0, 0\.0\]"):
        load_spec(tmp_path / "c14_seeds.yaml")


def _spec_table(rows) -> pd.DataFrame:
    return pd.DataFrame(rows).assign(usable=True)


def test_a_missing_secondary_is_shown_missing_and_the_claim_is_still_decided_on_its_primary():
    from headlab.reproduce.evidence import _decided

    spec = load_spec(SPECS / "c09_init_scale.yaml")
    # every head of the x1.5 arm ends mixed: no settle step there for `earlier` (secondary) to read
    rows = [{"job": f"{scale}-{seed}", "seed": seed, "model.init_scale": scale, "optim.warmup_ratio": 0.1, "layer": 0,
             "head": h, "initial_role": "mixed", "final_role": ("induction" if scale == 1.0 and h <= seed else "mixed"),
             "role_bifurcation_step": 40.0, "test_acc": 0.2 + 0.01 * seed}
            for scale in (1.0, 1.5) for seed in range(4) for h in range(4)]
    result = _decided(spec, _spec_table(rows), "table")
    assert result.verdict not in (NOT_MEASURED, NOT_TESTABLE)
    assert result.statistics["earlier"].n == 0 and result.statistics["earlier"].unit.startswith("missing: no rows left")
    # the primary is one share per seed and arm (1/4 ... 4/4 of the x1.0 heads, none of the x1.5 ones),
    # paired over the 4 seeds: mean -0.625, t interval with 3 degrees of freedom, clipped to a difference of shares
    fuller = result.statistics["fuller"]
    half = 3.182446 * pd.Series([-0.25, -0.5, -0.75, -1.0]).std() / 2
    assert fuller.n == 4 and fuller.mean == pytest.approx(-0.625)
    assert (fuller.ci_low, fuller.ci_high) == pytest.approx((-1.0, -0.625 + half), abs=1e-5)
    assert result.verdict == "reversed"


def test_a_missing_statistic_the_prerequisite_reads_makes_the_claim_not_testable_with_why():
    from headlab.reproduce.evidence import _decided

    spec = load_spec(SPECS / "c14_seeds.yaml")
    # every seed pair ended with one role everywhere: no kappa, the primary the prerequisite reads
    rows = [{"job": f"pair-{seed}", "seed": seed, "optim": "adamw_constant", "optim.lr": 0.003, "same_role_kappa": math.nan,
             "same_role": 1.0} for seed in (300, 302, 304, 306)]
    result = _decided(spec, _spec_table(rows), "table")
    assert result.verdict == NOT_TESTABLE
    assert "kappa.n >= 3" in result.reason


def test_c6_reads_the_positional_role_share_per_seed_none_minus_learned():
    """C6 v6's primary by hand, on a per-head table without pattern types (types_gap missing, as
    the C9 test above has a missing secondary)."""
    from headlab.reproduce.evidence import _decided

    spec = load_spec(SPECS / "c06_posenc.yaml")
    rows = [{"job": f"{pe}-{seed}", "seed": seed, "model.pos_encoding": pe, "layer": h // 2, "head": h % 2,
             "final_role": ("previous_token" if pe == "learned" and h <= seed % 3 + 1 else "mixed"), "test_acc": 0.2}
            for pe in ("none", "learned") for seed in (1400, 1401, 1402, 1403) for h in range(4)]
    result = _decided(spec, _spec_table(rows), "table")
    assert result.statistics["types_gap"].unit.startswith("missing")
    gap = result.statistics["positional_gap"]
    # per seed: none 0, learned (seed % 3 + 2) / 4 of the heads (at most 4): -1.0, -0.5, -0.75, -1.0
    assert (gap.mean, gap.n) == (pytest.approx(-0.8125), 4)
    assert result.verdict not in (NOT_TESTABLE, NOT_MEASURED)
