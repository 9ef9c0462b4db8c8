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
from headlab.reproduce.spec import ClaimSpec
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
                   scale: str = "quick") -> ClaimResult:
    """The verdict of one claim from the evidence of `scale` on disk (or computed), with the scale
    it was reached at (`headlab.reproduce.scale`) and its freeze (`headlab.reproduce.freeze.stamp`:
    a rule newer than its first job is not decisive); never raises for missing evidence."""
    from headlab.reproduce.freeze import stamp
    from headlab.reproduce.scale import evidence_scale

    result, folder, freeze_file = _evaluated(spec, sweeps_root, explicit, scale)
    if result.verdict != NOT_MEASURED:
        result.scale = evidence_scale(spec, folder)
    return stamp(result, scale, folder, freeze_file)


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
