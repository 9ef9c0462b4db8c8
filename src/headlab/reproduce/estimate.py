"""How long a scale's plan takes on this machine, from measured step times.

A step the cpu scale has run takes the time it took (`CPU_SECONDS`: the confirmatory runs of
2026-12-02 and 2026-12-04, 2 CPU cores, two lanes, docs/results/2026-12-02-second-look.md and
docs/results/2026-12-04-two-hour-ledger.md).
Any other step is the quick step of the same claims
(docs/results/2026-11-30-reproduce-quick.md: commit 753d192), scaled by its number of jobs (the
sweep file's grid with the axes its overrides set replaced by theirs) and by its sequence length where it changes (data.max_len 64 -> 128:
x2, since every layer's work grows at least linearly with the tokens), then packed onto the lanes
the way the runner does (teachers' sweeps first, then their students, a look-2
sweep after its claims' look-1 sweeps). Both runs had one thread per lane on 2 cores: with more cores, more lanes shorten the total but a
step is no faster, so the estimate is the 2-core one with `lanes` lanes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

import yaml

from headlab.reproduce.jobs import lane_order

# seconds per step of `make reproduce-quick` on 2 cores, two lanes (the results page's time table)
QUICK_SECONDS = {"heads-synthetic": 187, "lr-synthetic": 284, "knockout-synthetic": 327, "heads-zh_reviews": 878,
                 "templates-synthetic": 152, "posenc-synthetic": 138, "domains-multidomain": 158,
                 "init_scale-synthetic": 145, "data_size-synthetic": 88, "c17-minilm-en_news": 27,
                 "distill-zh_reviews": 174,
                 # the exploratory lm_roles sweep of 2026-12-03 (8 jobs, seeds 0-1): its jobs' CPU seconds, one thread each
                 "lm-roles": 367,
                 # C2's lm-types sweep: one cell of lm_roles' grid, the same 3,000-step jobs, so lm-roles' 46 s a
                 # job; its own exploratory 2 jobs (2026-12-03) took 87 and 80 s beside other work (load average 4)
                 "lm-types": 92,
                 # C9 v5's lm-init sweep (2 gains x 2 seeds): its exploratory jobs (2026-12-03) took 125 and 127 CPU
                 # seconds per pair, one thread each, beside other work
                 "lm-init": 252,
                 # C6 v6's lm-posenc sweep (none vs learned positions x 2 seeds): its exploratory jobs (2026-12-03)
                 # took 68-94 s beside two other jobs, so lm-roles' 46 s a job x 4
                 "lm-posenc": 184,
                 # C10 v7's lm-prune sweep (2 seeds, 8 heads): its exploratory jobs (2026-12-04) took 62 and 67 s, and
                 # headlab-prune 21 and 18 s, beside two other jobs' threads
                 "lm-prune": 168,
                 # C18 v7's lm-grad sweep (2 seeds, 8 heads): its exploratory jobs (2026-12-04) took 98 and 86 s
                 # beside three other jobs' threads, and headlab-importance a few seconds each
                 "lm-grad": 190,
                 # C15 v4's heads-synthetic-cls sweep (3 jobs, 8 heads, cls pooling, two at a time): 2026-12-04
                 "heads-synthetic-cls": 128,
                 # C12 v7's lm-data sweep (4,800 vs 96,000 sequences x 2 seeds, 8 heads): its exploratory jobs
                 # (2026-12-04) took 64-76 s each, one thread, beside another job
                 "lm-data": 274,
                 # C2 v4, C8 v6 and C16 v5's lm-heads sweep (2, 4 and 8 heads x 2 seeds): its exploratory
                 # jobs (2026-12-04, seeds 1900-1903, two side by side) took 41, 45 and 62 s plus about 5 s
                 # of start each
                 "lm-heads": 325,
                 # C11's teacher since 2026-12-04 (one 8-head zh job, max_len 64): the quick zh sweep's job
                 "heads-zh_reviews-teacher": 98}
MEASURED = "make reproduce-quick, 2026-11-30, commit 753d192, 2 cores (lm-roles, lm-types, lm-init: 2026-12-03; lm-prune, lm-grad, heads-synthetic-cls, lm-data, lm-heads, heads-zh_reviews-teacher: 2026-12-04)"
# seconds per step of make reproduce-cpu on 2 cores, two lanes, 2026-12-02: each job's summary.json
# wall_s plus its start (about 2 s), and the per-job commands (headlab-importance about 16 s,
# headlab-prune about 70 s); the jobs that ran beside the test suite are counted at the speed of
# the same config's unloaded jobs. A step whose grid differs from the one measured is not here.
CPU_SECONDS = {"templates-synthetic-cpu": 496,
               "domains-multidomain-cpu": 536,
               "data_size-synthetic-cpu": 298, "distill-zh_reviews-cpu": 504,
               "c17-minilm-en_news-cpu": 47, "templates-synthetic-rep": 982, "data_size-synthetic-rep": 1750,
               # 2026-12-03 (docs/results/2026-12-03-lm-roles.md): 939 s and 354 s with two jobs side by side on
               # the 2 cores; a lane runs one job at a time on one core, so twice that
               "lm-roles-cpu": 1878, "lm-roles-rep": 708,
               # C9 v5 (docs/results/2026-12-03-c9-c18.md): the same 3,000-step LM jobs as lm-roles-cpu, 10 of them;
               # its own run shared the 2 cores with other work (load average 9), so lm-roles-cpu's time a job
               "lm-init-cpu": 587,
               # C10 v7 (docs/results/2026-12-04-c8-c10-c18.md): its 16 jobs and prunes in one lane of one thread,
               # beside C8 v5's two threads and C18 v7's lane
               "lm-prune-cpu-v7": 1674,
               # C18 v7 (the same page): its 24 jobs and headlab-importance runs in one lane of one thread, beside
               # C8 v5's two threads and, for its first half, C10 v7's lane
               "lm-grad-cpu-v7": 2306,
               # C15 v4 (docs/results/2026-12-04-c12-c15.md): its 24 synthetic jobs in one lane of one thread, beside
               # C12 v7's lane for their last 5 minutes
               "heads-synthetic-cls-cpu-v4": 849,
               # C12 v7 (the same page): its 24 LM jobs in one lane of one thread, beside C15 v4's lane at first
               "lm-data-cpu-v7": 1496,
               # the clean-clone run of commit 6fabec9, 2026-12-04 (docs/results/2026-12-04-two-hour-ledger.md):
               # each step's lane seconds from the runner's jobs_time.csv, two lanes of one thread on 2 cores
               "heads-zh_reviews-teacher-cpu": 246, "distill-zh_reviews-cpu-v5": 2402, "lm-schedule-cpu": 486,
               "lm-lr-cpu-v6": 1184, "lm-posenc-cpu-v7": 624, "templates-synthetic-cpu-v5": 704, "lm-init-cpu-v7": 562,
               "domains-multidomain-cpu-v5": 930, "lm-data-cpu-v8": 702, "lm8-cpu-v8": 1262}
# Steps not yet run at the cpu scale whose jobs are the measured jobs of a sweep above, timed from them
# (shown as "from measured jobs"); heads-zh_reviews-cpu, C15's sweep up to version 3 (24 zh jobs and 8
# prunes), took 4200 s. C5 v4 is templates-synthetic-cpu's job (496 s / 16) x 32 jobs; C12 v6 trains both
# arms 600 steps, data_size-synthetic-cpu's full-data job (about 33 s) x 24 jobs;
# C8 v4 and C16 v4 run heads-zh_reviews-cpu's grid without prunes on fresh seeds, (4200 s - 8 x 70 s)
# for 24 jobs; C3 v5 is lm-roles-cpu's job (1878 s / 32) x 56 jobs (28 seeds x 2 lrs, constant lr); C11 v4
# is distill-zh_reviews-cpu's student (504 s / 24) x 48 jobs (16 seeds x 3 variants); C11 v5's students read
# max_len 128: its exploratory student (2026-12-03) took 53 s beside two other jobs, x 48 jobs; C7 v4 is
# domains-multidomain-cpu's job (536 s / 16) x 64 jobs (16 seeds x 4 arms); C6 v6 is lm-roles-cpu's job
# (1878 s / 32) x 20 jobs (10 seeds, positions none and learned); C8 v5 is heads-zh_reviews-cpu's job
# ((4200 s - 8 prunes x 70 s) / 24 jobs = 152 s) x 48 jobs (24 seeds x 4 and 8 heads). C12 v6's
# data_size_steps-synthetic-cpu (792 s) left the plan for C12 v7's LM sweep (measured above)
DERIVED_SECONDS = {"templates-synthetic-cpu-v4": 992,
                   "heads-zh_reviews-cpu-v4": 3640,
                   "lm-roles-c3-cpu-v5": 3287,
                   "domains-multidomain-cpu-v4": 2144, "lm-posenc-cpu-v6": 1174,
                   "heads-zh_reviews-cpu-c8v5": 7296,
                   # the plan after the ledger of 2026-12-04: the steps of its clean-clone run (CPU_SECONDS)
                   # per job, times the new grids' jobs. C2's lm-heads-cpu keeps its 12 four-head jobs
                   # (mean wall_s 50.25 s plus 2 s of start in that run); C3 v7, C5 v6 and C9 v8 run more seeds
                   "lm-heads-cpu": 628,                  # 12 x 52.3
                   "lm-lr-cpu-v7": 2368,                 # lm-lr-cpu-v6's 1,184 s / 28 jobs x 56
                   "templates-synthetic-cpu-v6": 1643,   # templates-synthetic-cpu-v5's 704 s / 24 jobs x 56
                   "lm-init-cpu-v8": 1499}               # lm-init-cpu-v7's 562 s / 12 jobs x 32
# heads-synthetic-cpu (C18 up to v5, 860 s), init_scale-synthetic-cpu (C9 up to v4, 480 s) and
# posenc-synthetic-cpu-v5 (C6 v5, 762 s) left the plan: C18 v7, C10 v7, C9 v5 and C6 v6 run the LM
CPU_MEASURED = "make reproduce-cpu, 2026-12-02 and 2026-12-04, 2 cores"


@dataclass(frozen=True)
class StepEstimate:
    name: str
    seconds: float
    how: str


def _jobs(overrides, grid: dict[str, int] | None = None) -> int:
    """The multirun's job count: the sweep file's axes (`grid`: axis -> number of values), each
    replaced by the overrides' comma list where they give one, times the overrides' other lists.

    >>> _jobs(["seed=10,11,12", "model.n_heads=4,8", "data.max_len=128"])
    6
    >>> _jobs(["seed=1,2,3,4", "optim=adamw_constant"], {"optim": 2, "optim.lr": 2, "seed": 2})
    8
    """
    counts = dict(grid or {})
    for o in overrides:
        if "=" in o and not o.startswith(("+", "~")):
            key, value = o.split("=", 1)
            counts[key] = len(value.split(","))
    count = 1
    for n in counts.values():
        count *= n
    return count


def sweep_grid(sweep: str) -> dict[str, int]:
    """Axis -> number of values of conf/sweep/<sweep>.yaml's `hydra.sweeper.params` (plain YAML,
    read as data); {} when the file or its grid is missing."""
    path = Path(find_spec("headlab.conf").submodule_search_locations[0]) / "sweep" / f"{sweep}.yaml"  # not imported: it registers schemas
    if not path.is_file():
        return {}
    params = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("hydra", {}).get("sweeper", {}).get("params") or {}
    return {str(k): len(str(v).split(",")) for k, v in params.items()}


def _max_len(overrides) -> float | None:
    for o in overrides:
        found = re.fullmatch(r"data\.max_len=(\d+)", o)
        if found:
            return float(found.group(1))
    return None


def step_estimates(quick_sweeps, sweeps, runs, scale: str) -> list[StepEstimate]:
    """Seconds per step of the plan at `scale`, from its quick counterpart: the quick sweep of the
    same claims (a sweep renamed with its rule version still has one)."""
    twin_of = {claim: j for j in quick_sweeps for claim in j.claims}
    out = []
    for job in sweeps:
        if scale == "cpu" and job.sweep_name in CPU_SECONDS:
            out.append(StepEstimate(job.sweep_name, float(CPU_SECONDS[job.sweep_name]), "measured"))
            continue
        if scale == "cpu" and job.sweep_name in DERIVED_SECONDS:
            out.append(StepEstimate(job.sweep_name, float(DERIVED_SECONDS[job.sweep_name]), "from measured jobs"))
            continue
        twin = next((twin_of[c] for c in job.claims if c in twin_of), None)
        if twin is None or twin.sweep_name not in QUICK_SECONDS:
            out.append(StepEstimate(job.sweep_name, float("nan"), "no measured quick step"))
            continue
        base = twin.sweep_name
        grid = sweep_grid(job.sweep)
        jobs = _jobs(job.overrides, grid) / _jobs(twin.overrides, sweep_grid(twin.sweep))
        before, after = _max_len(twin.overrides), _max_len(job.overrides)
        length = after / before if before and after else 1.0
        out.append(StepEstimate(job.sweep_name, QUICK_SECONDS[base] * jobs * length,
                                f"{QUICK_SECONDS[base]} s x {jobs:.3g} (jobs)" + (f" x {length:g} (max_len)" if length != 1 else "")))
    for job in runs:
        if scale == "cpu" and job.run_name in CPU_SECONDS:
            out.append(StepEstimate(job.run_name, float(CPU_SECONDS[job.run_name]), "measured"))
            continue
        base = job.run_name.removesuffix(f"-{scale}")
        out.append(StepEstimate(job.run_name, float(QUICK_SECONDS.get(base, float("nan"))), "one run, as measured"))
    return out


def wall_seconds(steps: list[StepEstimate], sweeps, lanes: int, after: dict[str, tuple[str, ...]] | None = None) -> float:
    """The plan's wall time with `lanes` lanes, each taking the first ready step when it frees (the
    runner's order: teachers' sweeps first, then their students, then the rest, then the runs, then the deferred steps
    of `after`; a student waits for its teacher's sweep, a deferred step for the sweeps it names).

    >>> from types import SimpleNamespace as J
    >>> sweeps = [J(sweep_name="a", teacher=None), J(sweep_name="b", teacher=("a", ())), J(sweep_name="c", teacher=None)]
    >>> wall_seconds([StepEstimate("a", 100, ""), StepEstimate("b", 50, ""), StepEstimate("c", 30, "")], sweeps, 2)
    150.0
    >>> steps = [StepEstimate("a", 100, ""), StepEstimate("c", 30, ""), StepEstimate("d", 40, "")]
    >>> wall_seconds(steps, sweeps[::2], 2, after={"d": ("c",)})   # d starts when c ends, beside a
    100.0
    """
    seconds = {st.name: st.seconds for st in steps}
    waits = {j.sweep_name: (j.teacher[0],) for j in sweeps if j.teacher}
    waits.update(after or {})
    order = [j.sweep_name for j in sweeps]
    queue = [j.sweep_name for j in lane_order(sweeps)]
    queue += [st.name for st in steps if st.name not in order and st.name not in (after or {})]
    queue += [name for name in (after or {}) if name in seconds]
    free = [0.0] * max(1, lanes)
    done: dict[str, float] = {}

    def ends(name: str) -> float:  # when everything `name` waits for has finished (inf: not yet known)
        return max((done.get(w, float("inf")) for w in waits.get(name, ()) if w in seconds), default=0.0)

    while queue:
        lane = min(range(len(free)), key=free.__getitem__)
        now = free[lane]
        ready = [n for n in queue if ends(n) <= now]
        name = ready[0] if ready else min(queue, key=ends)  # nothing ready: wait for the first to become so
        begin = max(now, ends(name))
        queue.remove(name)
        done[name] = begin + seconds[name]
        free[lane] = done[name]
    return float(max(free))


def estimate_line(quick_sweeps, sweeps, runs, scale: str, lanes: int, deferred=()) -> str:
    """The job list's estimate line: total wall time and the longest steps. `deferred` are the
    runner's look-2 items (`headlab.reproduce.runner.Deferred`), counted as if all of them ran."""
    steps = step_estimates(quick_sweeps, [*sweeps, *(d.job for d in deferred)], runs, scale)
    total = wall_seconds(steps, sweeps, lanes, after={d.job.sweep_name: d.after for d in deferred})
    longest = sorted(steps, key=lambda s: -s.seconds)[:3]
    sources = sorted({CPU_MEASURED if s.how in ("measured", "from measured jobs") else MEASURED for s in steps if s.seconds == s.seconds})
    return (f"# estimated wall time on 2 cores with {lanes} lanes{', look 2 included' if deferred else ''}: "
            f"{total / 60:.0f} min ({total:.0f} s; from {' and '.join(sources)}); "
            f"longest steps: " + ", ".join(f"{s.name} {s.seconds / 60:.0f} min ({s.how})" for s in longest))
