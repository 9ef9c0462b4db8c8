"""The cpu scale's second look: which claims get fresh seeds, and Holm within look 2's own family."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import yaml
from statsmodels.stats.multitest import multipletests

from headlab.errors import ConfigError
from headlab.reproduce.looks import second_look_specs, with_second_look
from headlab.reproduce.spec import REPLICATION, load_spec, load_specs
from headlab.reproduce.statistics import Statistic
from headlab.reproduce.verdict import INCONCLUSIVE, NOT_TESTABLE, SUPPORTED, ClaimResult
from tests.reproduce.recorded import with_last_cpu

SPECS = Path(__file__).resolve().parents[2] / "conf" / "reproduce"


def _second_look_file(claim: str, seeds: list[int], out_dir: Path, sweep_name: str | None = None,
                      overrides: list[str] | None = None) -> Path:
    """A shipped spec written to `out_dir` with a look 2 (`evidence.replication` on `seeds.replication`
    = `seeds`, alpha 0.0125 + 0.0125): since C14 v7 (one look) no shipped spec has one, so the
    mechanism is tested on specs given one here. The look-2 sweep is `sweep_name` (default: the cpu
    sweep's name + "-rep") with `overrides` (default: the cpu grid on `seeds`)."""
    path = next(SPECS.glob(f"c{int(claim[1:]):02d}_*.yaml"))
    # a claim no longer run at cpu (C14 since the second ledger of 2026-12-04) gets back its last cpu sweep as look 1
    data = yaml.safe_load(with_last_cpu(path.name, path.read_text(encoding="utf-8")))
    cpu = data["evidence"]["cpu"]
    if overrides is None:
        overrides = ["seed=" + ",".join(map(str, seeds)) if o.startswith("seed=") else o for o in cpu["overrides"]]
    data["evidence"]["replication"] = {"sweep_name": sweep_name or cpu["sweep_name"] + "-rep", "overrides": overrides}
    data["seeds"].update(replication=seeds, alpha=[0.0125, 0.0125])
    out = out_dir / path.name
    out.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return out


def _with_second_look(claim: str, seeds: list[int], **kwargs) -> object:
    import tempfile

    return load_spec(_second_look_file(claim, seeds, Path(tempfile.mkdtemp()), **kwargs))


# C14 as version 6 had it (`git show 6fabec9^:conf/reproduce/c14_seeds.yaml`): a look 2 of 8 fresh
# disjoint seed pairs on the config its primary reads (constant lr 3e-3), in a sweep of its own. Version
# 6's seeds 308-323 are among version 7's exploratory seeds, so the look 2 here takes 2306-2321.
C14_SEEDS = list(range(2306, 2322))
C14_REPLICATION = dict(sweep_name="lm-roles-rep",
                       overrides=["seed=" + ",".join(map(str, C14_SEEDS)), "optim=adamw_constant", "optim.lr=3e-3"])
BY_CLAIM = {s.claim: s for s in load_specs(SPECS)}
BY_CLAIM.update(C5=_with_second_look("C5", list(range(720, 736))), C12=_with_second_look("C12", list(range(820, 836))),
                C14=_with_second_look("C14", C14_SEEDS, **C14_REPLICATION))


def _result(claim: str, verdict: str, p: float) -> ClaimResult:
    spec = BY_CLAIM[claim]
    stat = Statistic(0.05, 0.02, 0.08, 8, "test_acc", "paired t over seeds", sd=0.03, se=0.01, df=7)
    tests = {"above": p} if math.isfinite(p) else {}  # the one null these hand-made verdicts rest on
    return ClaimResult(spec, verdict, "look 1's reason", {spec.primary: stat}, p_value=p, tests=tests)


def _look1() -> list[ClaimResult]:
    return [_result("C5", INCONCLUSIVE, 0.023), _result("C7", SUPPORTED, 0.0047), _result("C10", INCONCLUSIVE, 0.10),
            _result("C14", INCONCLUSIVE, 0.016), _result("C3", NOT_TESTABLE, math.nan)]


def test_only_inconclusive_claims_whose_spec_names_fresh_seeds_are_retried():
    # C7 is decided, C10 has no replication in its spec, C3's phenomenon did not form
    assert [s.claim for s in second_look_specs(_look1())] == ["C5", "C14"]


@pytest.mark.parametrize("p5, p14", [(0.03, 0.02), (0.04, 0.03)])
def test_look_two_is_decided_on_its_own_evidence_with_holm_over_its_own_family(p5, p14):
    calls = []

    def evaluate(spec, root, explicit, scale):
        calls.append((spec.claim, scale))
        p = {"C5": p5, "C14": p14}[spec.claim]
        return ClaimResult(spec, SUPPORTED, "beyond the margin", {}, p_value=p, tests={"above": p})

    look1 = _look1()
    out = with_second_look(look1, "root", {}, evaluate=evaluate)
    assert calls == [("C5", REPLICATION), ("C14", REPLICATION)]
    assert [r.spec.claim for r in out] == ["C5", "C7", "C10", "C14", "C3"]
    assert out[1] is look1[1] and out[2] is look1[2] and out[4] is look1[4] and out[1].look == 1
    # one family across both looks: C5 and C14 spend 0.0125 at look 2 (p weighted x2), C7 and C10 0.025 at look 1
    reject, adjusted, *_ = multipletests([2 * p5, 0.0047, 0.10, 2 * p14], alpha=0.025, method="holm")
    assert out[1].p_holm == pytest.approx(adjusted[1]) and out[1].verdict == (SUPPORTED if reject[1] else INCONCLUSIVE)
    for r, keep, p_holm in zip((out[0], out[3]), reject[[0, 3]], adjusted[[0, 3]]):
        assert r.look == 2 and r.p_holm == pytest.approx(p_holm)
        assert r.verdict == (SUPPORTED if keep else INCONCLUSIVE)
        assert r.first_look.startswith("look 1: inconclusive, ") and "Holm p" in r.first_look
    if not reject.any():
        assert "in the both looks' family" in out[0].reason


def test_nothing_to_retry_leaves_the_results_as_they_were():
    look1 = [_result("C7", SUPPORTED, 0.0047)]
    assert with_second_look(look1, "root", {}, evaluate=lambda *a: pytest.fail("nothing should be read")) is look1


@pytest.mark.parametrize("seeds, words", [
    ("[303, 330, 331]", "fresh seeds, in neither the exploratory nor the confirmatory list (not [303])"),
    ("[]", "the second look's seeds exactly when evidence.replication is given"),
])
def test_a_second_look_must_name_fresh_seeds(tmp_path, seeds, words):
    # C14 given version 6's look 2 (C14_REPLICATION), its seeds.replication replaced by `seeds`:
    # 303 is one of version 7's exploratory seeds (version 6's confirmatory run)
    path = _second_look_file("C14", yaml.safe_load(seeds), tmp_path, **C14_REPLICATION)
    assert 303 in load_spec(SPECS / "c14_seeds.yaml").exploratory_seeds
    with pytest.raises(ConfigError, match=re.escape(words)):
        load_spec(path)
    load_spec(_second_look_file("C14", C14_SEEDS, tmp_path, **C14_REPLICATION))   # fresh seeds load


def test_the_report_says_which_look_decided_and_states_the_design(tmp_path):
    from headlab.reproduce.report import write_report

    def evaluate(spec, root, explicit, scale):
        stat = Statistic(0.06, 0.04, 0.08, 16, "test_acc", "paired t over seeds", sd=0.04, se=0.01, df=15, seeds=tuple(range(720, 736)))
        return ClaimResult(spec, SUPPORTED, "beyond the margin", {spec.primary: stat}, p_value=0.001, tests={"above": 0.001})

    out = with_second_look(_look1(), "root", {}, evaluate=evaluate)
    write_report(out, tmp_path, scale="cpu")
    md = (tmp_path / "claims.md").read_text(encoding="utf-8")
    assert "| C5 | 3.1 | supported (look 2) |" in md and "| C7 | 5.4 | supported |" not in md
    assert "Adaptive allocation: look 2" in md and "familywise error over both is at most 0.025" in md
    assert "decided on seeds 720,721" in md and "(fresh, look 2)" in md
    import pandas as pd

    table = pd.read_csv(tmp_path / "claims.csv").set_index("claim")
    assert table.loc["C5", "look"] == 2 and table.loc["C7", "look"] == 1
    assert table.loc["C14", "first_look"].startswith("look 1: inconclusive")


@pytest.mark.parametrize("verdict, p, needed", [
    (INCONCLUSIVE, 0.2, True),
    (SUPPORTED, 0.0047, True),          # weighted 0.0094 > 0.025 / 16: Holm over the others could still demote it
    (SUPPORTED, 0.0005, False),         # weighted 0.001 <= 0.025 / 16: it survives Holm whatever the others give
    (SUPPORTED, math.nan, True),        # no test: outside the family, so not decisive
    (NOT_TESTABLE, math.nan, False),    # more seeds do not make a phenomenon form
])
def test_look_two_starts_early_only_for_a_claim_look_one_may_leave_undecided(verdict, p, needed):
    from headlab.reproduce.looks import may_need_second_look

    assert may_need_second_look(_result("C5", verdict, p), family_size=16) is needed
    assert may_need_second_look(_result("C7", INCONCLUSIVE, 0.2), family_size=16) is False  # C7 has no second look


def test_the_runner_gets_each_look_two_sweep_after_its_claims_look_one_sweep():
    from headlab.reproduce.looks import deferred_second_look

    specs = list(BY_CLAIM.values())
    verdicts = {"C5": (INCONCLUSIVE, 0.02), "C12": (SUPPORTED, 1e-6), "C14": (SUPPORTED, 0.004)}
    read = []

    def evaluate(spec, root, explicit, scale):
        read.append((spec.claim, scale))
        return _result(spec.claim, *verdicts[spec.claim])

    items = {d.job.sweep_name: d for d in deferred_second_look(specs, "root", {}, evaluate=evaluate)}
    c5, c12 = "templates-synthetic-cpu-v6", "lm-data-cpu-v8"
    # C14's look 2 waits for the sweep its look 1 reads (shared with C4 and C13), not for C4's or C13's claims
    assert {name: d.after for name, d in items.items()} == {f"{c5}-rep": (c5,), f"{c12}-rep": (c12,), "lm-roles-rep": ("lm-schedule-cpu",)}
    assert read == []  # nothing is read before a lane takes the item
    # 18 specs with a primary: the bar is 0.025 / 18 = 0.0014 on the p weighted by 0.025 / 0.0125 = 2
    assert [items[n].needed() for n in (f"{c5}-rep", f"{c12}-rep", "lm-roles-rep")] == [True, False, True]
    assert read == [("C5", "cpu"), ("C12", "cpu"), ("C14", "cpu")]
