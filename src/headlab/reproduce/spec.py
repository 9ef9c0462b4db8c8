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

Every mistake is a ConfigError naming the file and key.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from headlab.errors import ConfigError
from headlab.reproduce.directions import FIGURES, MEASUREMENTS
from headlab.reproduce.rules import Rule, parse_rule
from headlab.reproduce.statistics import KINDS, REDUCTIONS

SPEC_GLOB = "c[0-9][0-9]_*.yaml"
SCALES = ("quick", "full")  # make reproduce-quick (CPU) and make reproduce (the article's scale)
EVIDENCE_KINDS = ("sweep", "run", "computed", "not_measured")
RUN_COMMANDS = {"analyze_hf": "headlab-analyze-hf"}  # evidence.run -> the command that writes the run
SWEEP_PROGRAMS = {"train": "headlab-train", "distill": "headlab-distill"}  # evidence.program -> the multirun command
# evidence.per_job commands -> the settings prefix of their `threads` key (the runner sets it)
PER_JOB_COMMANDS = {"headlab-prune": "prune", "headlab-importance": "importance"}
_SEEDED_TABLES = ("sweep_runs.csv", "sweep_heads.csv", "sweep_layer_pairs.parquet", "sweep_redundancy_runs.csv",
                  "intervention_runs.csv")


@dataclass(frozen=True)
class PerJob:
    """A command run on each completed job of a sweep whose config matches `where` (all when empty)."""

    command: str
    args: tuple[str, ...]
    where: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class ClaimSpec:
    claim: str
    version: int
    title: str
    section: str
    zh: str
    en: str
    evidence: dict[str, Any]
    statistics: dict[str, dict[str, Any]] = field(default_factory=dict)
    supported_if: Rule | None = None
    contradicted_if: Rule | None = None
    notes: str = ""
    path: str = ""

    @property
    def not_measured(self) -> str:
        """Why the claim has no evidence yet ("" when it has)."""
        return str(self.evidence.get("not_measured", ""))

    def sweep_name(self, scale: str) -> str:
        """The folder name under the sweeps root that holds this claim's sweep at `scale`."""
        return str(self.evidence[scale]["sweep_name"])

    def overrides(self, scale: str) -> tuple[str, ...]:
        return tuple(self.evidence[scale]["overrides"])

    def run_name(self, scale: str) -> str:
        """The run directory name (under `<log dir>/runs/reproduce/`) of a `run` evidence at `scale`."""
        return str(self.evidence[scale]["run_name"])

    @property
    def program(self) -> str:
        """The command a sweep's multirun starts (headlab-train, or headlab-distill for a student sweep)."""
        return SWEEP_PROGRAMS[self.evidence.get("program", "train")]

    def teacher(self, scale: str) -> tuple[str, tuple[tuple[str, Any], ...]] | None:
        """(sweep_name, where) of the job whose run dir is this sweep's `teacher=`, or None."""
        found = self.evidence[scale].get("teacher")
        return (str(found["sweep_name"]), tuple(sorted(found["where"].items()))) if found else None

    def per_job(self, scale: str) -> tuple[PerJob, ...]:
        """The commands to run on the completed jobs of this sweep at `scale`, before aggregating."""
        return tuple(PerJob(str(step["command"]), tuple(str(a) for a in step.get("args", ())),
                            tuple(sorted((step.get(f"{scale}_where") or step.get("where") or {}).items())))
                     for step in self.evidence.get("per_job", ()))

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
    names = {scale: {s.evidence[scale].get("sweep_name") or s.evidence[scale].get("run_name"): s for s in specs
                     if scale in s.evidence} for scale in SCALES}
    for name in set(names["quick"]) & set(names["full"]):
        quick, full = names["quick"][name], names["full"][name]
        raise ConfigError(f"{Path(full.path).name}: evidence.full", name,
                          f"a folder name apart from the quick scale's (used by {quick.claim}), e.g. {name}-full")


def load_spec(path: str | os.PathLike) -> ClaimSpec:
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise ConfigError(path.name, "<file>", f"valid YAML ({err})") from err
    if not isinstance(raw, dict):
        raise ConfigError(path.name, raw, "a mapping of claim, version, title, section, article, evidence, ...")
    key = lambda k: f"{path.name}: {k}"  # noqa: E731 - the ConfigError key names the file
    claim = _required(raw, "claim", key)
    if not (isinstance(claim, str) and claim[:1] == "C" and claim[1:].isdigit()):
        raise ConfigError(key("claim"), claim, "C followed by a number (C1 ... C18)")
    article = _required(raw, "article", key)
    if not isinstance(article, dict) or not article.get("zh") or not article.get("en"):
        raise ConfigError(key("article"), article, "{zh: the article's words, en: an English gloss}")
    evidence = _evidence(_required(raw, "evidence", key), key)
    statistics = {} if "not_measured" in evidence else _statistics(raw.get("statistics"), evidence, key)
    rules = raw.get("rule") or {}
    if "not_measured" not in evidence and not {"supported_if", "contradicted_if"} <= set(rules):
        raise ConfigError(key("rule"), rules, "both supported_if and contradicted_if")
    parsed = {k: parse_rule(rules[k], key(f"rule.{k}"), tuple(statistics)) for k in ("supported_if", "contradicted_if")
              if k in rules}
    version = _required(raw, "version", key)
    if not isinstance(version, int) or version < 1:
        raise ConfigError(key("version"), version, "an integer >= 1")
    return ClaimSpec(claim, version, str(_required(raw, "title", key)), str(_required(raw, "section", key)),
                     str(article["zh"]).strip(), str(article["en"]).strip(), evidence, statistics,
                     parsed.get("supported_if"), parsed.get("contradicted_if"), str(raw.get("notes", "")).strip(), str(path))


def _required(raw: dict, name: str, key) -> Any:
    if name not in raw or raw[name] in (None, ""):
        raise ConfigError(key(name), None, "a value (required)")
    return raw[name]


def _evidence(evidence: Any, key) -> dict[str, Any]:
    if not isinstance(evidence, dict):
        raise ConfigError(key("evidence"), evidence, "a mapping")
    kinds = [k for k in EVIDENCE_KINDS if k in evidence]
    if len(kinds) != 1:
        raise ConfigError(key("evidence"), sorted(evidence), f"exactly one of {', '.join(EVIDENCE_KINDS)}")
    if "run" in evidence:
        if evidence["run"] not in RUN_COMMANDS:
            raise ConfigError(key("evidence.run"), evidence["run"], f"one of {', '.join(RUN_COMMANDS)}")
        for scale in ("table", *SCALES):
            _required(evidence, scale, lambda k: key(f"evidence.{k}"))
        for scale in SCALES:
            at = evidence[scale]
            if not isinstance(at, dict) or not isinstance(at.get("run_name"), str) or not isinstance(at.get("command"), list):
                raise ConfigError(key(f"evidence.{scale}"), at, "{run_name: <folder name>, command: [key=value, ...]}")
    if "computed" in evidence and evidence.get("figure") is not None and evidence["figure"] not in FIGURES:
        raise ConfigError(key("evidence.figure"), evidence["figure"], f"one of {', '.join(FIGURES)} (a computed claim's figure)")
    if "sweep" in evidence:
        for name in ("table", *SCALES):
            _required(evidence, name, lambda k: key(f"evidence.{k}"))
        for scale in SCALES:
            at = evidence[scale]
            if not isinstance(at, dict) or not isinstance(at.get("sweep_name"), str) or not at["sweep_name"]:
                raise ConfigError(key(f"evidence.{scale}.sweep_name"), (at or {}).get("sweep_name") if isinstance(at, dict) else at,
                                  "the sweep's folder name (sweep_name)")
            overrides = at.get("overrides")
            if not isinstance(overrides, list) or not all(isinstance(o, str) and "=" in o for o in overrides):
                raise ConfigError(key(f"evidence.{scale}.overrides"), overrides, "a list of key=value overrides")
            teacher = at.get("teacher")
            if teacher is not None and not (isinstance(teacher, dict) and isinstance(teacher.get("sweep_name"), str)
                                            and isinstance(teacher.get("where"), dict) and teacher["where"]):
                raise ConfigError(key(f"evidence.{scale}.teacher"), teacher,
                                  "{sweep_name: <another sweep of this scale>, where: {key: value, ...}} naming one job")
        if evidence.get("program", "train") not in SWEEP_PROGRAMS:
            raise ConfigError(key("evidence.program"), evidence.get("program"), f"one of {', '.join(SWEEP_PROGRAMS)}")
        _per_job(evidence.get("per_job", []), lambda k: key(f"evidence.per_job{k}"))
    return evidence


def _per_job(steps: Any, key) -> None:
    if not isinstance(steps, list):
        raise ConfigError(key(""), steps, "a list of {command, args, where}")
    for i, step in enumerate(steps):
        if not isinstance(step, dict) or step.get("command") not in PER_JOB_COMMANDS:
            raise ConfigError(key(f"[{i}].command"), step.get("command") if isinstance(step, dict) else step,
                              f"one of {', '.join(PER_JOB_COMMANDS)}")
        unknown = sorted(set(step) - {"command", "args", "where", *(f"{s}_where" for s in SCALES)})
        if unknown:
            raise ConfigError(key(f"[{i}]"), unknown[0], "command, args, where, quick_where or full_where")
        args = step.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) and "=" in a for a in args):
            raise ConfigError(key(f"[{i}].args"), args, "a list of key=value settings of the command")
        for name in ("where", *(f"{s}_where" for s in SCALES)):
            if name in step and not isinstance(step[name], dict):
                raise ConfigError(key(f"[{i}].{name}"), step[name], "a mapping of config key -> value")


def _statistics(statistics: Any, evidence: dict, key) -> dict[str, dict[str, Any]]:
    if not isinstance(statistics, dict) or not statistics:
        raise ConfigError(key("statistics"), statistics, "a mapping of name -> statistic")
    for name, s in statistics.items():
        k = lambda part, n=name: key(f"statistics.{n}.{part}")  # noqa: E731
        if not (isinstance(name, str) and name.isidentifier()):
            raise ConfigError(key("statistics"), name, "names that are identifiers (letters, digits, _)")
        if not isinstance(s, dict) or s.get("kind") not in KINDS:
            raise ConfigError(k("kind"), (s or {}).get("kind") if isinstance(s, dict) else s, f"one of {', '.join(KINDS)}")
        if (s["kind"] == "computed") != ("computed" in evidence):
            raise ConfigError(k("kind"), s["kind"], "`computed` exactly when evidence is {computed: true}")
        if s["kind"] == "computed":
            if s.get("measurement") not in MEASUREMENTS or s.get("field") not in ("cos_std", "in_band"):
                raise ConfigError(k("measurement"), s.get("measurement"),
                                  f"one of {', '.join(MEASUREMENTS)} with field cos_std or in_band")
            continue
        _required(s, "column", k)
        bounds = s.get("bounds")
        if bounds is not None and not (isinstance(bounds, list) and len(bounds) == 2
                                       and all(isinstance(b, (int, float)) and not isinstance(b, bool) for b in bounds)
                                       and bounds[0] < bounds[1]):
            raise ConfigError(k("bounds"), bounds, "[low, high]: the range the value can take (its interval is clipped to it)")
        if s.get("reduce") is not None and s["reduce"] not in REDUCTIONS:
            raise ConfigError(k("reduce"), s["reduce"], f"one of {', '.join(REDUCTIONS)}")
        if s["kind"] in ("paired_difference", "group_difference") and (not isinstance(s.get("a"), dict)
                                                                      or not isinstance(s.get("b"), dict)):
            raise ConfigError(k("a"), s.get("a"), "two selections a: {...} and b: {...}")
        if s["kind"] == "paired_difference":
            if not isinstance(s.get("a"), dict) or not isinstance(s.get("b"), dict):
                raise ConfigError(k("a"), s.get("a"), "two config selections a: {...} and b: {...}")
            if evidence.get("table") not in _SEEDED_TABLES:
                raise ConfigError(k("kind"), "paired_difference", f"a table with seeds ({', '.join(_SEEDED_TABLES)})")
    return statistics
