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

COLUMNS = ("claim", "version", "section", "title", "verdict", "reason", "statistics", "primary", "margin", "p_value",
           "p_holm", "look", "first_look", "seeds", "supported_if", "contradicted_if", "source", "provenance", "coverage", "figure",
           "rule_commit", "rule_committed_at", "first_job", "freeze", "scale")
_COLOUR = {"supported": "#1a7f37", "contradicted": "#cf222e", "absent": "#cf222e", "smaller than claimed": "#bc4c00",
           "reversed": "#a40e26", "direction only": "#0969da", "inconclusive": "#9a6700",
           "not testable at this scale": "#8250df", "not measured": "#57606a"}
# how a margin's reason is to be read (tests/reproduce/test_quotes.py holds the specs to it)
QUOTES = "the article's words stand in 「」; the rest is this spec's reading, a paraphrase, not a quote"
# what the seeds of a scale are: quick's were seen before the rules of issue 25 were written
SCALE_LABEL = {"quick": "exploratory (make reproduce-quick: seeds seen before the rules were written)",
               "cpu": "confirmatory (make reproduce-cpu: seeds no earlier run used, rules frozen first)",
               "full": "confirmatory at the article's scale (make reproduce)",
               "suites": "public checkpoint suites, models trained by others, read under rules frozen first "
                         "(make reproduce SCALE=suites)"}


def format_statistic(name: str, s: Statistic) -> str:
    """`name = mean [ci_low, ci_high] (n=…)`.

    >>> format_statistic("gap", Statistic(0.0213, 0.0105, 0.0321, 3, "test_acc"))
    'gap = 0.0213 [0.0105, 0.0321] (n=3)'
    """
    return f"{name} = {s.mean:.3g} [{s.ci_low:.3g}, {s.ci_high:.3g}] (n={s.n})"


def seeds_used(r: ClaimResult) -> str:
    """The seeds the primary statistic rests on, and whether the spec counts them exploratory or confirmatory."""
    s = r.statistics.get(r.spec.primary or "")
    if s is None or not s.seeds:
        return ""
    kinds = [name for name, group in (("confirmatory", r.spec.confirmatory_seeds), ("exploratory", r.spec.exploratory_seeds),
                                      ("fresh, look 2", r.spec.replication_seeds))
             if set(s.seeds) & set(group)]
    return f"{','.join(map(str, s.seeds))} ({' and '.join(kinds) or 'neither list'})"


def _ordered(r: ClaimResult) -> list[tuple[str, Statistic]]:
    """The primary statistic first, then the secondary ones."""
    return sorted(r.statistics.items(), key=lambda item: item[0] != r.spec.primary)


def _shown(r: ClaimResult, name: str, s: Statistic) -> str:
    label = "" if r.spec.primary is None else (" (primary)" if name == r.spec.primary else " (secondary)")
    return format_statistic(name, s) + label


def claims_table(results: list[ClaimResult], figure_names: dict[str, str] | None = None) -> pd.DataFrame:
    """One row per claim (the columns of `COLUMNS`); `figure` is the copy's name beside the report."""
    rows = []
    for r in results:
        m = r.spec.margin
        rows.append({"claim": r.spec.claim, "version": r.spec.version, "section": r.spec.section, "title": r.spec.title,
                     "verdict": r.verdict, "reason": r.reason,
                     "statistics": "; ".join(_shown(r, n, s) for n, s in _ordered(r)),
                     "primary": r.spec.primary or "", "margin": "" if m is None else f"{m.direction.name} {m.value:g}",
                     "p_value": r.p_value, "p_holm": r.p_holm, "look": r.look, "first_look": r.first_look,
                     "seeds": seeds_used(r), "provenance": r.provenance,
                     "supported_if": r.spec.supported_if.text if r.spec.supported_if else "",
                     "contradicted_if": r.spec.contradicted_if.text if r.spec.contradicted_if else "",
                     "source": r.source, "coverage": r.coverage, "figure": (figure_names or {}).get(r.spec.claim, ""),
                     "rule_commit": r.rule_commit, "rule_committed_at": r.rule_committed_at, "first_job": r.first_job,
                     "freeze": r.freeze, "scale": r.scale})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def write_report(results: list[ClaimResult], out_dir: str | os.PathLike, title: str = "Reproducing the article",
                 scale: str | None = None) -> list[Path]:
    """Write the three files (and the figure copies) into `out_dir`; returns the paths written. With
    `scale` the title says whether its seeds are exploratory or confirmatory."""
    out = Path(out_dir)
    if scale is not None:
        from headlab.store.run_info import code_commit

        title = f"{title}: {scale} scale, {SCALE_LABEL.get(scale, scale)}; headlab {code_commit()}"
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


def _decision_lines(r: ClaimResult) -> list[str]:
    """The margin, prerequisite, tests and seeds of a claim decided against a margin."""
    if r.spec.primary is None:
        return []
    m = r.spec.margin
    lines = [f"- primary: `{r.spec.primary}`; margin {m.value:g} ({m.direction.name}; no effect {m.no_effect:g}): {m.reason} "
             f"({QUOTES})",
             f"- prerequisite: {'`' + r.spec.prerequisite.text + '` ' if r.spec.prerequisite else ''}"
             f"{' '.join(f'{k}={v}' for k, v in r.spec.prerequisite_config)} {r.spec.prerequisite_reason}".rstrip(),
             f"- one-sided p {_p(r.p_value)} at look {r.look}, which spends alpha {r.spec.alpha_at(r.look):g} of the plan "
             f"{'/'.join(f'{a:g}' for a in r.spec.alpha_spending)}; Holm-adjusted {_p(r.p_holm)} (one family across the looks)"]
    if r.look == 2:
        lines.append(f"- decided at look 2, on fresh seeds read on their own; {r.first_look}")
    if seeds_used(r):
        lines.append(f"- decided on seeds {seeds_used(r)}; rules version {r.spec.version}, frozen {r.spec.rules_frozen or '-'}")
    if r.spec.proxy:
        lines.append(f"- the primary is a proxy: {r.spec.proxy}")
    if r.provenance:
        lines.append(f"- {r.provenance}")
    return lines


def freeze_line(r: ClaimResult) -> str:
    """The claim's freeze in one line: the commit that froze its rule, when, and the first job's start.

    >>> from types import SimpleNamespace as N
    >>> freeze_line(N(rule_commit="0123456789abcdef", rule_committed_at="2026-12-02T04:54:00+00:00",
    ...               first_job="2026-12-02T04:24:00Z", freeze="rule newer than the first job"))
    'freeze: rule commit 0123456789 (2026-12-02T04:54:00+00:00); first job 2026-12-02T04:24:00Z; FLAG: rule newer than the first job'
    """
    commit = {"": "unknown (not in a git checkout)", "uncommitted": "none (the rule is not committed)"}.get(
        r.rule_commit, f"{r.rule_commit[:10]} ({r.rule_committed_at})")
    line = f"freeze: rule commit {commit}; first job {r.first_job or '-'}"
    return line + (f"; FLAG: {r.freeze}" if r.freeze else "")


def _p(x: float) -> str:
    return f"{x:.3g}" if x == x else "-"


def _markdown(results: list[ClaimResult], table: pd.DataFrame, title: str) -> str:
    from headlab.reproduce.multiplicity import METHOD
    from headlab.reproduce.power import power_markdown, power_rows

    from headlab.reproduce.looks import DESIGN

    second = f" Adaptive allocation: {DESIGN}." if any(r.look == 2 for r in results) else ""
    lines = [f"# {title}", "", f"Multiplicity: {METHOD}.{second} Intervals: 95 %, each says what it resampled.", "",
             "| claim | section | verdict, at its scale | statistic | title |", "|---|---|---|---|---|"]
    lines += [f"| {r.claim} | {r.section} | {at_scale(r.verdict, r.scale)}{_look(r.look)}{_partial(r.coverage)}{_flag(r.freeze)} | "
              f"{r.statistics or '-'} | {r.title} |" for r in table.itertuples()]
    for r, row in zip(results, table.itertuples()):
        lines += ["", f"## {r.spec.claim} ({r.spec.section}): {r.spec.title}", "", f"> {r.spec.zh}", ">", f"> {r.spec.en}", "",
                  f"**Verdict: {r.verdict}** ({r.reason})", ""] + ([f"Scale: {r.scale}", ""] if r.scale else [])
        if r.statistics:
            lines += [f"- {_shown(r, n, s)}: {s.unit}; {s.method}" for n, s in _ordered(r)]
            if row.supported_if:
                lines += [f"- supported if `{row.supported_if}`", f"- contradicted if `{row.contradicted_if}`"]
            lines += [f"- evidence: {r.source}" + (f" ({r.coverage})" if r.coverage else "")]
        lines += _decision_lines(r) + [f"- {freeze_line(r)}"]
        if row.figure:
            lines += ["", f"![{r.spec.claim}]({row.figure})"]
        if r.spec.notes:
            lines += ["", f"Note: {r.spec.notes}"]
    lines += power_markdown(power_rows(results))
    return "\n".join(lines) + "\n"


def _html(results: list[ClaimResult], table: pd.DataFrame, figures: dict[str, Path], title: str) -> str:
    e = html.escape
    rows = "".join(f'<tr><td><a href="#{e(r.claim)}">{e(r.claim)}</a></td><td>{e(r.section)}</td>'
                   f'<td style="color:{_COLOUR.get(r.verdict, "#000")}"><b>{e(r.verdict)}</b>{e(_at(r.scale))}{e(_look(r.look))}'
                   f'{e(_partial(r.coverage))}{e(_flag(r.freeze))}</td>'
                   f"<td>{e(r.statistics or '-')}</td><td>{e(r.title)}</td></tr>" for r in table.itertuples())
    sections = "".join(_html_section(r, figures.get(r.spec.claim)) for r in results) + _html_power(results)
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{e(title)}</title><style>'
            "body{font-family:sans-serif;max-width:60em;margin:auto;padding:1em}table{border-collapse:collapse}"
            "td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left}blockquote{border-left:4px solid #ccc;"
            "margin:0;padding-left:1em}img{max-width:100%}code{background:#f4f4f4}</style></head><body>"
            f'<h1>{e(title)}</h1><table id="summary"><thead><tr><th>claim</th><th>section</th><th>verdict, at its scale</th>'
            f"<th>statistic [95% CI]</th><th>what the article says</th></tr></thead><tbody>{rows}</tbody></table>{sections}</body></html>\n")


def _html_section(r: ClaimResult, figure: Path | None) -> str:
    e = html.escape
    parts = [f'<section id="{e(r.spec.claim)}"><h2>{e(r.spec.claim)} ({e(r.spec.section)}): {e(r.spec.title)}</h2>',
             f'<blockquote><p lang="zh">{e(r.spec.zh)}</p><p>{e(r.spec.en)}</p></blockquote>',
             f'<p><b style="color:{_COLOUR.get(r.verdict, "#000")}">{e(r.verdict)}</b>: {e(r.reason)}</p>']
    if r.scale:
        parts.append(f'<p class="scale">scale: {e(r.scale)}</p>')
    if r.statistics:
        rules = (f"<li>supported if <code>{e(r.spec.supported_if.text)}</code></li>"
                 f"<li>contradicted if <code>{e(r.spec.contradicted_if.text)}</code></li>") if r.spec.supported_if else ""
        parts.append("<ul>" + "".join(f"<li>{e(_shown(r, n, s))}: {e(s.unit)}; {e(s.method)}</li>" for n, s in _ordered(r))
                     + rules + f"<li>evidence: {e(r.source)}{e(f' ({r.coverage})' if r.coverage else '')}</li>"
                     + "".join(f"<li>{e(line[2:])}</li>" for line in _decision_lines(r)) + "</ul>")
    parts.append(f'<p class="freeze">{e(freeze_line(r))}</p>')
    if figure is not None:
        data = base64.b64encode(figure.read_bytes()).decode("ascii")
        parts.append(f'<img class="figure" alt="{e(r.spec.claim)} figure" src="data:image/png;base64,{data}">')
    if r.spec.notes:
        parts.append(f"<p><i>{e(r.spec.notes)}</i></p>")
    return "".join(parts) + "</section>"


def _html_power(results: list[ClaimResult]) -> str:
    """The power table of the undecided claims (the markdown's, as HTML)."""
    from headlab.reproduce.power import power_markdown, power_rows

    lines = power_markdown(power_rows(results))
    if not lines:
        return ""
    e = html.escape
    cells = lambda line, tag: "".join(f"<{tag}>{e(c.strip())}</{tag}>" for c in line.strip("|").split(" | "))  # noqa: E731
    head, body = lines[5], lines[7:]
    return (f'<section id="power"><h2>Power of the undecided claims</h2><p>{e(lines[3])}</p><table><thead><tr>'
            f"{cells(head, 'th')}</tr></thead><tbody>{''.join('<tr>' + cells(row, 'td') + '</tr>' for row in body)}"
            "</tbody></table></section>")


def at_scale(verdict: str, scale: str) -> str:
    """The verdict with the scale it was reached at, as the summary tables show it.

    >>> at_scale("reversed", "2 layers x 128, 2 epochs"), at_scale("not measured", "")
    ('reversed at 2 layers x 128, 2 epochs', 'not measured')
    """
    return verdict + _at(scale)


def _at(scale: str) -> str:
    return f" at {scale}" if scale else ""


def _flag(freeze: str) -> str:
    """" (rule newer than its first job)" for a claim whose freeze is flagged, else ""."""
    return " (rule newer than its first job)" if freeze else ""


def _look(look: int) -> str:
    """" (look 2)" for a claim the cpu scale's second look decided."""
    return " (look 2)" if look == 2 else ""


def _partial(coverage: str) -> str:
    """" (9 of 15 jobs usable)" when a sweep is not complete, else "".

    >>> _partial("9 of 15 jobs usable"), _partial("9 of 9 jobs usable")
    (' (9 of 15 jobs usable)', '')
    """
    if not coverage:
        return ""
    k, _, rest = coverage.partition(" of ")
    return "" if rest.split(" ")[0] == k else f" ({coverage})"
