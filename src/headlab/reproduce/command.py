"""What `headlab-reproduce` does with its settings before and after the report: the settings themselves
(`ReproduceCommand`), the claim specs it reads, the evidence folders it was
given, the runner of `run=true` / `jobs=true`, the summary line of a job list, and the time table of a run.
Every setting mistake is a ConfigError raised here, before anything runs or is written (docs/reproduce.md)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

from headlab.config.values import check_choice, check_int
from headlab.errors import ConfigError
from headlab.reproduce.spec import SCALES, load_specs


@dataclass
class ReproduceCommand:
    """`headlab-reproduce [run=true] [jobs=true] [scale=quick|cpu|full] [KEY=VALUE ...]`. OmegaConf checks the
    types when the command line is composed; the choices and ranges are checked here."""

    run: bool = False  # run the sweeps and commands first (resumable), then report
    jobs: bool = False  # print the commands run=true would run at this scale and exit (= run + dry_run)
    dry_run: bool = False  # with run=true: print the commands, run nothing
    # quick: exploratory CPU run; cpu: the confirmatory CPU run (make reproduce-cpu); full: the article's scale;
    # suites: public checkpoint suites measured by headlab-analyze-hf (the specs' evidence.suites)
    scale: str = "quick"
    # scale=suites: this suite (a conf/suite/ name or a folder, e.g. a local tiny suite) instead of each spec's
    # (not `suite=`: that name is headlab's config group of suites, which Hydra would try to compose)
    use_suite: Optional[str] = None
    specs: Optional[str] = None  # folder of claim specs (null: the shipped conf/reproduce)
    sweeps_root: Optional[str] = None  # where sweeps live (null: $HEADLAB_LOG_DIR/sweeps, else logs/sweeps)
    evidence: Dict[str, str] = field(default_factory=dict)  # SWEEP_NAME: DIR, this sweep folder for that sweep
    out: Optional[str] = None  # report folder (null: reports/<today>, with only=: reports/<today>-<claims>)
    only: List[str] = field(default_factory=list)  # claim ids (empty: all)
    launcher: Optional[str] = None  # Hydra launcher of the sweeps (null: joblib for quick and cpu, slurm for full; basic: one job at a time)
    lanes: int = 2  # sweeps run side by side, each job with cores / lanes threads
    override: List[str] = field(default_factory=list)  # KEY=VALUE appended to every sweep, e.g. trainer.accelerator=gpu

    def __post_init__(self) -> None:
        check_choice("scale", self.scale, SCALES)
        check_int("lanes", self.lanes, 1)
        if self.use_suite is not None and self.scale != "suites":
            raise ConfigError("use_suite", self.use_suite, "only with scale=suites (the suite the claims read there)")
        bad = [o for o in self.override if "=" not in o]
        if bad:
            raise ConfigError("override", bad[0], "KEY=VALUE")


def reproduce_schema() -> Any:
    """The schema as the ConfigStore keeps it (`headlab-reproduce` passes it to run_app): `evidence` open
    to new sweep names, so that `evidence={NAME:DIR}` and `evidence.NAME=DIR` work (Hydra locks every other
    key: a typo is refused)."""
    from omegaconf import OmegaConf

    node = OmegaConf.structured(ReproduceCommand)
    OmegaConf.set_struct(node.evidence, False)
    return node


@dataclass
class Plan:
    """A `ReproduceCommand` checked and resolved: the specs, the evidence given, and (with run=true or
    jobs=true) the runner with the sweeps and runs it would start."""

    specs: list
    sweeps_root: Path
    explicit: dict[str, Path]
    runner: Any = None
    sweeps: list = field(default_factory=list)
    runs: list = field(default_factory=list)
    left_out: list = field(default_factory=list)  # only=: the specs of the claims left out (a teacher's sweep may be theirs)


def default_report_dir(day: str, only: list, specs: list) -> Path:
    """Where a report goes without `out=`: `reports/<day>` for the whole ledger; a report of the claims
    `only=` chose gets their ids in its name, so it never overwrites the day's ledger or another subset's.

    >>> class S: claim = "C6"
    >>> default_report_dir("2026-12-03", [], [S]), default_report_dir("2026-12-03", ["c6"], [S])
    (PosixPath('reports/2026-12-03'), PosixPath('reports/2026-12-03-C6'))
    """
    if not only:
        return Path("reports") / day
    return Path("reports") / "-".join([day, *(s.claim for s in specs)])


def plan_for(cmd) -> Plan:
    """Specs, evidence folders and runner of `cmd` (a `ReproduceCommand`)."""
    from headlab.store.run_info import default_log_dir

    root = Path(cmd.sweeps_root) if cmd.sweeps_root else default_log_dir() / "sweeps"
    specs = claim_specs(cmd.specs, cmd.only)
    if cmd.scale == "suites" and cmd.use_suite is not None:
        from headlab.hf.suite import load_suite

        load_suite(cmd.use_suite)  # a suite that cannot be read: one line, before anything runs
    plan = Plan(specs, root, explicit_evidence(cmd.evidence, evidence_names(specs, cmd.scale, cmd.use_suite)))
    if cmd.jobs or cmd.run:
        from headlab.reproduce.evidence import run_root
        from headlab.reproduce.jobs import LAUNCHERS, run_jobs, sweep_jobs
        from headlab.reproduce.runner import Runner

        plan.runner = Runner(root, run_root(root), cmd.scale, cmd.launcher or LAUNCHERS[cmd.scale], cmd.lanes,
                             tuple(cmd.override), dry_run=cmd.jobs or cmd.dry_run)
        chosen = {s.claim for s in specs}
        plan.left_out = [s for s in claim_specs(cmd.specs, []) if s.claim not in chosen] if cmd.only else []
        plan.sweeps, plan.runs = sweep_jobs(plan.specs, cmd.scale, left_out_sweeps(plan.left_out, cmd.scale)), run_jobs(plan.specs, cmd.scale)
        if cmd.scale == "suites":
            from headlab.reproduce.jobs import suite_jobs

            plan.runs = suite_jobs(plan.specs, cmd.use_suite)
        _freeze(plan, cmd)
    return plan


def _freeze(plan: Plan, cmd) -> None:
    """A confirmatory start only with committed, version-disciplined specs (a job list warns), and
    the runner records each spec's freeze before its jobs start (headlab.reproduce.freeze)."""
    from headlab.reproduce.freeze import check_start, freeze_entries

    starts = not plan.runner.dry_run
    # at the suites scale only the claims with a suites block read anything
    specs = [s for s in plan.specs if s.evidence.suites is not None] if cmd.scale == "suites" else plan.specs
    check_start(specs, cmd.scale, starts, plan.runner.say)
    if starts:
        plan.runner.freeze = freeze_entries(specs)


def left_out_sweeps(left_out: list, scale: str) -> frozenset[str]:
    """The sweeps of the claims `only=` left out: a chosen student's teacher may be one of them (a sweep
    run before), read from its folder rather than trained again."""
    from headlab.reproduce.jobs import sweep_jobs

    return frozenset(j.sweep_name for j in sweep_jobs(left_out, scale)) if left_out else frozenset()


def claim_specs(folder: str | None, only: list[str]) -> list:
    """The specs of `folder` (None: the shipped conf/reproduce), those of the claim ids `only` (any
    case; each item may be `C1,C2`) when it is not empty."""
    from importlib.resources import files

    specs = load_specs(Path(folder) if folder else Path(str(files("headlab.conf").joinpath("reproduce"))))
    wanted = [c.strip().upper() for item in only for c in item.split(",") if c.strip()]
    if not wanted:
        return specs
    if set(wanted) - {s.claim for s in specs}:
        raise ConfigError("only", ",".join(only), f"claim ids among {', '.join(s.claim for s in specs)}")
    return [s for s in specs if s.claim in wanted]


def evidence_names(specs: list, scale: str, suite: str | None = None) -> list[str]:
    """The sweep names the claims `specs` read at `scale` (at the cpu scale also their second look's), and
    the sweeps their jobs take a teacher from: the names `evidence.NAME=DIR` may give a folder for."""
    scales = (scale, "replication") if scale == "cpu" else (scale,)
    names = set()
    if scale == "suites":
        from headlab.reproduce.jobs import suites_name

        return sorted({suites_name(s.evidence.suites, suite) for s in specs if s.evidence.suites is not None and not s.not_measured})
    for spec in specs:
        for at in scales:
            settings = getattr(spec.evidence, at, None)
            if spec.evidence.kind == "sweep" and settings is not None and settings.sweep_name:
                names.add(str(settings.sweep_name))
                if settings.teacher is not None:
                    names.add(str(settings.teacher.sweep_name))
    return sorted(names)


def explicit_evidence(pairs: dict[str, str], known: list[str]) -> dict[str, Path]:
    """The sweep folder given for each sweep name: each must exist, and each name must be one a chosen
    claim reads at this scale (any other would be ignored without a word, and the report read elsewhere)."""
    for name, folder in pairs.items():
        if name not in known:
            raise ConfigError(f"evidence.{name}", folder, f"a sweep name the chosen claims read at this scale: "
                              f"{', '.join(known) or 'none (no chosen claim reads a sweep)'}")
        if not folder or not Path(folder).is_dir():
            raise ConfigError(f"evidence.{name}", folder,
                              "an existing sweep (or aggregate) folder (evidence.SWEEP_NAME=DIR)")
    return {name: Path(folder) for name, folder in pairs.items()}


def plan_summary(plan: Plan) -> str:
    """The last line of a job list: how much it runs, and which claims need no training or have no evidence yet."""
    computed = [s.claim for s in plan.specs if s.evidence.kind == "computed"]
    pending = [s.claim for s in plan.specs if s.not_measured]
    if plan.runner is not None and plan.runner.scale == "suites":
        without = [s.claim for s in plan.specs if s.evidence.suites is None or s.not_measured]
        return (f"# {len(plan.runs)} suites measured by headlab-analyze-hf; claims without a suites block "
                f"(not measured at this scale): {', '.join(without) or '-'}")
    line = (f"# {len(plan.sweeps)} sweeps, {len(plan.runs)} runs; computed without training: {', '.join(computed) or '-'}; "
            f"no evidence yet (not measured): {', '.join(pending) or '-'}")
    if plan.runner is not None and plan.runner.scale == "cpu":
        from headlab.reproduce.estimate import estimate_line
        from headlab.reproduce.jobs import sweep_jobs
        from headlab.reproduce.looks import deferred_second_look

        quick = sweep_jobs(plan.specs, "quick", left_out_sweeps(plan.left_out, "quick"))
        line += "\n" + estimate_line(quick, plan.sweeps, plan.runs, "cpu", plan.runner.lanes,
                                     deferred_second_look(plan.specs, plan.sweeps_root))
    return line


def write_times(runner, out: Path) -> Path:
    """jobs_time.csv: what each step of run=true did and how long it took (the per-claim cost of a scale)."""
    import pandas as pd

    from headlab.store import atomic_write_csv

    path = out / "jobs_time.csv"
    atomic_write_csv(path, pd.DataFrame([asdict(r) for r in runner.results]))
    return path
