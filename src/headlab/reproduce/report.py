"""The reproduction report: `claims.csv`, `claims.md` and a static `index.html` (atomic writes).

`index.html` opens from disk without a server: figures are embedded as data URIs (and also copied
to `figures/` beside it, where `claims.md` links them). A summary table (`id="summary"`, one row per
claim) comes first, then one section per claim: the article's words (Chinese original and English
gloss), the statistics with their 95 % intervals, the rules written before running, the verdict and
why, the figure and where the evidence came from.
"""

from __future__ import annotations

import base64
import html
import os
import shutil
from pathlib import Path

import pandas as pd

from headlab.reproduce.statistics import Statistic
from headlab.reproduce.verdict import ClaimResult
from headlab.store import atomic_write_text, atomic_write_with

COLUMNS = ("claim", "version", "section", "title", "verdict", "reason", "statistics", "supported_if", "contradicted_if",
           "source", "coverage", "figure")
_COLOUR = {"supported": "#1a7f37", "contradicted": "#cf222e", "inconclusive": "#9a6700", "not measured": "#57606a"}


def format_statistic(name: str, s: Statistic) -> str:
    """`name = mean [ci_low, ci_high] (n=…)`.

    >>> format_statistic("gap", Statistic(0.0213, 0.0105, 0.0321, 3, "test_acc"))
    'gap = 0.0213 [0.0105, 0.0321] (n=3)'
    """
    return f"{name} = {s.mean:.3g} [{s.ci_low:.3g}, {s.ci_high:.3g}] (n={s.n})"


def claims_table(results: list[ClaimResult], figure_names: dict[str, str] | None = None) -> pd.DataFrame:
    """One row per claim (the columns of `COLUMNS`); `figure` is the copy's name beside the report."""
    rows = []
    for r in results:
        rows.append({"claim": r.spec.claim, "version": r.spec.version, "section": r.spec.section, "title": r.spec.title,
                     "verdict": r.verdict, "reason": r.reason,
                     "statistics": "; ".join(format_statistic(n, s) for n, s in r.statistics.items()),
                     "supported_if": r.spec.supported_if.text if r.spec.supported_if else "",
                     "contradicted_if": r.spec.contradicted_if.text if r.spec.contradicted_if else "",
                     "source": r.source, "coverage": r.coverage, "figure": (figure_names or {}).get(r.spec.claim, "")})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def write_report(results: list[ClaimResult], out_dir: str | os.PathLike, title: str = "Reproducing the article") -> list[Path]:
    """Write the three files (and the figure copies) into `out_dir`; returns the paths written."""
    out = Path(out_dir)
    figures = _copy_figures(results, out / "figures")
    table = claims_table(results, {claim: f"figures/{p.name}" for claim, p in figures.items()})
    written = [out / "claims.csv", out / "claims.md", out / "index.html"]
    atomic_write_with(written[0], lambda tmp: table.to_csv(tmp, index=False))
    atomic_write_text(written[1], _markdown(results, table, title))
    atomic_write_text(written[2], _html(results, table, figures, title))
    return written + list(figures.values())


def _copy_figures(results: list[ClaimResult], folder: Path) -> dict[str, Path]:
    copies = {}
    for r in results:
        if r.figure and Path(r.figure).is_file():
            folder.mkdir(parents=True, exist_ok=True)
            target = folder / f"{r.spec.claim.lower()}_{Path(r.figure).name}"
            atomic_write_with(target, lambda tmp, src=r.figure: shutil.copyfile(src, tmp))
            copies[r.spec.claim] = target
    return copies


def _markdown(results: list[ClaimResult], table: pd.DataFrame, title: str) -> str:
    lines = [f"# {title}", "", "| claim | section | verdict | statistic | title |", "|---|---|---|---|---|"]
    lines += [f"| {r.claim} | {r.section} | {r.verdict}{_partial(r.coverage)} | {r.statistics or '-'} | {r.title} |"
              for r in table.itertuples()]
    for r, row in zip(results, table.itertuples()):
        lines += ["", f"## {r.spec.claim} ({r.spec.section}): {r.spec.title}", "", f"> {r.spec.zh}", ">", f"> {r.spec.en}", "",
                  f"**Verdict: {r.verdict}** ({r.reason})", ""]
        if r.statistics:
            lines += [f"- {format_statistic(n, s)}: {s.unit}" for n, s in r.statistics.items()]
            lines += [f"- supported if `{row.supported_if}`", f"- contradicted if `{row.contradicted_if}`",
                      f"- evidence: {r.source}" + (f" ({r.coverage})" if r.coverage else "")]
        if row.figure:
            lines += ["", f"![{r.spec.claim}]({row.figure})"]
        if r.spec.notes:
            lines += ["", f"Note: {r.spec.notes}"]
    return "\n".join(lines) + "\n"


def _html(results: list[ClaimResult], table: pd.DataFrame, figures: dict[str, Path], title: str) -> str:
    e = html.escape
    rows = "".join(f'<tr><td><a href="#{e(r.claim)}">{e(r.claim)}</a></td><td>{e(r.section)}</td>'
                   f'<td style="color:{_COLOUR.get(r.verdict, "#000")}"><b>{e(r.verdict)}</b>{e(_partial(r.coverage))}</td>'
                   f"<td>{e(r.statistics or '-')}</td><td>{e(r.title)}</td></tr>" for r in table.itertuples())
    sections = "".join(_html_section(r, figures.get(r.spec.claim)) for r in results)
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{e(title)}</title><style>'
            "body{font-family:sans-serif;max-width:60em;margin:auto;padding:1em}table{border-collapse:collapse}"
            "td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left}blockquote{border-left:4px solid #ccc;"
            "margin:0;padding-left:1em}img{max-width:100%}code{background:#f4f4f4}</style></head><body>"
            f'<h1>{e(title)}</h1><table id="summary"><thead><tr><th>claim</th><th>section</th><th>verdict</th>'
            f"<th>statistic [95% CI]</th><th>what the article says</th></tr></thead><tbody>{rows}</tbody></table>{sections}</body></html>\n")


def _html_section(r: ClaimResult, figure: Path | None) -> str:
    e = html.escape
    parts = [f'<section id="{e(r.spec.claim)}"><h2>{e(r.spec.claim)} ({e(r.spec.section)}): {e(r.spec.title)}</h2>',
             f'<blockquote><p lang="zh">{e(r.spec.zh)}</p><p>{e(r.spec.en)}</p></blockquote>',
             f'<p><b style="color:{_COLOUR.get(r.verdict, "#000")}">{e(r.verdict)}</b>: {e(r.reason)}</p>']
    if r.statistics:
        parts.append("<ul>" + "".join(f"<li>{e(format_statistic(n, s))}: {e(s.unit)}</li>" for n, s in r.statistics.items())
                     + f"<li>supported if <code>{e(r.spec.supported_if.text)}</code></li>"
                     + f"<li>contradicted if <code>{e(r.spec.contradicted_if.text)}</code></li>"
                     + f"<li>evidence: {e(r.source)}{e(f' ({r.coverage})' if r.coverage else '')}</li></ul>")
    if figure is not None:
        data = base64.b64encode(figure.read_bytes()).decode("ascii")
        parts.append(f'<img class="figure" alt="{e(r.spec.claim)} figure" src="data:image/png;base64,{data}">')
    if r.spec.notes:
        parts.append(f"<p><i>{e(r.spec.notes)}</i></p>")
    return "".join(parts) + "</section>"


def _partial(coverage: str) -> str:
    """" (9 of 15 jobs usable)" when a sweep is not complete, else "".

    >>> _partial("9 of 15 jobs usable"), _partial("9 of 9 jobs usable")
    (' (9 of 15 jobs usable)', '')
    """
    if not coverage:
        return ""
    k, _, rest = coverage.partition(" of ")
    return "" if rest.split(" ")[0] == k else f" ({coverage})"
