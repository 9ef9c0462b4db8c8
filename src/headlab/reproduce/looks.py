"""The cpu scale's second look: fresh seeds for the claims its first look leaves undecided.

The design (adaptive allocation with intervals that stay valid), fixed in the specs before a
second look's tables exist:

- Each spec fixes an alpha-spending plan (`seeds.alpha`): the one-sided alpha its claim spends at
  look 1 and at look 2, summing to at most 0.025 (a spec without a second look spends all 0.025 at
  look 1). The plan is written before the look it governs, never after reading it.
- Look 1 reads every claim's `cpu` evidence; Holm's correction runs over its claims, each p weighted
  by its plan's look-1 alpha (`headlab.reproduce.multiplicity`).
- A claim gets look 2 when look 1 left it inconclusive (after Holm) and its spec names
  `evidence.replication` with `seeds.replication`: seeds no earlier run used, a cap fixed in the
  spec. "Not testable" and "not measured" are not retried: more seeds do not make a phenomenon form.
- Look 2 reads the fresh seeds only, never pooled with look 1. Its grid and seeds are fixed in
  the spec, so its intervals and p-values are those of a fixed-size test on independent data,
  whatever look 1 showed: which claims are retried depends on look-1 data only, and look 2
  contains none of it.
- Holm then runs once more over ALL the claims, each with the p of the look its verdict comes from,
  weighted by that look's alpha: one family across both looks, familywise error at most 0.025
  (a union bound over the looks inside each claim's weight). Holm is monotone, so a verdict look 1
  kept stands in this family too.
- A retried claim's verdict is its look-2 verdict; what look 1 gave stays beside it (`first_look`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Mapping

from headlab.reproduce.spec import REPLICATION, ClaimSpec
from headlab.reproduce.verdict import DECISIVE, INCONCLUSIVE, ClaimResult

DESIGN = ("look 2 (make reproduce-cpu): the claims look 1 leaves inconclusive are run again on fresh seeds "
          "fixed in their specs and decided on those seeds alone; each spec fixes the one-sided alpha it spends "
          "at each look (summing to at most 0.025), and one Holm family runs across both looks, so the "
          "familywise error over both is at most 0.025 (Holm over every null the verdicts rest on)")


def may_need_second_look(result: ClaimResult, family_size: int) -> bool:
    """Whether look 2 could still decide this claim, known from its own look-1 result: the runner
    starts look 2 early, beside the rest of look 1, for every claim this holds for. A decisive
    verdict whose weighted p (`multiplicity.spent`) is at most ALPHA / family_size survives Holm
    whatever the other claims give; "not testable" and "not measured" are never retried."""
    from headlab.reproduce.multiplicity import spent
    from headlab.stats.decisions import ALPHA

    if not result.spec.has_replication or result.verdict not in (INCONCLUSIVE, *DECISIVE):
        return False
    if result.verdict == INCONCLUSIVE:
        return True
    return not spent(result) <= ALPHA / max(1, family_size)


def wants_second_look(result: ClaimResult) -> bool:
    """Look 1 left the claim inconclusive, and its spec gives it fresh seeds."""
    return result.verdict == INCONCLUSIVE and result.spec.has_replication


def second_look_specs(results: list[ClaimResult]) -> list[ClaimSpec]:
    return [r.spec for r in results if wants_second_look(r)]


def with_second_look(results: list[ClaimResult], sweeps_root: str | Path, explicit: Mapping[str, Path] | None = None,
                     evaluate: Callable[..., ClaimResult] | None = None) -> list[ClaimResult]:
    """`results` (look 1, after Holm) with every retried claim replaced by its look-2 result, and
    Holm run again over all of them (one family across the looks, each p weighted by its look's
    alpha); nothing retried: `results` as they were. `evaluate` reads a claim's evidence
    (`headlab.reproduce.evidence.evaluate_claim`)."""
    from headlab.reproduce.multiplicity import control

    if evaluate is None:
        from headlab.reproduce.evidence import evaluate_claim as evaluate
    retried = [r for r in results if wants_second_look(r)]
    if not retried:
        return results
    second = [evaluate(r.spec, sweeps_root, explicit, REPLICATION) for r in retried]
    for first, again in zip(retried, second):
        again.look = 2
        again.first_look = first_look_line(first)
    by_claim = {r.spec.claim: r for r in second}
    return control([by_claim.get(r.spec.claim, r) for r in results], label="both looks'")


def first_look_line(r: ClaimResult) -> str:
    """What look 1 gave, in one line: its verdict, primary statistic, p and Holm p."""
    from headlab.reproduce.power import number_text

    s, n = r.statistics.get(r.spec.primary or ""), number_text
    shown = "" if s is None else f", {r.spec.primary} {n(s.mean)} [{n(s.ci_low)}, {n(s.ci_high)}] (n={s.n})"
    return f"look 1: {r.verdict}{shown}, p {n(r.p_value)}, Holm p {n(r.p_holm)}"


def second_look_jobs(specs: list[ClaimSpec]):
    """The look-2 sweeps of `specs` (those with fresh seeds), one per folder name."""
    from headlab.reproduce.jobs import sweep_jobs

    return sweep_jobs([s for s in specs if s.has_replication], REPLICATION)


def run_second_look(runner, specs: list[ClaimSpec]) -> dict[str, Path]:
    """Run (resumably, as look 1) the look-2 sweeps of `specs`: the claims look 1 left inconclusive
    (`second_look_specs`), or in a dry run every claim, to print all the design allows. Returns the
    folders by sweep name."""
    from headlab.reproduce.runner import run_plan

    jobs = second_look_jobs(specs)
    if runner.dry_run and jobs:
        runner.say("# look 2, only for the claims look 1 leaves inconclusive: fresh seeds, read on their own")
    return run_plan(runner, jobs, []) if jobs else {}


def deferred_second_look(specs: list[ClaimSpec], sweeps_root: str | Path, explicit: Mapping[str, Path] | None = None,
                         evaluate: Callable[..., ClaimResult] | None = None) -> list:
    """The look-2 sweeps as the runner's deferred items: each starts once its claims' look-1 (cpu)
    sweeps have finished, and only if `may_need_second_look` holds for one of them then. The
    verdict still takes look 2 only for claims Holm leaves inconclusive (`with_second_look`), so a
    look 2 run early for a claim that Holm then decides is not read."""
    from headlab.reproduce.runner import Deferred

    if evaluate is None:
        from headlab.reproduce.evidence import evaluate_claim as evaluate
    size = sum(1 for s in specs if s.primary is not None)
    items = []
    for job in second_look_jobs(specs):
        claims = [s for s in specs if s.claim in job.claims]
        after = tuple(dict.fromkeys(s.sweep_name("cpu") for s in claims if s.evidence.cpu is not None))
        items.append(Deferred(job, after, lambda claims=claims: any(
            may_need_second_look(evaluate(s, sweeps_root, explicit, "cpu"), size) for s in claims)))
    return items
