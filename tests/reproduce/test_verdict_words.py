"""Issue 31's verdict words: "contradicted" split into absent, smaller than claimed and reversed, each
reachable, each resting on the one-sided test (at 0.025) that its 95 % interval mirrors."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from headlab.reproduce.spec import load_specs
from headlab.reproduce.statistics import from_values
from headlab.reproduce.verdict import (ABSENT, DIRECTION_ONLY, INCONCLUSIVE, REVERSED, SMALLER, SUPPORTED, decide)

# prerequisites lifted: these tests are about the verdict an interval gives once a claim is testable
SPECS = {s.claim: replace(s, prerequisite=None) for s in load_specs(Path(__file__).resolve().parents[2] / "conf" / "reproduce")}


def _decide(claim: str, values, bounds=(-math.inf, math.inf)):
    spec = SPECS[claim]
    stats_ = {name: from_values(values, "u", bounds) for name in spec.statistics}
    return decide(spec, stats_)


def _around(mean: float, half: float, n: int = 8) -> np.ndarray:
    """n values whose mean is `mean` and whose 95 % t half-width is `half`."""
    z = np.resize([-1.0, 1.0], n)
    sd_wanted = half * math.sqrt(n) / stats.t.ppf(0.975, n - 1)
    return mean + z * sd_wanted / z.std(ddof=1)


# C8: test accuracy, 8 minus 4 heads, margin 0.015 above no effect 0 (unbounded difference): mirror -0.015
@pytest.mark.parametrize("mean, half, verdict", [
    (0.030, 0.005, SUPPORTED),
    (0.008, 0.004, DIRECTION_ONLY),
    (0.000, 0.005, ABSENT),          # [-0.005, 0.005]: no effect, and inside (-0.015, 0.015)
    (-0.005, 0.015, SMALLER),        # [-0.020, 0.010]: short of 0.015, but reaches below -0.015
    (-0.020, 0.005, REVERSED),       # [-0.025, -0.015]: below no effect
    (0.015, 0.005, INCONCLUSIVE),    # straddles the margin
])
def test_every_verdict_is_reachable_on_an_unbounded_difference(mean, half, verdict):
    x = _around(mean, half)
    result = _decide("C8", x)
    assert result.verdict == verdict, result.reason
    less = lambda v: stats.ttest_1samp(x, v, alternative="less").pvalue      # noqa: E731
    more = lambda v: stats.ttest_1samp(x, v, alternative="greater").pvalue   # noqa: E731
    expected = {SUPPORTED: more(0.015), DIRECTION_ONLY: max(less(0.015), more(0.0)), ABSENT: max(less(0.015), more(-0.015)),
                SMALLER: less(0.015), REVERSED: less(0.0)}.get(verdict)
    if expected is not None:
        assert result.p_value == pytest.approx(expected) and result.p_value < 0.025


def test_a_share_is_absent_short_of_the_margin_without_every_seed_at_zero_heads():
    """C10's share (margin a fifth, no effect 0): one head of 16 in some seeds, none in others is
    absent; before issue 31 only zero heads everywhere could contradict a share."""
    spec = SPECS["C10"]
    shares = [0.0, 0.0625, 0.0, 0.0625, 0.0, 0.0, 0.0625, 0.0]
    result = decide(spec, {name: from_values(shares, "share", (0.0, 1.0)) for name in spec.statistics})
    assert result.verdict == ABSENT and result.p_value < 0.025, result.reason
    # the lower leg of the TOST (a share below -0.2) is impossible: the p is the upper leg's
    assert result.p_value == pytest.approx(stats.ttest_1samp(shares, 0.2, alternative="less").pvalue)


@pytest.mark.parametrize("kappas, verdict", [
    ([0.2, 0.3, 0.25, 0.35, 0.3, 0.2, 0.25, 0.3], SUPPORTED),           # seeds agree less than half way: the claim
    ([0.7, 0.75, 0.8, 0.7, 0.75, 0.8, 0.72, 0.78], DIRECTION_ONLY),     # agree more than half way, but not fully
    ([0.95, 1.0, 0.9, 1.0, 0.98, 1.0, 0.92, 1.0], ABSENT),              # reaches the same division (1)
])
def test_c14_kappa_reaches_absent_and_direction_only(kappas, verdict):
    """C14's kappa (margin 0.5 below no effect 1, bounded at 1): "reversed" (kappa above 1) cannot
    happen, so its verdicts short of the margin are direction only and absent."""
    spec = SPECS["C14"]
    result = decide(spec, {name: from_values(kappas, "kappa", (-1.0, 1.0)) for name in spec.statistics})
    assert result.verdict == verdict, result.reason
    assert result.p_value < 0.025


REPO = Path(__file__).resolve().parents[2]


def _defined_words() -> set[str]:
    """The bold words of docs/reproduce.md's "Verdict words" list."""
    import re

    section = (REPO / "docs" / "reproduce.md").read_text(encoding="utf-8").split("## Verdict words", 1)[1].split("\n## ", 1)[0]
    return {w for line in section.splitlines() if line.startswith("- ") for w in re.findall(r"\*\*(.+?)\*\*", line)}


def test_every_verdict_the_report_can_give_is_defined_in_docs():
    from headlab.reproduce.verdict import VERDICTS

    assert set(VERDICTS) <= _defined_words()
    assert {"scale", "look 1 / look 2", "old rules"} <= _defined_words()


def test_every_verdict_word_the_readme_table_uses_is_defined_and_contradicted_is_no_longer_used_unqualified():
    from headlab.reproduce.verdict import CONTRADICTED, VERDICTS

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    rows = [line.split(" | ") for line in readme.split("## Reproducing the article", 1)[1].splitlines()
            if line.startswith("| C")]
    assert len(rows) == 18
    words = {next(v for v in sorted(VERDICTS, key=len, reverse=True) if row[2].startswith(v)) for row in rows}
    assert words <= _defined_words() and CONTRADICTED not in words
    assert all(row[1].strip() for row in rows)  # every confirmatory verdict states its scale


def test_the_readme_words_are_those_the_ledgers_intervals_give_under_todays_definitions():
    """The README's ledger (one `make reproduce-cpu` of the shipped specs, 2026-12-04, commit fcc3ef5) re-read from its
    published intervals: `decide` on each interval gives the README's word, except where the README
    says the word is Holm's ("after Holm"), which an interval alone cannot give."""
    import re

    from headlab.reproduce.statistics import Statistic

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    rows = {line.split(" ")[1]: line.split(" | ")[2] for line in readme.splitlines() if re.match(r"\| C\d+ ", line)}
    after_holm = {claim for claim, cell in rows.items() if " after Holm " in cell}
    assert after_holm == {"C13", "C18"}
    # the claims the cpu plan leaves out since its second ledger of 2026-12-04 (40-200 seeds to decide)
    assert {claim for claim, cell in rows.items() if cell.startswith("not measured: not run at cpu")} == \
        {"C7", "C8", "C14", "C15", "C16"}
    for claim, cell in rows.items():
        word = re.split(r" after Holm| \(v\d|:", cell)[0]
        if claim in after_holm or claim == "C17" or word == "not measured":  # C17: never decisive (heads of one model)
            continue
        low, high = (float(v.replace(",", "")) for v in re.search(r"\[(-?[\d.,]+), (-?[\d.,]+)\]", cell).groups())
        spec = SPECS[claim]
        assert decide(spec, {spec.primary: Statistic((low + high) / 2, low, high, 8, "as published")}).verdict == word, claim
