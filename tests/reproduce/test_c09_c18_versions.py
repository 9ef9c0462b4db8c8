"""C9 v6 (version 5's rule on the induction LM, every head counted whatever its step-0 role, on 12 fresh seeds) and C18 v7 (version 6's rule
on the induction LM, 24 fresh seeds), each rule kept since 2026-12-04 on fresh seeds sized by power (C9 v7, C18 v8, the
latter in one 8-head sweep with C10): the shipped specs decided on hand-built tables against intervals computed here
with scipy, and their seed lists, and those of every claim re-versioned with them (commit 6fabec9), checked against
the committed history of the same spec."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from scipy import stats

from headlab.reproduce.spec import load_spec
from headlab.reproduce.statistics import table_statistic
from headlab.reproduce.verdict import NOT_TESTABLE, REVERSED
from tests.reproduce.test_verdicts import SPECS

C9 = load_spec(SPECS / "c09_init_scale.yaml")
C18 = load_spec(SPECS / "c18_gradients.yaml")


def _lm_heads(roles: dict[tuple[int, float], list[str]], initial: str = "mixed") -> pd.DataFrame:
    """A sweep_heads.csv of 2-layer, 4-head LM runs: per (seed, init_scale) the 8 heads' final roles."""
    return pd.DataFrame([{"job": f"{seed}-{scale}", "seed": seed, "usable": True, "model.init_scale": scale,
                          "optim.warmup_ratio": 0.1, "layer": h // 4, "head": h % 4, "initial_role": initial,
                          "final_role": role, "role_bifurcation_step": 1000.0 + 100 * h, "test_acc": 0.25}
                         for (seed, scale), heads in roles.items() for h, role in enumerate(heads)])


def _decided(spec, table: pd.DataFrame):
    """The runner's reading of a table: a statistic with no rows left is shown missing, not raised."""
    from headlab.reproduce.evidence import _decided as decided

    return decided(spec, table, "hand-built")


P, I, D, M = "previous_token", "induction", "duplicate", "mixed"
X10 = {0: [P, P, M, M, I, I, M, M], 1: [P, M, M, M, I, D, I, M], 2: [P, P, P, M, I, I, I, M],
       3: [M, M, M, M, I, M, M, M], 4: [P, P, M, M, I, I, I, I]}       # 4, 4, 6, 1, 6 of 8 heads with a role
X15 = {0: [M] * 8, 1: [P, M, M, M, M, M, M, M], 2: [M] * 8, 3: [M] * 8, 4: [M, M, M, M, I, M, M, M]}


def test_c9_counts_every_head_that_ends_with_a_role_paired_over_seeds():
    table = _lm_heads({**{(s, 1.0): r for s, r in X10.items()}, **{(s, 1.5): r for s, r in X15.items()}})
    per_seed = [(b - a) / 8 for a, b in zip([4, 4, 6, 1, 6], [0, 1, 0, 0, 1])]  # x1.5 minus x1.0
    mean = sum(per_seed) / 5
    low, high = stats.t.interval(0.95, 4, loc=mean, scale=stats.sem(per_seed))
    fuller = table_statistic(C9.statistics["fuller"], table)
    assert (fuller.n, fuller.mean) == (5, pytest.approx(mean))
    assert (fuller.ci_low, fuller.ci_high) == pytest.approx((low, high))
    result = _decided(C9, table)
    assert result.verdict == REVERSED and high < 0
    # reversed: the one-sided test that the difference lies below no effect (0)
    assert result.p_value == pytest.approx(stats.ttest_1samp(per_seed, 0.0, alternative="less").pvalue)


def test_c9_does_not_drop_heads_by_their_step_0_role():
    """Version 4 dropped heads that ended in their step-0 role; version 5's primary reads the end only,
    so the same final roles give the same value whatever the heads held at step 0."""
    roles = {**{(s, 1.0): r for s, r in X10.items()}, **{(s, 1.5): r for s, r in X10.items()}}
    roles[(2, 1.5)] = [P, P, P, P, I, I, I, M]
    as_mixed = table_statistic(C9.statistics["fuller"], _lm_heads(roles))
    as_kept = _lm_heads(roles)
    as_kept["initial_role"] = as_kept["final_role"]  # every head already held its final role at step 0
    kept = table_statistic(C9.statistics["fuller"], as_kept)
    assert (kept.mean, kept.ci_low, kept.ci_high) == (as_mixed.mean, as_mixed.ci_low, as_mixed.ci_high)
    assert kept.mean == pytest.approx(1 / 8 / 5)
    assert table_statistic(C9.statistics["role_at_init"], as_kept).mean > 0 == table_statistic(
        C9.statistics["role_at_init"], _lm_heads(roles)).mean


def test_c9_is_not_testable_when_the_x10_arm_forms_no_role():
    table = _lm_heads({(s, scale): [M] * 8 for s in range(5) for scale in (1.0, 1.5)})
    result = _decided(C9, table)
    assert result.verdict == NOT_TESTABLE and result.reason.startswith("prerequisite `formed_x10.ci_low > 0`")


def test_c18_needs_lms_whose_induction_circuit_formed_and_reads_the_early_gradient_rank():
    rhos = [0.31, 0.11, 0.2, 0.15, 0.25, 0.18]

    def runs(acc):
        return pd.DataFrame([{"job": str(s), "seed": s, "usable": True, "model.n_heads": 8, "test_acc": acc + 0.001 * s,
                              "rho_early_grad_ablation": r, "rho_grad_ablation": 0.8, "rho_dist_ablation": 0.7}
                             for s, r in enumerate(rhos)])

    stuck = _decided(C18, runs(0.02))  # no copying: the heads never came to different uses
    assert stuck.verdict == NOT_TESTABLE and stuck.reason.startswith("prerequisite `acc.ci_low > 0.2`")
    result = _decided(C18, runs(0.26))
    s = result.statistics["early_grad_vs_ablation"]
    half = stats.t.ppf(0.975, 5) * pd.Series(rhos).std(ddof=1) / len(rhos) ** 0.5
    assert s.mean == pytest.approx(sum(rhos) / 6) and s.ci_high == pytest.approx(sum(rhos) / 6 + half)
    assert result.verdict != NOT_TESTABLE and result.spec.margin.value == 0.3 and s.ci_high < 0.3  # short of the margin
    assert result.statistics["grad_vs_ablation"].mean == pytest.approx(0.8)  # the secondary, beside it


# (spec file, version, its confirmatory seeds): the versions of commit 6fabec9 (2026-12-04: `make reproduce-cpu`
# in 2 hours), whose rules are their previous versions' or were frozen before these seeds ran, and the versions
# before them that moved C9, C18 and C15 to a new task the same way
RE_VERSIONED = "6fabec9"
FRESH = [
    ("c02_split_roles.yaml", 4, range(2000, 2012)),   # C2, C8 and C16: one sweep of 2, 4 and 8 heads
    ("c03_lr_local.yaml", 6, range(2200, 2214)),
    ("c04_early_roles.yaml", 5, range(2300, 2306)),   # C4, C13 and C14: one schedule sweep
    ("c05_templates.yaml", 5, range(2400, 2412)),
    ("c06_posenc.yaml", 7, range(2500, 2508)),
    ("c07_domains.yaml", 5, range(2600, 2606)),
    ("c08_heads.yaml", 6, range(2000, 2012)),
    ("c09_init_scale.yaml", 7, range(2700, 2706)),
    ("c10_pruning.yaml", 8, range(2100, 2115)),       # C10 and C18: one 8-head sweep
    ("c12_data_size.yaml", 8, range(2800, 2806)),
    ("c13_schedule.yaml", 6, range(2300, 2306)),
    ("c14_seeds.yaml", 7, range(2300, 2306)),
    ("c16_head_width.yaml", 5, range(2000, 2012)),
    ("c18_gradients.yaml", 8, range(2100, 2115)),
]
# the versions after the 2026-12-04 ledger of 6fabec9's plan: C3, C5 and C9 on more fresh seeds
# (tests/reproduce/test_holm_sized_versions.py)
RESIZED = {"c03_lr_local.yaml": 7, "c05_templates.yaml": 6, "c09_init_scale.yaml": 8}
EARLIER = [("c09_init_scale.yaml", 6, range(560, 572)), ("c18_gradients.yaml", 7, range(1600, 1624)),
           ("c15_punctuation.yaml", 4, range(1700, 1724))]  # C15 v4 moved to the synthetic task the same way


def _history_or_skip(path: Path):
    from headlab.reproduce import spec_history as sh

    history = sh.history(path)
    if not history:
        pytest.skip("the specs are not in a git checkout")
    return history


def test_the_claims_re_versioned_for_the_two_hour_ledger_are_the_ones_checked_here():
    """Every spec whose version number commit 6fabec9 raised is in FRESH, at the version it holds now."""
    from headlab.reproduce import spec_history as sh

    found = sh.git(SPECS, "cat-file", "-e", f"{RE_VERSIONED}^{{commit}}")
    if found is None or found.returncode != 0:
        pytest.skip(f"commit {RE_VERSIONED} is not in this checkout's history")
    raised = {}
    for path in sorted(SPECS.glob("c*.yaml")):
        history = _history_or_skip(path)
        at = next((i for i, v in enumerate(history) if v.commit.startswith(RE_VERSIONED)), None)
        if at is not None and at + 1 < len(history) and history[at].number > history[at + 1].number:
            raised[path.name] = history[at].number
            # not re-versioned since, but for the claims re-sized at Holm's family after the ledger of that plan
            assert sh.read_raw(path)["version"] == RESIZED.get(path.name, history[at].number)
    assert raised == {file: version for file, version, _ in FRESH}


@pytest.mark.parametrize("file, version, fresh", FRESH + EARLIER, ids=[f"{f[:3]}-v{v}" for f, v, _ in FRESH + EARLIER])
def test_the_new_versions_list_fresh_seeds_no_earlier_version_of_the_claim_read(file, version, fresh):
    from headlab.reproduce import spec_history as sh
    from headlab.reproduce.freeze import version_lines

    path = SPECS / file
    history = _history_or_skip(path)
    held = [v for v in history if v.number == version]
    assert held, f"no committed version {version} of {file}"
    # every commit of that version listed these confirmatory seeds (the newest commit's list first)
    assert [v.raw["seeds"]["confirmatory"] for v in held] == [list(fresh)] * len(held)
    listed = set().union(*(v.seeds("confirmatory", "replication") for v in held))
    assert listed == set(fresh)  # and no replication seeds beside them
    earlier = [v for v in history if isinstance(v.number, int) and v.number < version]
    read = set().union(*(v.seeds("exploratory", "confirmatory", "replication") for v in earlier))
    assert earlier and read and not read & listed, sorted(read & listed)
    raw = sh.read_raw(path)
    if raw["version"] == version:  # the version the working tree holds: what a confirmatory start checks
        assert raw["seeds"]["confirmatory"] == list(fresh) and version_lines(raw["claim"], raw, history) == []
        # the previous version's look is read as exploratory now
        previous = next(v for v in earlier if v.number == max(e.number for e in earlier))
        assert previous.seeds("confirmatory") <= set(raw["seeds"]["exploratory"])
