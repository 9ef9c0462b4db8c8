"""Claim specs: one versioned YAML file per claim of the founding article (conf/reproduce/cNN_*.yaml).

A spec says, before anything runs, what would support or contradict the claim::

    claim: C8                      # id in the article's claim list (issue 15)
    version: 1                     # bump when the evidence or the rule changes
    title: ...                     # one line
    section: "5.1"                 # of the article
    article: {zh: <the article's words>, en: <English gloss>}
    evidence:                      # exactly one of:
      sweep: heads                 #   a conf/sweep/ grid, run once per scale:
      quick: {sweep_name: heads-synthetic, overrides: ["seed=0,1,2"]}        # CPU scale
      full: {sweep_name: heads-zh_reviews, overrides: [experiment=sweep_zh, ...]}   # the article's
      table: sweep_runs.csv        #   the aggregate table the statistics read
      figure: accuracy_vs_factor.png   # aggregate/figures/ file that shows it (optional)
      program: train               #   optional: train (headlab-train, default) or distill (headlab-distill)
      # a scale may name its teacher, a job of another sweep (the runner passes teacher=<its dir>):
      #   quick: {..., teacher: {sweep_name: heads-zh_reviews, where: {model.n_heads: 8, seed: 0}}}
      per_job:                     #   optional: commands run on each completed job before aggregating
        - {command: headlab-prune, args: [prune.max_drop=0.005], where: {model.n_heads: 8}}
        # (or quick_where / full_where when the selection differs by scale; none: every job)
    # or  evidence: {run: analyze_hf, table: head_metrics.parquet,   (one command's run directory)
    #                 quick: {run_name: c17-minilm, command: [data=en_news]}, full: {...}}
    # or  evidence: {computed: true}              (statistics of kind `computed`, no training)
    # or  evidence: {not_measured: <why, and what would measure it>}
    statistics: {<name>: {kind: mean | paired_difference | group_difference | computed, ...}}   # .statistics
    rule: {supported_if: <rule>, contradicted_if: <rule>}                     # see .rules
    notes: <caveats of this evidence>

The keys, their types and defaults are the structured-config schema `headlab.reproduce.spec_schema`
(OmegaConf checks types, choices, unknown and missing keys); this module adds the checks that
relate keys to each other and to what headlab can run. Every mistake is a ConfigError naming the
file and key.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from headlab.reproduce.spec_schema import (Direction, EvidenceConfig, MarginConfig, Measurement, MeasurementField,
                                       PerJobConfig, Reduction, RunCommand, StatisticConfig, StatisticKind, SweepProgram, load_claim_spec_config)
from headlab.errors import ConfigError
from headlab.reproduce.directions import FIGURES
from headlab.reproduce.rules import Rule, parse_rule
from headlab.stats.decisions import ALPHA

SPEC_GLOB = "c[0-9][0-9]_*.yaml"
# make reproduce-quick (exploratory, CPU), make reproduce-cpu (confirmatory, CPU), make reproduce (the article's)
TRAINED_SCALES = ("quick", "cpu", "full")
# make reproduce SCALE=suites: public checkpoint suites (evidence.suites), measured by headlab-analyze-hf
SUITES = "suites"
SCALES = (*TRAINED_SCALES, SUITES)
REQUIRED_SCALES = ("quick", "full")
# the cpu scale's second look (headlab.reproduce.looks): evidence read like a scale's, never a scale of its own
REPLICATION = "replication"
EVIDENCE_SCALES = (*TRAINED_SCALES, REPLICATION)  # the scales whose evidence settings are a ScaleConfig
EVIDENCE_KINDS = ("sweep", "run", "computed", "not_measured")
RUN_COMMANDS = {RunCommand.analyze_hf: "headlab-analyze-hf"}  # evidence.run -> the command that writes the run
# evidence.program -> the multirun command
SWEEP_PROGRAMS = {SweepProgram.train: "headlab-train", SweepProgram.distill: "headlab-distill"}
# evidence.per_job commands -> the settings prefix of their `threads` key (the runner sets it)
PER_JOB_COMMANDS = {"headlab-prune": "prune", "headlab-importance": "importance"}
_SEEDED_TABLES = ("sweep_runs.csv", "sweep_heads.csv", "sweep_layer_pairs.parquet", "sweep_redundancy_runs.csv",
                  "intervention_runs.csv", "sweep_seed_pairs.csv")  # seed pairs: a pair's first seed
_DIFFERENCES = (StatisticKind.paired_difference, StatisticKind.group_difference)


@dataclass(frozen=True)
class PerJob:
    """A command run on each completed job of a sweep whose config matches `where` (all when empty)."""

    command: str
    args: tuple[str, ...]
    where: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class ClaimSpec:
    """A loaded claim spec: the schema's evidence and statistics, the article's words, the parsed rules."""

    claim: str
    version: int
    title: str
    section: str
    zh: str
    en: str
    evidence: EvidenceConfig
    statistics: dict[str, StatisticConfig] = field(default_factory=dict)
    supported_if: Rule | None = None
    contradicted_if: Rule | None = None
    notes: str = ""
    path: str = ""
    primary: str | None = None               # the statistic the verdict reads
    margin: MarginConfig | None = None
    prerequisite: Rule | None = None         # None: nothing must form first
    prerequisite_reason: str = ""
    prerequisite_config: tuple[tuple[str, Any], ...] = ()   # settings every job must hold
    proxy: str = ""                          # why the primary is not yet the direct statistic
    exploratory_seeds: tuple[int, ...] = (0, 1, 2)
    confirmatory_seeds: tuple[int, ...] = ()
    replication_seeds: tuple[int, ...] = ()   # the second look's fresh seeds (evidence.replication)
    rules_frozen: str = ""
    alpha_spending: tuple[float, ...] = (ALPHA,)   # the one-sided alpha each look spends (headlab.reproduce.looks)

    def alpha_at(self, look: int) -> float:
        """The one-sided alpha the plan gives look `look` (1 or 2)."""
        return self.alpha_spending[look - 1]

    @property
    def has_scale(self) -> tuple[str, ...]:
        """The scales this spec has evidence settings for."""
        return tuple(sc for sc in SCALES if getattr(self.evidence, sc) is not None)

    @property
    def has_replication(self) -> bool:
        """Whether the cpu scale may give this claim a second look on fresh seeds."""
        return self.evidence.replication is not None

    @property
    def not_measured(self) -> str:
        """Why the claim has no evidence yet ("" when it has)."""
        return self.evidence.not_measured or ""

    def sweep_name(self, scale: str) -> str:
        """The folder name under the sweeps root that holds this claim's sweep at `scale`."""
        return str(getattr(self.evidence, scale).sweep_name)

    def overrides(self, scale: str) -> tuple[str, ...]:
        return tuple(getattr(self.evidence, scale).overrides)

    def run_name(self, scale: str) -> str:
        """The run directory name (under `<log dir>/runs/reproduce/`) of a `run` evidence at `scale`."""
        return str(getattr(self.evidence, scale).run_name)

    def run_command(self, scale: str) -> tuple[str, ...]:
        """The key=value settings of a `run` evidence's command at `scale`."""
        return tuple(getattr(self.evidence, scale).command)

    @property
    def program(self) -> str:
        """The command a sweep's multirun starts (headlab-train, or headlab-distill for a student sweep)."""
        return SWEEP_PROGRAMS[self.evidence.program]

    def teacher(self, scale: str) -> tuple[str, tuple[tuple[str, Any], ...]] | None:
        """(sweep_name, where) of the job whose run dir is this sweep's `teacher=`, or None."""
        found = getattr(self.evidence, scale).teacher
        return (str(found.sweep_name), tuple(sorted(found.where.items()))) if found else None

    def teacher_training(self, scale: str) -> tuple[str, str, tuple[str, ...]] | None:
        """(sweep file, sweep_name, overrides) that train this sweep's teacher when no claim's sweep
        holds it, or None (the teacher is a job of another claim's sweep)."""
        found = getattr(self.evidence, scale).teacher
        if found is None or not found.sweep:
            return None
        return str(found.sweep), str(found.sweep_name), tuple(str(o) for o in found.overrides)

    def per_job(self, scale: str) -> tuple[PerJob, ...]:
        """The commands to run on the completed jobs of this sweep at `scale`, before aggregating."""
        return tuple(PerJob(step.command, tuple(step.args),
                            tuple(sorted((getattr(step, f"{scale}_where") or step.where or {}).items())))
                     for step in self.evidence.per_job)

    @property
    def number(self) -> int:
        return int(self.claim[1:])


def load_specs(folder: str | os.PathLike) -> list[ClaimSpec]:
    """Every `cNN_*.yaml` of `folder`, in claim order; ConfigError for a bad file or a duplicate id."""
    paths = sorted(Path(folder).glob(SPEC_GLOB))
    if not paths:
        raise ConfigError("reproduce.specs", str(folder), f"a folder holding claim specs ({SPEC_GLOB})")
    specs = [load_spec(p) for p in paths]
    seen: dict[str, str] = {}
    for s in specs:
        if s.claim in seen:
            raise ConfigError(f"{Path(s.path).name}: claim", s.claim, f"an id not already used by {seen[s.claim]}")
        seen[s.claim] = Path(s.path).name
    _check_scales_apart(specs)
    return sorted(specs, key=lambda s: s.number)


def _check_scales_apart(specs: list[ClaimSpec]) -> None:
    """A folder name used at both scales would let one scale's report read the other's evidence."""
    every = (*EVIDENCE_SCALES, SUITES)
    names = {scale: {at.sweep_name or getattr(at, "run_name", None): s for s in specs
                     if (at := getattr(s.evidence, scale)) is not None and (at.sweep_name or getattr(at, "run_name", None))}
             for scale in every}
    for i, first in enumerate(every):
        for later in every[i + 1:]:
            for name in sorted(set(names[first]) & set(names[later])):
                one, other = names[first][name], names[later][name]
                raise ConfigError(f"{Path(other.path).name}: evidence.{later}", name,
                                  f"a folder name apart from the {first} scale's (used by {one.claim}), e.g. {name}-{later}")


def load_spec(path: str | os.PathLike) -> ClaimSpec:
    """The spec file at `path`, checked against the schema and then across its keys."""
    path = Path(path)
    raw = load_claim_spec_config(path)
    key = lambda k: f"{path.name}: {k}"  # noqa: E731 - the ConfigError key names the file
    claim = raw.claim
    if not (claim[:1] == "C" and claim[1:].isdigit()):
        raise ConfigError(key("claim"), claim, "C followed by a number (C1 ... C18)")
    for name in ("title", "section"):
        _required(getattr(raw, name), name, key)
    if not raw.article.zh.strip() or not raw.article.en.strip():
        raise ConfigError(key("article"), {"zh": raw.article.zh, "en": raw.article.en},
                          "{zh: the article's words, en: an English gloss}")
    evidence = _evidence(raw.evidence, key)
    measured = evidence.not_measured is None
    statistics = _statistics(raw.statistics, evidence, key) if measured else {}
    _check_not_swept(statistics, evidence, key)
    rules = {"supported_if": raw.rule.supported_if, "contradicted_if": raw.rule.contradicted_if}
    decision = _decision(raw, statistics, measured, key)
    if measured and raw.margin is None and None in rules.values():
        raise ConfigError(key("rule"), {k: v for k, v in rules.items() if v is not None}, "both supported_if and contradicted_if")
    parsed = {k: parse_rule(text, key(f"rule.{k}"), tuple(statistics)) for k, text in rules.items() if text is not None}
    if raw.version < 1:
        raise ConfigError(key("version"), raw.version, "an integer >= 1")
    return ClaimSpec(claim, raw.version, raw.title, raw.section, raw.article.zh.strip(), raw.article.en.strip(), evidence,
                     statistics, parsed.get("supported_if"), parsed.get("contradicted_if"), raw.notes.strip(), str(path),
                     **decision)


def _decision(raw, statistics: dict, measured: bool, key) -> dict[str, Any]:
    """primary, margin, prerequisite and seeds, checked against each other and the statistics."""
    if raw.primary is None:
        if raw.margin is not None:
            raise ConfigError(key("primary"), None, "the statistic the margin applies to (one of the spec's statistics)")
        if raw.evidence.replication is not None:
            raise ConfigError(key("evidence.replication"), raw.evidence.replication.sweep_name,
                              "no second look for a spec without a primary statistic and margin")
        return {}
    if measured and raw.primary not in statistics:
        raise ConfigError(key("primary"), raw.primary, f"one of the spec's statistics ({', '.join(statistics)})")
    if raw.margin is None:
        raise ConfigError(key("margin"), None, "{value, reason[, null, direction]}: the smallest effect the article allows")
    m = raw.margin
    if not m.reason.strip():
        raise ConfigError(key("margin.reason"), m.reason, "the article's words the margin comes from")
    beyond = m.value > m.no_effect if m.direction is Direction.greater else m.value < m.no_effect
    if not beyond:
        raise ConfigError(key("margin.value"), m.value, f"a value on the claimed side ({m.direction.name}) of no_effect={m.no_effect}")
    if raw.prerequisite is None or not raw.prerequisite.reason.strip():
        raise ConfigError(key("prerequisite"), None, "{rule, reason}: what must form for the claim to be testable")
    rule = None
    if raw.prerequisite.rule is not None and measured:
        rule = parse_rule(raw.prerequisite.rule, key("prerequisite.rule"), tuple(statistics))
    seeds = raw.seeds
    if set(seeds.exploratory) & set(seeds.confirmatory):
        raise ConfigError(key("seeds.confirmatory"), list(seeds.confirmatory),
                          f"seeds no exploratory run used (not {sorted(set(seeds.exploratory) & set(seeds.confirmatory))})")
    reused = set(seeds.replication) & (set(seeds.exploratory) | set(seeds.confirmatory))
    if reused:
        raise ConfigError(key("seeds.replication"), list(seeds.replication),
                          f"fresh seeds, in neither the exploratory nor the confirmatory list (not {sorted(reused)})")
    if (raw.evidence.replication is not None) != bool(seeds.replication):
        raise ConfigError(key("seeds.replication"), list(seeds.replication),
                          "the second look's seeds exactly when evidence.replication is given")
    spending = _alpha_spending(list(seeds.alpha), raw.evidence.replication is not None, key)
    return {"primary": raw.primary, "margin": m, "prerequisite": rule, "prerequisite_reason": raw.prerequisite.reason.strip(),
            "alpha_spending": spending,
            "exploratory_seeds": tuple(seeds.exploratory), "confirmatory_seeds": tuple(seeds.confirmatory),
            "replication_seeds": tuple(seeds.replication),
            "rules_frozen": seeds.rules_frozen, "prerequisite_config": tuple(sorted(raw.prerequisite.config.items())),
            "proxy": raw.proxy.strip()}


def _alpha_spending(alpha: list[float], second_look: bool, key) -> tuple[float, ...]:
    """The plan: one alpha per look, each positive, summing to at most ALPHA (a union bound over the
    looks keeps the claim's error at ALPHA); a spec with a second look must write it down."""
    looks = 2 if second_look else 1
    if not alpha and not second_look:
        return (ALPHA,)
    if len(alpha) != looks or any(not 0 < a <= ALPHA for a in alpha) or sum(alpha) > ALPHA + 1e-12:
        raise ConfigError(key("seeds.alpha"), alpha, f"{looks} one-sided alpha{'s' if looks > 1 else ''} (one per look), "
                                                   f"each > 0, summing to at most {ALPHA}")
    return tuple(float(a) for a in alpha)


def _required(value: Any, name: str, key) -> Any:
    if value in (None, ""):
        raise ConfigError(key(name), None, "a value (required)")
    return value


def _evidence(evidence: EvidenceConfig, key) -> EvidenceConfig:
    if evidence.kind is None:
        given = [k for k in EVIDENCE_KINDS if getattr(evidence, k) not in (None, False)]
        raise ConfigError(key("evidence"), given, f"exactly one of {', '.join(EVIDENCE_KINDS)}")
    if evidence.kind == "run":
        for name in ("table", *REQUIRED_SCALES):
            _required(getattr(evidence, name), f"evidence.{name}", key)
        for scale in (sc for sc in EVIDENCE_SCALES if getattr(evidence, sc) is not None):
            at = getattr(evidence, scale)
            if not at.run_name:
                raise ConfigError(key(f"evidence.{scale}.run_name"), at.run_name, "the run's folder name (run_name)")
            _settings(at.command, key(f"evidence.{scale}.command"), "a list of key=value settings of the command")
    if evidence.replication is not None and evidence.kind != "sweep":
        raise ConfigError(key("evidence.replication"), evidence.replication.sweep_name or evidence.replication.run_name,
                          "a second look only for sweep evidence (fresh seeds of the same grid)")
    if evidence.suites is not None:
        _suites(evidence, key)
    if evidence.kind == "computed" and evidence.figure is not None and evidence.figure not in FIGURES:
        raise ConfigError(key("evidence.figure"), evidence.figure, f"one of {', '.join(FIGURES)} (a computed claim's figure)")
    if evidence.kind == "sweep":
        for name in ("table", *REQUIRED_SCALES):
            _required(getattr(evidence, name), f"evidence.{name}", key)
        for scale in (sc for sc in EVIDENCE_SCALES if getattr(evidence, sc) is not None):
            at = getattr(evidence, scale)
            if not at.sweep_name:
                raise ConfigError(key(f"evidence.{scale}.sweep_name"), at.sweep_name, "the sweep's folder name (sweep_name)")
            _settings(at.overrides, key(f"evidence.{scale}.overrides"), "a list of key=value overrides")
            if at.teacher is not None and not at.teacher.where:
                raise ConfigError(key(f"evidence.{scale}.teacher.where"), at.teacher.where,
                                  "{key: value, ...} naming one job of the teacher's sweep")
            if at.teacher is not None and bool(at.teacher.sweep) != bool(at.teacher.overrides):
                raise ConfigError(key(f"evidence.{scale}.teacher.sweep"), at.teacher.sweep,
                                  "a sweep file and its overrides together (how to train the teacher), or neither")
            if at.teacher is not None and at.teacher.overrides:
                _settings(at.teacher.overrides, key(f"evidence.{scale}.teacher.overrides"), "a list of key=value overrides")
        for i, step in enumerate(evidence.per_job):
            _per_job(step, lambda k, i=i: key(f"evidence.per_job[{i}].{k}"))
    return evidence


def _suites(evidence: EvidenceConfig, key) -> None:
    """The suites block: a folder name, key=value settings, a reason; a per-step table or the
    checkpoint weights (computed) name the step they read only where that means something."""
    at = evidence.suites
    if evidence.kind == "not_measured":
        raise ConfigError(key("evidence.suites"), at.suite, "no suites block on a claim without evidence")
    for name in ("suite", "sweep_name", "reason"):
        if not str(getattr(at, name)).strip():
            raise ConfigError(key(f"evidence.suites.{name}"), getattr(at, name), "a value (required)")
    _settings(at.command, key("evidence.suites.command"), "a list of key=value settings of headlab-analyze-hf")
    if any(item.split("=", 1)[0] in ("suite", "run_dir") for item in at.command):
        raise ConfigError(key("evidence.suites.command"), at.command, "settings other than suite= and run_dir= (the runner sets them)")
    if evidence.kind == "computed" and at.table is not None:
        raise ConfigError(key("evidence.suites.table"), at.table, "no table for computed statistics (they read the checkpoints' weights)")
    if at.step is not None and at.step < 0:
        raise ConfigError(key("evidence.suites.step"), at.step, "a step >= 0 (none: each seed's last)")


def _check_not_swept(statistics: dict[str, StatisticConfig], evidence: EvidenceConfig, key) -> None:
    """Each `not_swept` key must select something in a statistic (a misspelt key would drop nothing)."""
    if evidence.suites is None:
        return
    selected = {k for s in statistics.values() for sel in (s.where, s.a or {}, s.b or {}) for k in sel}
    unknown = [k for k in evidence.suites.not_swept if k not in selected]
    if unknown:
        raise ConfigError(key("evidence.suites.not_swept"), unknown,
                          f"keys the statistics select on ({', '.join(sorted(selected)) or 'none'})")


def _settings(items: list[str], key: str, allowed: str) -> None:
    if not all("=" in item for item in items):
        raise ConfigError(key, items, allowed)


def _per_job(step: PerJobConfig, key) -> None:
    if step.command not in PER_JOB_COMMANDS:
        raise ConfigError(key("command"), step.command, f"one of {', '.join(PER_JOB_COMMANDS)}")
    _settings(step.args, key("args"), "a list of key=value settings of the command")


def _statistics(statistics: dict[str, StatisticConfig], evidence: EvidenceConfig, key) -> dict[str, StatisticConfig]:
    if not statistics:
        raise ConfigError(key("statistics"), statistics or None, "a mapping of name -> statistic")
    computed = evidence.kind == "computed"
    for name, s in statistics.items():
        k = lambda part, n=name: key(f"statistics.{n}.{part}")  # noqa: E731
        if not name.isidentifier():
            raise ConfigError(key("statistics"), name, "names that are identifiers (letters, digits, _)")
        if (s.kind is StatisticKind.computed) != computed:
            raise ConfigError(k("kind"), s.kind.name, "`computed` exactly when evidence is {computed: true}")
        if computed:
            if s.measurement is None or s.field is None:
                raise ConfigError(k("measurement"), s.measurement and s.measurement.name,
                                  f"one of {', '.join(m.name for m in Measurement)} with field "
                                  f"{' or '.join(f.name for f in MeasurementField)}")
            continue
        _required(s.column, "column", k)
        if (s.reduce is Reduction.fraction_at_most) != (s.at_most is not None):
            raise ConfigError(k("at_most"), s.at_most, "a bound exactly when reduce is fraction_at_most")
        if s.bounds is not None and not (len(s.bounds) == 2 and s.bounds[0] < s.bounds[1]):
            raise ConfigError(k("bounds"), s.bounds, "[low, high]: the range the value can take (its interval is clipped to it)")
        if s.kind in _DIFFERENCES and (s.a is None or s.b is None):
            raise ConfigError(k("a"), s.a, "two selections a: {...} and b: {...}")
        if s.kind is StatisticKind.paired_difference and evidence.table not in _SEEDED_TABLES:
            raise ConfigError(k("kind"), "paired_difference", f"a table with seeds ({', '.join(_SEEDED_TABLES)})")
    return statistics
