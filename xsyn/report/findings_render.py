"""The report's "Where syntax helps" section: each `findings.Analysis` as its finding, a table, a CSV and a chart."""

from __future__ import annotations

import textwrap

from xsyn.report.findings import Analysis
from xsyn.report.format import csv_text, csv_value, markdown_table, md, slug
from xsyn.utils import plots

FOLDER = "analysis"
_INTRO = ("Gain: the system's mean score minus the baseline's, in points, per language (or language pair); "
          "± its sample sd over seeds. Typological distance: the cosine distance of the two languages' URIEL "
          "syntax vectors (lang2vec's syntax_knn). Spearman's rho with a two-sided permutation p-value.")


def analyses_markdown(analyses: list[Analysis], put) -> str:
    lines = ["## Where syntax helps", "", _INTRO]
    for analysis in analyses:
        lines += ["", *_analysis_markdown(analysis, put)]
    return "\n".join(lines)


def analysis_name(analysis: Analysis) -> str:
    """A file name stem unique within one report."""
    return slug(f"{analysis.name}-{analysis.experiment}-{analysis.system}-{analysis.unit}").replace("_", "-")


def _analysis_markdown(analysis: Analysis, put) -> list[str]:
    name = analysis_name(analysis)
    title = f"{analysis.experiment} · {analysis.system} − {analysis.baseline}"
    lines = [f"### {analysis.name}: {md(title)}" + (" (language pairs)" if analysis.unit == "language pairs" else ""),
             "", f"**{md(analysis.finding)}**", ""]
    first = "language pair" if analysis.unit == "language pairs" else "language"
    middle = "family" if analysis.x_label is None else analysis.x_label
    rows = [[point.label, point.group if analysis.x_label is None else f"{point.x:.3f}",
             f"{point.gain:+.2f}" + (" !" if point.label in analysis.alike else ""),
             "–" if point.error is None else f"{point.error:.2f}"] for point in analysis.points]
    if rows:
        lines += [markdown_table([first, middle, "gain", "sd"], rows), ""]
    put(f"{FOLDER}/{name}.csv", csv_text([first, middle, "gain", "gain_sd"],
                                         [[p.label, p.group if p.x is None else csv_value(p.x), csv_value(p.gain),
                                           csv_value(p.error)] for p in analysis.points]))
    if analysis.correlation is not None and analysis.correlation.rho is not None:
        lines += [_permutation_line(analysis), ""]
    if analysis.left_out:
        lines += ["Left out: " + md("; ".join(analysis.left_out)) + ".", ""]
    if analysis.alike:
        lines += ["! Predicted the same for every example: " + md("; ".join(
            f"{label}: {', '.join(runs)}" for label, runs in analysis.alike.items())) + ".", ""]
    chart = _chart(analysis, f"{analysis.name}: {title}")
    if chart is not None:
        lines.append(f"![{analysis.name}]({put(f'{FOLDER}/{name}.png', chart)})")
    return lines[:-1] if lines[-1] == "" else lines


def _permutation_line(analysis: Analysis) -> str:
    found = analysis.correlation
    how = (f"all {found.permutations} pairings (exact)" if found.exact
           else f"{found.permutations} random pairings (seed {found.seed})")
    return f"Spearman's rho over {found.n} {analysis.unit}; p from {how}."


def _chart(analysis: Analysis, title: str) -> bytes | None:
    if not analysis.points:
        return None
    if analysis.x_label is None:
        gains = {point.label: point.gain for point in analysis.points}
        errors = {point.label: point.error for point in analysis.points}
        seeds = "; error bars: sd over seeds" if any(error is not None for error in errors.values()) else ""
        return plots.grouped_gains_png(analysis.groups, gains, errors, title=title + seeds,
                                       value_label="gain (points)")
    return plots.labelled_scatter_png([(p.label, p.x, p.gain, p.error) for p in analysis.points],
                                      title=f"{title}\n{textwrap.fill(analysis.finding, 90)}",
                                      x_label=analysis.x_label,
                                      y_label="gain (points)")
