"""The cpu plan after the second ledger of 2026-12-04 (commit 417f0c8 ran the plan before it): C3 v7, C5 v6
and C9 v8 keep their rules on more fresh seeds, sized at Holm's family of the nulls the verdicts rest on
(about 56 for the 12 claims the plan tests, not 18), and C7, C8, C14, C15 and C16, which that ledger put at
40 to 200 seeds, leave the cpu plan with their rules unchanged. Checked against the specs' git history and
recomputed with statsmodels."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from statsmodels.stats.power import TTestPower

from headlab.reproduce.freeze import version_lines
from headlab.reproduce.spec import load_specs
from headlab.reproduce import spec_history as sh

SPECS = Path(__file__).resolve().parents[2] / "conf" / "reproduce"
BEFORE = "417f0c8"   # the last commit of the plan whose ledger sized these versions
FAMILY = 56          # the nulls of 12 claims, 4 or 5 each (the ledger's 79 nulls over 17 claims: 4.6 a claim)

# file, version, its fresh seeds, the previous version's seeds, the sweep
RESIZED = [("c03_lr_local.yaml", 7, range(3200, 3228), range(2200, 2214), "lm-lr-cpu-v7"),
           ("c05_templates.yaml", 6, range(3400, 3428), range(2400, 2412), "templates-synthetic-cpu-v6"),
           ("c09_init_scale.yaml", 8, range(3700, 3716), range(2700, 2706), "lm-init-cpu-v8")]
NOT_RUN_AT_CPU = {"C7", "C8", "C14", "C15", "C16"}


def _history_or_skip(path: Path) -> list:
    history = sh.history(path)
    if not history:
        pytest.skip("the specs are not in a git checkout")
    return history


def _at_before(history: list):
    """The version the spec held at BEFORE: its newest commit among BEFORE and its ancestors."""
    commits = sh.git(SPECS, "rev-list", BEFORE)
    if commits is None or commits.returncode != 0:
        pytest.skip(f"commit {BEFORE} is not in this checkout's history")
    older = set(commits.stdout.split())
    return next(v for v in history if v.commit in older)


@pytest.mark.parametrize("file, version, fresh, previous, sweep", RESIZED, ids=[r[0][:3] for r in RESIZED])
def test_the_resized_versions_keep_their_rule_on_seeds_no_earlier_version_read(file, version, fresh, previous, sweep):
    path = SPECS / file
    history = _history_or_skip(path)
    raw = sh.read_raw(path)
    assert raw["version"] == version and raw["seeds"]["confirmatory"] == list(fresh)
    assert raw["evidence"]["cpu"]["sweep_name"] == sweep
    assert f"seed={','.join(map(str, fresh))}" in raw["evidence"]["cpu"]["overrides"]
    before = _at_before(history)
    assert before.number == version - 1 and before.seeds("confirmatory") == set(previous)
    assert sh.rule_of(before.raw) == sh.rule_of(raw)   # the same rule: only the seeds grew
    read = set().union(*(v.seeds("exploratory", "confirmatory", "replication") for v in history if v.number != version))
    assert not read & set(fresh) and set(previous) <= set(raw["seeds"]["exploratory"])
    assert version_lines(raw["claim"], raw, [v for v in history if v.number != version]) == []


# the look each note quotes: its distance from the null the verdict rests on, its per-seed SD, the power stated
@pytest.mark.parametrize("file, distance, sd, seeds, stated", [
    ("c03_lr_local.yaml", 0.1 + 0.036, 0.124, 28, "0.96"),   # v6: -0.036, smaller than claimed (below the margin 0.1)
    ("c03_lr_local.yaml", 0.1 + 0.004, 0.086, 28, "0.99"),   # v5: -0.004
    ("c05_templates.yaml", 0.077 - 0.01, 0.065, 28, "0.94"),  # v5: +0.077, beyond the margin 0.01
    ("c05_templates.yaml", 0.110 - 0.01, 0.066, 28, "0.99"),  # v4: +0.110
    ("c09_init_scale.yaml", 0.44, 0.26, 16, "0.98"),          # v7: -0.44, reversed (below no effect, 0)
    ("c09_init_scale.yaml", 0.552, 0.17, 16, "0.99"),         # v6: -0.552
])
def test_each_note_states_the_power_statsmodels_gives_at_holms_family(file, distance, sd, seeds, stated):
    raw = sh.read_raw(SPECS / file)
    notes = " ".join(raw["notes"].split())
    assert f"one-sided 0.025 / {FAMILY}" in notes and f"SD {sd}" in notes.replace("(", "").replace(")", "").replace(",", "")
    assert len(raw["seeds"]["confirmatory"]) == seeds
    power = TTestPower().power(effect_size=distance / sd, nobs=seeds, alpha=0.025 / FAMILY, alternative="larger")
    assert math.floor(power * 100) / 100 == float(stated) and f"power {stated}" in notes
    # at 0.025 / 18, the alpha the previous versions were sized at, fewer seeds would have been asked for
    assert TTestPower().solve_power(effect_size=distance / sd, alpha=0.025 / 18, power=power, alternative="larger") < seeds


def test_the_claims_left_out_of_the_cpu_plan_keep_their_rules_and_say_why():
    specs = {s.claim: s for s in load_specs(SPECS)}
    assert {c for c, s in specs.items() if s.evidence.kind == "sweep" and s.evidence.cpu is None} == NOT_RUN_AT_CPU
    for claim in sorted(NOT_RUN_AT_CPU):
        spec = specs[claim]
        path = Path(spec.path)
        history = _history_or_skip(path)
        before = _at_before(history)
        assert "cpu" in before.raw["evidence"] and sh.rule_of(before.raw) == sh.rule_of(sh.read_raw(path))
        assert before.number == spec.version
        notes = " ".join(spec.notes.split())
        assert f"`make reproduce-cpu` does not run {claim}" in notes and "seeds" in notes
        assert spec.evidence.quick is not None and spec.evidence.full is not None   # still tested there
    # C2 trains the one cell it reads, on the same seeds as before
    c2 = specs["C2"]
    assert "model.n_heads=4" in c2.overrides("cpu") and c2.confirmatory_seeds == tuple(range(2000, 2012))
