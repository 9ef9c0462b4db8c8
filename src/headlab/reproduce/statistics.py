"""Statistics a claim's verdict reads, computed from a sweep's aggregate tables (pure: frames in).

Every statistic is an estimate with a 95 % interval that says what it resampled (`method`):

- ``mean``: the per-run values (or table rows) selected by ``where``, Student's t over them; a
  share of heads (``reduce: fraction_in``) is one share per run, t over the runs: the seeds (models)
  are the units, never the heads pooled across seeds (heads of one model are not independent, and
  the p-value is a t over seeds, so the interval is too);
- ``paired_difference``: per seed, the value of config ``a`` minus that of config ``b`` (the sweeps
  run the same seeds in every config, with the same data split, so seeds pair), a paired t-interval;
  when every pair gives the same difference there is no t-interval (and no verdict);
- ``group_difference``: the rows (heads) selected by ``a`` minus those selected by ``b``, with
  Welch's t-interval (one model measured once, e.g. deep minus shallow layers of MiniLM).

No interval has zero width: where the units show no spread the interval is NaN (undecided) or an
exact bound, never [x, x].

A selection value may be a list: the row matches any of its values (``layer: [3, 4, 5]``).

A per-run value is a column of ``sweep_runs.csv`` (usable runs only), or a reduction (``reduce``)
of the rows a run has in a per-head / per-layer table (``sweep_heads.csv``,
``sweep_layer_pairs.parquet``): ``mean``, ``median``, ``nan_fraction`` (heads that never settled),
``settle_median`` (median of a step column, a head that never settled counted at the run's
``final_step``, so heads still moving do not pull the median early), ``fraction_in`` (share of rows whose ``column`` is in ``values``), ``distinct_per_layer`` (number of
different values of ``column`` in a layer, averaged over layers; with ``types``, of types, so a layer
with no head of any type has 0), ``last_step_mean`` (mean of
``column`` over the rows of the run's last ``step``), ``last_step_max`` / ``first_step_max`` (the
largest ``column`` at the run's last / first ``step``: the top head trained and the top head at
initialisation, its own baseline). ``exclude`` drops rows first
(``{final_role: [mixed, broad]}``); ``metric`` keeps the rows of one ``metric`` (long tables).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import pandas as pd
from scipy import stats

from headlab.reproduce.spec_schema import Reduction, StatisticConfig, StatisticKind
from headlab.stats import paired_ci
from headlab.stats.intervals import values_of


class EvidenceMissing(Exception):
    """The tables hold no value for this statistic: the claim is "not measured" for this reason."""


@dataclass(frozen=True)
class Statistic:
    """`mean` with its 95 % interval over `n` units; `unit` says what was averaged, `method` how the
    interval was made; `se` / `df` (t-intervals) give the tests against a margin, `sd` the per-unit
    spread the power section reads, `seeds` the seeds it rests on."""

    mean: float
    ci_low: float
    ci_high: float
    n: int
    unit: str
    method: str = "t over independent units"
    se: float = math.nan
    df: float = math.nan
    sd: float = math.nan
    seeds: tuple[int, ...] = ()

    def values(self, name: str) -> dict[str, float]:
        return {f"{name}.mean": self.mean, f"{name}.ci_low": self.ci_low, f"{name}.ci_high": self.ci_high,
                f"{name}.n": float(self.n)}


def from_values(values, unit: str, bounds: tuple[float, float] = (-math.inf, math.inf),
                seeds: tuple[int, ...] = (), paired: bool = False) -> Statistic:
    """Student's t over the finite `values` (NaN interval, not zero width, when they do not vary)."""
    x = np.asarray(values_of(values), dtype=np.float64)
    if x.size == 0:
        raise EvidenceMissing(f"no finite {unit}")
    ci = paired_ci(x, bounds=bounds)
    method = ci.method if paired else (ci.method.replace("paired t", "t").replace("one pair", "one unit")
                                       .replace("no spread over the pairs", "no spread over the units"))
    sd = float(x.std(ddof=1)) if x.size > 1 else math.nan
    return Statistic(ci.estimate, ci.low, ci.high, ci.n, unit, method, ci.se, ci.df, sd, seeds)


def table_statistic(spec: StatisticConfig, table: pd.DataFrame) -> Statistic:
    """The statistic `spec` (a kind other than computed) on `table` (one aggregate table)."""
    bounds = tuple(spec.bounds) if spec.bounds is not None else (-math.inf, math.inf)
    if spec.kind is StatisticKind.mean:
        rows = select(table, spec.where)
        per_unit = unit_values(spec, rows)
        if spec.reduce in SHARES:
            return share_statistic(spec, rows, _unit(spec))
        return from_values(per_unit.to_numpy(float), _unit(spec), bounds, _seeds(per_unit))
    if spec.kind is StatisticKind.group_difference:
        a, b = (unit_values(spec, select(table, g)).to_numpy(float) for g in (spec.a, spec.b))
        return welch_difference(a, b, f"{_unit(spec)}: {_label(spec.a)} minus {_label(spec.b)}")
    rows_a, rows_b = select(table, spec.a), select(table, spec.b)
    a = unit_values(spec, rows_a).groupby(level="seed").mean()
    b = unit_values(spec, rows_b).groupby(level="seed").mean()
    common = a.index.intersection(b.index)
    if len(common) == 0:
        raise EvidenceMissing(f"no seed has both {_label(spec.a)} (seeds {list(a.index)}) and {_label(spec.b)} "
                              f"(seeds {list(b.index)})")
    unit = f"seed pairs of {_unit(spec)}"
    return from_values((a[common] - b[common]).to_numpy(float), unit, _range(spec, bounds),
                       tuple(int(s) for s in common), paired=True)


def share_statistic(spec: StatisticConfig, rows: pd.DataFrame, unit: str) -> Statistic:
    """The share of rows (heads) whose `column` is in `values`: one share per run, Student's t over
    the runs (seeds are the units), clipped to [0, 1]; the pooled count is named in the unit."""
    rows = _filtered(spec, rows)
    runs = rows.groupby(["job", "seed"])[spec.column]
    hits = runs.apply(lambda x: int(_hits(x, spec).sum()))
    sizes = runs.size()
    shares = hits / sizes
    seeds = tuple(sorted({int(s) for s in hits.index.get_level_values("seed")}))
    return from_values(shares.to_numpy(float), f"{unit} ({int(hits.sum())} of {int(sizes.sum())} rows, share per run)",
                       (0.0, 1.0), seeds)


def value_range(spec: StatisticConfig) -> tuple[float, float]:
    """The range the statistic can take: its `bounds`, [0, 1] for a share of rows and [-1, 1] for a
    difference of two shares, else unbounded (the verdict's "absent" reads it)."""
    return _range(spec, tuple(spec.bounds) if spec.bounds is not None else (-math.inf, math.inf))


def _range(spec: StatisticConfig, bounds: tuple[float, float]) -> tuple[float, float]:
    if spec.bounds is None and spec.reduce in SHARES:
        return (-1.0, 1.0) if spec.kind is StatisticKind.paired_difference else (0.0, 1.0)
    return bounds


def welch_difference(a: np.ndarray, b: np.ndarray, unit: str, confidence: float = 0.95) -> Statistic:
    """mean(a) - mean(b) with Welch's t-interval (unequal variances; NaN interval below 2 values a
    side or when neither side varies).

    >>> s = welch_difference(np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0]), "x")
    >>> round(s.mean, 3), round(s.ci_low, 3), round(s.ci_high, 3), s.n
    (1.5, -0.988, 3.988, 5)
    """
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if a.size == 0 or b.size == 0:
        raise EvidenceMissing(f"no finite {unit} on one side")
    diff = float(a.mean() - b.mean())
    method = f"Welch t over {a.size} and {b.size} rows"
    if a.size < 2 or b.size < 2:
        return Statistic(diff, math.nan, math.nan, int(a.size + b.size), unit, method + " (undefined: one row)")
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    se = math.sqrt(va + vb)
    if se == 0:
        return Statistic(diff, math.nan, math.nan, int(a.size + b.size), unit, method + " (undefined: no spread)")
    df = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1))
    half = float(stats.t.ppf(0.5 + confidence / 2, df)) * se
    return Statistic(diff, diff - half, diff + half, int(a.size + b.size), unit, method, se, df)


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
    rows = _filtered(spec, rows)
    if column not in rows.columns:
        raise EvidenceMissing(f"the table has no column {column!r}")
    if rows.empty:
        raise EvidenceMissing(f"no rows left for {column!r} after the filters")
    reduce = spec.reduce
    if reduce is None:
        keys = [k for k in ("job", "seed") if k in rows.columns]
        index = pd.MultiIndex.from_frame(rows[keys]) if keys else rows.index
        return pd.Series(pd.to_numeric(rows[column], errors="coerce").to_numpy(float), index=index)
    return rows.groupby(["job", "seed"]).apply(lambda run: _reduce(run, column, reduce, spec.values, spec.at_most))


SHARES = (Reduction.fraction_in, Reduction.fraction_at_most)


def _hits(x: pd.Series, spec: StatisticConfig) -> pd.Series:
    """Which rows count for a share: `column` in `values`, or <= `at_most` (a missing value never counts)."""
    if spec.reduce is Reduction.fraction_at_most:
        return pd.to_numeric(x, errors="coerce").le(float(spec.at_most)).fillna(False)
    return x.isin(list(spec.values))


def _filtered(spec: StatisticConfig, rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of `spec.metric` (long tables), less those `spec.exclude` drops; `column` mapped to
    `spec.types` (rows of no type dropped) when given."""
    if spec.metric is not None:
        rows = rows[rows["metric"] == spec.metric]
    for key, dropped in spec.exclude.items():
        rows = rows[~rows[key].isin(list(dropped))]
    if spec.column not in rows.columns:
        raise EvidenceMissing(f"the table has no column {spec.column!r}")
    if spec.types:
        kind = {str(v): name for name, members in spec.types.items() for v in members}
        rows = rows.assign(**{spec.column: rows[spec.column].astype(str).map(kind)})
        if spec.reduce is not Reduction.distinct_per_layer:
            rows = rows.dropna(subset=[spec.column])
        # distinct_per_layer keeps the rows of no type (NaN, which nunique does not count): a layer
        # with none of the types has 0 of them, and a run with no typed head still counts
    if rows.empty:
        raise EvidenceMissing(f"no rows left for {spec.column!r} after the filters")
    return rows


def _seeds(per_unit: pd.Series) -> tuple[int, ...]:
    if isinstance(per_unit.index, pd.MultiIndex) and "seed" in per_unit.index.names:
        return tuple(sorted({int(s) for s in per_unit.index.get_level_values("seed")}))
    return ()


def _reduce(run: pd.DataFrame, column: str, how: Reduction, values, at_most=None) -> float:
    x = run[column]
    if how is Reduction.fraction_in:
        return float(x.isin(list(values)).mean())
    if how is Reduction.fraction_at_most:
        return float(pd.to_numeric(x, errors="coerce").le(float(at_most)).mean())
    if how is Reduction.distinct_per_layer:
        return float(run.groupby("layer")[column].nunique().mean())
    if how is Reduction.last_step_mean:
        return float(pd.to_numeric(x[run["step"] == run["step"].max()], errors="coerce").mean())
    if how in (Reduction.last_step_max, Reduction.first_step_max):
        at = run["step"].max() if how is Reduction.last_step_max else run["step"].min()
        return float(pd.to_numeric(x[run["step"] == at], errors="coerce").max())  # NaN only when every head's is
    numbers = pd.to_numeric(x, errors="coerce")
    if how is Reduction.settle_median:  # a head still moving at the end settles no earlier than the end
        return float(numbers.fillna(pd.to_numeric(run["final_step"], errors="coerce")).median())
    if how is Reduction.nan_fraction:
        return float(numbers.isna().mean())
    finite = numbers.dropna()
    if finite.empty:
        return math.nan
    return float(finite.median() if how is Reduction.median else finite.mean())


def same_value(value: Any, wanted: Any) -> bool:
    """A spec's `where` value against a table's or a config's: numbers by value (4 matches 4.0 and
    "4"), booleans by their YAML text (False matches "false"), anything else as text.

    >>> same_value(False, "false"), same_value(4, "4.0"), same_value(True, "1")
    (True, True, False)
    """
    if isinstance(value, bool) or isinstance(wanted, bool):  # a saved False against an override's "false"
        return str(value).lower() == str(wanted).lower()
    try:
        return bool(np.isclose(float(value), float(wanted)))
    except (TypeError, ValueError):
        return str(value) == str(wanted)


def _label(where: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in where.items()) or "all rows"


def _unit(spec: StatisticConfig) -> str:
    how = spec.reduce
    return f"{spec.column}" + (f" ({how.name} per run)" if how else "")
