"""Statistics a claim's verdict reads, computed from a sweep's aggregate tables (pure: frames in).

Every statistic is a mean with a 95 % t-interval over independent units (`headlab.sweep.stats.mean_ci`):

- ``mean``: the per-run values (or table rows) selected by ``where``;
- ``paired_difference``: per seed, the value of config ``a`` minus that of config ``b`` (the sweeps
  run the same seeds in every config, with the same data split, so seeds pair);
- ``group_difference``: the rows (heads) selected by ``a`` minus those selected by ``b``, with
  Welch's t-interval (one model measured once, e.g. deep minus shallow layers of MiniLM).

A selection value may be a list: the row matches any of its values (``layer: [3, 4, 5]``).

A per-run value is a column of ``sweep_runs.csv`` (usable runs only), or a reduction (``reduce``)
of the rows a run has in a per-head / per-layer table (``sweep_heads.csv``,
``sweep_layer_pairs.parquet``): ``mean``, ``median``, ``nan_fraction`` (heads that never settled),
``fraction_in`` (share of rows whose ``column`` is in ``values``), ``distinct_per_layer`` (number of
different values of ``column`` in a layer, averaged over layers), ``last_step_mean`` (mean of
``column`` over the rows of the run's last ``step``). ``exclude`` drops rows first
(``{final_role: [mixed, broad]}``); ``metric`` keeps the rows of one ``metric`` (long tables).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import pandas as pd
from scipy import stats

from headlab.config.claim_spec import Reduction, StatisticConfig, StatisticKind
from headlab.stats import mean_ci


class EvidenceMissing(Exception):
    """The tables hold no value for this statistic: the claim is "not measured" for this reason."""


@dataclass(frozen=True)
class Statistic:
    """`mean` with its 95 % interval over `n` units; `unit` says what was averaged."""

    mean: float
    ci_low: float
    ci_high: float
    n: int
    unit: str

    def values(self, name: str) -> dict[str, float]:
        return {f"{name}.mean": self.mean, f"{name}.ci_low": self.ci_low, f"{name}.ci_high": self.ci_high,
                f"{name}.n": float(self.n)}


def from_values(values, unit: str, bounds: tuple[float, float] = (-math.inf, math.inf)) -> Statistic:
    ci = mean_ci(values, bounds=bounds)
    if ci.n == 0:
        raise EvidenceMissing(f"no finite {unit}")
    return Statistic(ci.mean, ci.low, ci.high, ci.n, unit)


def table_statistic(spec: StatisticConfig, table: pd.DataFrame) -> Statistic:
    """The statistic `spec` (a kind other than computed) on `table` (one aggregate table)."""
    bounds = tuple(spec.bounds) if spec.bounds is not None else (-math.inf, math.inf)
    if spec.kind is StatisticKind.mean:
        per_unit = unit_values(spec, select(table, spec.where))
        return from_values(per_unit.to_numpy(float), _unit(spec), bounds)
    if spec.kind is StatisticKind.group_difference:
        a, b = (unit_values(spec, select(table, g)).to_numpy(float) for g in (spec.a, spec.b))
        return welch_difference(a, b, f"{_unit(spec)}: {_label(spec.a)} minus {_label(spec.b)}")
    a = unit_values(spec, select(table, spec.a)).groupby(level="seed").mean()
    b = unit_values(spec, select(table, spec.b)).groupby(level="seed").mean()
    common = a.index.intersection(b.index)
    if len(common) == 0:
        raise EvidenceMissing(f"no seed has both {_label(spec.a)} (seeds {list(a.index)}) and {_label(spec.b)} "
                              f"(seeds {list(b.index)})")
    return from_values((a[common] - b[common]).to_numpy(float), f"seed pairs of {_unit(spec)}", bounds)


def welch_difference(a: np.ndarray, b: np.ndarray, unit: str, confidence: float = 0.95) -> Statistic:
    """mean(a) - mean(b) with Welch's t-interval (unequal variances; NaN interval below 2 values a side).

    >>> s = welch_difference(np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0]), "x")
    >>> round(s.mean, 3), round(s.ci_low, 3), round(s.ci_high, 3), s.n
    (1.5, -0.988, 3.988, 5)
    """
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if a.size == 0 or b.size == 0:
        raise EvidenceMissing(f"no finite {unit} on one side")
    diff = float(a.mean() - b.mean())
    if a.size < 2 or b.size < 2:
        return Statistic(diff, math.nan, math.nan, int(a.size + b.size), unit)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    se = math.sqrt(va + vb)
    if se == 0:
        return Statistic(diff, diff, diff, int(a.size + b.size), unit)
    df = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1))
    half = float(stats.t.ppf(0.5 + confidence / 2, df)) * se
    return Statistic(diff, diff - half, diff + half, int(a.size + b.size), unit)


def select(table: pd.DataFrame, where: Mapping[str, Any]) -> pd.DataFrame:
    """Rows whose columns equal `where`'s values (4 matches 4, 4.0 and "4"); usable runs only."""
    rows = table[table["usable"].astype(str) == "True"] if "usable" in table.columns else table
    for column, wanted in where.items():
        if column not in rows.columns:
            raise EvidenceMissing(f"the table has no column {column!r} (was this factor swept?)")
        allowed = wanted if isinstance(wanted, (list, tuple)) else [wanted]
        rows = rows[rows[column].map(lambda v: any(same_value(v, w) for w in allowed))]
    if rows.empty:
        raise EvidenceMissing(f"no usable rows with {_label(where)}")
    return rows


def unit_values(spec: StatisticConfig, rows: pd.DataFrame) -> pd.Series:
    """One value per unit, indexed by (`job`, `seed`) when the table has them (else by row)."""
    column = spec.column
    if spec.metric is not None:
        rows = rows[rows["metric"] == spec.metric]
    for key, dropped in spec.exclude.items():
        rows = rows[~rows[key].isin(list(dropped))]
    if column not in rows.columns:
        raise EvidenceMissing(f"the table has no column {column!r}")
    if rows.empty:
        raise EvidenceMissing(f"no rows left for {column!r} after the filters")
    reduce = spec.reduce
    if reduce is None:
        keys = [k for k in ("job", "seed") if k in rows.columns]
        index = pd.MultiIndex.from_frame(rows[keys]) if keys else rows.index
        return pd.Series(pd.to_numeric(rows[column], errors="coerce").to_numpy(float), index=index)
    return rows.groupby(["job", "seed"]).apply(lambda run: _reduce(run, column, reduce, spec.values))


def _reduce(run: pd.DataFrame, column: str, how: Reduction, values) -> float:
    x = run[column]
    if how is Reduction.fraction_in:
        return float(x.isin(list(values)).mean())
    if how is Reduction.distinct_per_layer:
        return float(run.groupby("layer")[column].nunique().mean())
    if how is Reduction.last_step_mean:
        return float(pd.to_numeric(x[run["step"] == run["step"].max()], errors="coerce").mean())
    numbers = pd.to_numeric(x, errors="coerce")
    if how is Reduction.nan_fraction:
        return float(numbers.isna().mean())
    finite = numbers.dropna()
    if finite.empty:
        return math.nan
    return float(finite.median() if how is Reduction.median else finite.mean())


def same_value(value: Any, wanted: Any) -> bool:
    """A spec's `where` value against a table's or a config's: numbers by value (4 matches 4.0 and
    "4"), anything else as text."""
    try:
        return bool(np.isclose(float(value), float(wanted)))
    except (TypeError, ValueError):
        return str(value) == str(wanted)


def _label(where: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in where.items()) or "all rows"


def _unit(spec: StatisticConfig) -> str:
    how = spec.reduce
    return f"{spec.column}" + (f" ({how.name} per run)" if how else "")
