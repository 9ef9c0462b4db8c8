"""Where a claim's evidence lives and how it is read: a sweep's aggregate table, or a computation.

A sweep's evidence is `<sweeps root>/<sweep_name>/<newest stamp>/aggregate/<table>` (the folder
`make sweep` writes and `headlab-aggregate` fills), or a folder given explicitly per sweep name; a
run's evidence is `<log dir>/runs/reproduce/<run_name>/<table>` (the job list sets `run_dir=`).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Mapping

import pandas as pd

from headlab.reproduce.directions import FIGURES, MEASUREMENTS
from headlab.reproduce.spec import SUITES, ClaimSpec
from headlab.reproduce.statistics import EvidenceMissing, Statistic, from_values, table_statistic
from headlab.reproduce.provenance import unmet_settings
from headlab.reproduce.verdict import NOT_MEASURED, NOT_TESTABLE, ClaimResult, decide, not_measured
from headlab.store import AGGREGATE_DIR

def find_aggregate(sweep_name: str, sweeps_root: Path, explicit: Mapping[str, Path]) -> Path:
    """The aggregate folder of `sweep_name`: the explicit one, else the most recently aggregated of
    its folders (a dated `make sweep` stamp or the runner's `reproduce`)."""
    if sweep_name in explicit:
        folder = Path(explicit[sweep_name])
        return folder if folder.name == AGGREGATE_DIR else folder / AGGREGATE_DIR
    stamps = sorted((p for p in (sweeps_root / sweep_name).glob("*") if (p / AGGREGATE_DIR).is_dir()),
                    key=lambda p: ((p / AGGREGATE_DIR).stat().st_mtime, p.name))
    if not stamps:
        raise EvidenceMissing(f"no aggregated sweep {sweep_name!r} under {sweeps_root} (run its jobs, then headlab-aggregate)")
    return stamps[-1] / AGGREGATE_DIR


def checked_aggregate(spec: ClaimSpec, scale: str, sweeps_root: Path, explicit: Mapping[str, Path]) -> tuple[Path, str]:
    """The newest aggregate of the spec's sweep at `scale` whose jobs' saved configs match the spec's
    grid (`headlab.reproduce.provenance`), and a line naming the folder, its commit and every newer
    folder refused with the reason; EvidenceMissing when none matches."""
    from headlab.reproduce.provenance import check_sweep, expected_grid

    name = spec.sweep_name(scale)
    grid = expected_grid(spec.evidence.sweep, spec.overrides(scale))
    if name in explicit:
        candidates = [find_aggregate(name, sweeps_root, explicit)]
    else:
        candidates = sorted((p / AGGREGATE_DIR for p in (sweeps_root / name).glob("*") if (p / AGGREGATE_DIR).is_dir()),
                            key=lambda a: (a.stat().st_mtime, a.parent.name), reverse=True)
        if not candidates:
            raise EvidenceMissing(f"no aggregated sweep {name!r} under {sweeps_root} (run its jobs, then headlab-aggregate)")
    refused = []
    for aggregate in candidates:
        check = check_sweep(aggregate.parent, grid)
        if check.ok:
            line = f"read {aggregate.parent} ({check.jobs} jobs, commit {check.commit}; grid checked against the spec)"
            if refused:
                line += "; refused: " + "; ".join(refused)
            return aggregate, line
        refused.append(f"{aggregate.parent}: {'; '.join(check.problems)}")
    raise EvidenceMissing("refused as evidence, another experiment under the same name: " + "; ".join(refused))


def sweep_coverage(aggregate: Path) -> str:
    """"k of n jobs usable" from the sweep's `sweep_runs.csv` (it lists every expected job, started
    or not); "" when the table is not there.

    >>> sweep_coverage(Path("/nonexistent"))
    ''
    """
    try:
        runs = pd.read_csv(aggregate / "sweep_runs.csv", usecols=["usable"])
    except (OSError, ValueError):
        return ""
    return f"{int(runs['usable'].astype(str).eq('True').sum())} of {len(runs)} jobs usable"


def run_root(sweeps_root: str | os.PathLike) -> Path:
    """`<log dir>/runs/reproduce`: where the job list puts the run directories of `run` evidence."""
    return Path(sweeps_root).parent / "runs" / "reproduce"


def read_table(path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise EvidenceMissing(f"{path} does not exist")
    return pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)


def _table(path: Path) -> pd.DataFrame:
    """A run's table: a parquet dataset folder (head_metrics.parquet) or a file."""
    if path.is_dir():
        from headlab.store import read_table as read_dataset

        try:
            return read_dataset(path)
        except FileNotFoundError as err:
            raise EvidenceMissing(str(err)) from err
    if not path.exists():
        raise EvidenceMissing(f"{path} does not exist (run the command of the job list first)")
    return read_table(path)


def computed_statistics(spec: ClaimSpec) -> dict[str, Statistic]:
    """Statistics of kind `computed`: one measurement per seed, averaged over seeds."""
    out = {}
    for name, s in spec.statistics.items():
        measure = MEASUREMENTS[s.measurement.name]
        per_seed = [measure(seed, **s.args)[s.field.name] for seed in s.seeds]
        out[name] = from_values(per_seed, f"{s.field.name} of {s.measurement.name} per seed", seeds=tuple(s.seeds))
    return out


def computed_figure(spec: ClaimSpec) -> str:
    """A computed claim's figure, drawn into a temporary folder (the report copies it beside itself)."""
    name = spec.evidence.figure
    if not name:
        return ""
    import tempfile

    return str(FIGURES[name](Path(tempfile.mkdtemp(prefix="headlab-reproduce-")) / name))


def evaluate_claim(spec: ClaimSpec, sweeps_root: str | os.PathLike, explicit: Mapping[str, Path] | None = None,
                   scale: str = "quick", suite: str | None = None) -> ClaimResult:
    """The verdict of one claim from the evidence of `scale` on disk (or computed), with the scale
    it was reached at (`headlab.reproduce.scale`) and its freeze (`headlab.reproduce.freeze.stamp`:
    a rule newer than its first job is not decisive); never raises for missing evidence. At the
    suites scale `suite` (a name or folder) replaces the suite the spec names."""
    from headlab.reproduce.freeze import stamp
    from headlab.reproduce.scale import evidence_scale, suite_scale

    if scale == SUITES:
        result, folder, freeze_file = _suite_evaluated(spec, sweeps_root, explicit, suite)
        if result.verdict != NOT_MEASURED and folder is not None:
            result.scale = suite_scale(folder, spec.evidence.suites.step if spec.evidence.kind == "computed" else None)
        return stamp(result, scale, folder, freeze_file)
    result, folder, freeze_file = _evaluated(spec, sweeps_root, explicit, scale)
    if result.verdict != NOT_MEASURED:
        result.scale = evidence_scale(spec, folder)
    return stamp(result, scale, folder, freeze_file)


# ---- the suites scale ---------------------------------------------------------------------------

def suite_folder(spec: ClaimSpec, sweeps_root: str | os.PathLike, explicit: Mapping[str, Path] | None = None,
                 suite: str | None = None) -> Path:
    """Where the runner measures the spec's suite (or `suite`, use_suite=): `<sweeps root>/<name>/reproduce`
    (`headlab.reproduce.jobs.suites_name`), or the folder given with `evidence.NAME=DIR` (the suite
    folder itself, or its aggregate/)."""
    from headlab.reproduce.jobs import suites_name

    name = suites_name(spec.evidence.suites, suite)
    if explicit and name in explicit:
        folder = Path(explicit[name])
        return folder.parent if folder.name == AGGREGATE_DIR else folder
    return Path(sweeps_root) / name / "reproduce"


def suite_statistics(spec: ClaimSpec) -> dict:
    """The spec's statistics with the `not_swept` selection keys dropped: a suite is one training run
    per seed, so a selection of one training setting (the LM sweep's optim, optim.lr) has nothing to
    choose among; every other key, the reductions and the rule are the spec's own."""
    from dataclasses import replace

    dropped = set(spec.evidence.suites.not_swept)
    keep = lambda sel: None if sel is None else {k: v for k, v in sel.items() if k not in dropped}  # noqa: E731
    return {name: replace(s, where=keep(s.where), a=keep(s.a), b=keep(s.b)) for name, s in spec.statistics.items()}


def _suite_evaluated(spec: ClaimSpec, sweeps_root: str | os.PathLike, explicit: Mapping[str, Path] | None,
                     suite: str | None) -> tuple[ClaimResult, Path | None, Path | None]:
    """The verdict from the spec's suite: the aggregate table (or each seed's per-step table) of the
    sweep-shaped folder headlab-analyze-hf wrote, or (computed) the checkpoints' weights at a step."""
    from dataclasses import replace

    from headlab.reproduce.freeze import FREEZE_FILE

    at = spec.evidence.suites
    if spec.not_measured:
        return not_measured(spec, spec.not_measured), None, None
    if at is None:
        return not_measured(spec, "the spec has no suites block (evidence.suites): no checkpoint suite tests it yet"), None, None
    try:
        folder = suite_folder(spec, sweeps_root, explicit, suite)
    except Exception as err:  # noqa: BLE001 - a use_suite= that cannot be read: not measured, with why
        return not_measured(spec, f"the suite {suite!r} cannot be read ({err})"), None, None
    at_suite = replace(spec, statistics=suite_statistics(spec))
    try:
        provenance = _check_suite(folder, suite or at.suite)
        if spec.evidence.kind == "computed":
            statistics = suite_computed_statistics(at_suite, suite or at.suite, at.step or 0, _cache_dir(at.command))
            result = decide(at_suite, statistics, f"{folder} (checkpoints at step {at.step or 0})")
        else:
            table_name = at.table or spec.evidence.table
            if (folder / AGGREGATE_DIR / table_name).is_file():
                path, table = folder / AGGREGATE_DIR / table_name, read_table(folder / AGGREGATE_DIR / table_name)
            elif table_name.endswith(".parquet") and not (folder / AGGREGATE_DIR / table_name).exists():
                path, table = folder / f"*/{table_name}", suite_step_table(folder, table_name, at.step)
            else:
                raise EvidenceMissing(f"{folder / AGGREGATE_DIR / table_name} does not exist (run headlab-aggregate {folder})")
            result = _decided(at_suite, table, str(path))
            result.figure = _figure(folder / AGGREGATE_DIR, spec)
            result.coverage = sweep_coverage(folder / AGGREGATE_DIR)
        result.spec = spec
        dropped = f"; selection keys dropped (one training run per seed): {', '.join(at.not_swept)}" if at.not_swept else ""
        result.provenance = provenance + dropped
        return result, folder, folder.parent / FREEZE_FILE  # the runner's record lies beside the suite folder
    except EvidenceMissing as missing:
        return not_measured(spec, str(missing)), None, None


def _check_suite(folder: Path, suite: str) -> str:
    """The folder holds a measurement of `suite` (its multirun.yaml names it): a line saying what was read."""
    import yaml

    from headlab.hf.suite import load_suite

    try:
        name = load_suite(suite).name
    except Exception as err:  # noqa: BLE001 - a ConfigError naming the suite: the claim is not measured, with why
        raise EvidenceMissing(f"the suite {suite!r} cannot be read ({err})") from None
    marker = folder / "multirun.yaml"
    if not marker.is_file():
        raise EvidenceMissing(f"no measured suite in {folder} (make reproduce SCALE=suites, or headlab-analyze-hf "
                              f"suite={suite} run_dir={folder})")
    found = (yaml.safe_load(marker.read_text(encoding="utf-8")) or {}).get("suite") or {}
    if found.get("name") != name:
        raise EvidenceMissing(f"refused as evidence: {folder} holds suite {found.get('name')!r}, the claim reads {name!r}")
    jobs = sorted(p.parent.name for p in folder.glob("*/summary.json"))
    return f"read {folder} (suite {name}, {len(jobs)} of {len(found.get('seeds') or [])} seeds, from {found.get('origin')})"


def _cache_dir(command) -> str | None:
    found = [c.split("=", 1)[1] for c in command if c.split("=", 1)[0] == "cache_dir"]
    return found[-1] if found and found[-1] not in ("", "null") else None


def suite_step_table(folder: Path, name: str, step: int | None) -> pd.DataFrame:
    """Each seed's per-step table (e.g. head_metrics.parquet) at `step` (None: that seed's last
    measured step), with `job` and `seed` columns: one model per seed, as a training sweep's jobs."""
    from headlab.store import RunDir

    frames = []
    for job in sorted(p.parent for p in folder.glob("*/summary.json")):
        summary = RunDir(job).summary
        rows = _table(job / name)
        wanted = step if step is not None else rows["step"].max()
        rows = rows[rows["step"] == wanted]
        if rows.empty:
            continue
        frames.append(rows.assign(job=job.name, seed=int((summary.get("swept") or {}).get("seed", job.name))))
    if not frames:
        raise EvidenceMissing(f"no seed of {folder} has {name} rows at step {step if step is not None else '(last)'}")
    return pd.concat(frames, ignore_index=True)


def suite_computed_statistics(spec: ClaimSpec, suite: str, step: int, cache_dir: str | None) -> dict[str, Statistic]:
    """Statistics of kind `computed` at the suites scale: `initialised_queries` measured on each seed's
    checkpoint at `step` (every layer's W_Q, the measurement's own random inputs, seed = the suite's
    seed), one value per suite seed; a measurement that needs no model (`random_vectors`) as computed."""
    from headlab.reproduce.directions import cosine_summary, query_cosines

    cosines = None
    out = {}
    for name, s in spec.statistics.items():
        if s.measurement.name != "initialised_queries":
            measure = MEASUREMENTS[s.measurement.name]
            out[name] = from_values([measure(seed, **s.args)[s.field.name] for seed in s.seeds],
                                    f"{s.field.name} of {s.measurement.name} per seed", seeds=tuple(s.seeds))
            continue
        if cosines is None:
            cosines = checkpoint_query_cosines(suite, step, cache_dir, int(s.args.get("n_inputs", 256)))
        per_seed = {seed: cosine_summary(c)[s.field.name] for seed, c in cosines.items()}
        out[name] = from_values(list(per_seed.values()), f"{s.field.name} of the queries of each seed's step-{step} "
                                f"checkpoint (all layers)", seeds=tuple(per_seed))
    return out


def checkpoint_query_cosines(suite: str, step: int, cache_dir: str | None, n_inputs: int = 256) -> dict:
    """seed -> the query cosines of every head pair of every layer of that seed's checkpoint at `step`
    (`headlab.reproduce.directions.query_cosines`); EvidenceMissing when the suite has no such step or
    a hub checkpoint is not in the local cache (nothing downloads here)."""
    import torch

    from headlab.hf import HFModel, load_model
    from headlab.hf.suite import cached_folder, load_suite
    from headlab.reproduce.directions import query_cosines

    loaded = load_suite(suite)
    points = [c for c in loaded.checkpoints if c.step == step]
    if not points:
        raise EvidenceMissing(f"suite {loaded.name} has no checkpoint at step {step}")
    out = {}
    for c in sorted(points, key=lambda c: c.seed):
        folder = Path(c.path) if c.path is not None else cached_folder(c, cache_dir, download=False)
        if folder is None:
            raise EvidenceMissing(f"{c.label} is not in the local Hugging Face cache (make reproduce SCALE=suites downloads it)")
        model, _, family = load_model(folder, "suite", c.label)
        net = HFModel(model, c.label, family)
        out[c.seed] = torch.cat([query_cosines(b.attn.head_weights().W_Q, c.seed, n_inputs) for b in net.blocks])
        del net, model
    return out


def _evaluated(spec: ClaimSpec, sweeps_root: str | os.PathLike, explicit: Mapping[str, Path] | None,
               scale: str) -> tuple[ClaimResult, Path | None, Path | None]:
    """The verdict, the folder its jobs lie in and the runner's freeze record of it (None when no jobs)."""
    from headlab.reproduce.freeze import FREEZE_FILE, run_freeze_file

    if spec.not_measured:
        return not_measured(spec, spec.not_measured), None, None
    try:
        if spec.evidence.kind == "computed":
            result = decide(spec, computed_statistics(spec), "computed")
            result.figure = computed_figure(spec)
            return result, None, None
        if spec.evidence.kind == "run":
            run_dir = run_root(sweeps_root) / spec.run_name(scale)
            path = run_dir / spec.evidence.table
            result = _decided(spec, _table(path), str(path))
            result.figure = _figure(run_dir, spec)
            return result, run_dir, run_freeze_file(run_dir)
        if getattr(spec.evidence, scale) is None:
            return not_measured(spec, f"the spec has no {scale} scale"), None, None
        aggregate, provenance = checked_aggregate(spec, scale, Path(sweeps_root), explicit or {})
        folder = aggregate.parent
        path = aggregate / spec.evidence.table
        unmet = unmet_settings(aggregate.parent, spec.prerequisite_config) if spec.prerequisite_config else []
        if unmet:
            result = ClaimResult(spec, NOT_TESTABLE, f"the jobs lack the settings the phenomenon needs: {'; '.join(unmet)}: "
                                                     f"{spec.prerequisite_reason}", source=str(path), provenance=provenance)
            result.coverage = sweep_coverage(aggregate)
            return result, folder, folder / FREEZE_FILE
        result = _decided(spec, read_table(path), str(path))
        result.figure = _figure(aggregate, spec)
        result.coverage = sweep_coverage(aggregate)
        result.provenance = provenance
        return result, folder, folder / FREEZE_FILE
    except EvidenceMissing as missing:
        return not_measured(spec, str(missing)), None, None


def _decided(spec: ClaimSpec, table: pd.DataFrame, source: str) -> ClaimResult:
    """`decide` on the spec's statistics of `table`. A secondary statistic the table cannot give is
    shown as missing (with why) and the claim is still decided on its primary; a missing statistic
    the prerequisite reads makes the claim not testable (the phenomenon cannot be read), with why.
    Only a missing primary that no prerequisite reads leaves the claim not measured."""
    found, missing = {}, {}
    for name, s in spec.statistics.items():
        try:
            found[name] = table_statistic(s, table)
        except EvidenceMissing as err:
            missing[name] = str(err)
    prerequisite_reads = {n.split(".")[0] for n in spec.prerequisite.names} if spec.prerequisite is not None else set()
    if missing and (spec.primary is None or (spec.primary in missing and spec.primary not in prerequisite_reads)):
        raise EvidenceMissing(missing.get(spec.primary) or next(iter(missing.values())))
    for name, why in missing.items():
        found[name] = Statistic(math.nan, math.nan, math.nan, 0, f"missing: {why}", "no value")
    result = decide(spec, found, source)
    if result.verdict == NOT_TESTABLE and missing.keys() & prerequisite_reads:
        result.reason += " (" + "; ".join(f"{n}: {missing[n]}" for n in sorted(missing.keys() & prerequisite_reads)) + ")"
    return result


def _figure(folder: Path, spec: ClaimSpec) -> str:
    """The spec's figure in `folder/figures/` (an aggregate's or a run's), "" when it has none or it is missing."""
    name = spec.evidence.figure
    figure = folder / "figures" / str(name)
    return str(figure) if name and figure.is_file() else ""
