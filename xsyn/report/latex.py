"""`xsyn report --latex`: the report's tables as paper-ready LaTeX (booktabs), one table per experiment.

Rows are the systems (mean ± sd over seeds) and, against the baseline, their deltas with the
significance marker; columns are the languages (the source language marked †) and the average.
Needs `\\usepackage{booktabs}` in the paper.
"""

from __future__ import annotations

import re

from xsyn.report import format as shared  # the formatting render.py uses too
from xsyn.report.aggregate import Delta, Experiment, Report, Stat

_DAGGER = r"\ddagger"
_SUPERSCRIPT = "^{{{}}}"
_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
            "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
            # what report texts hold beyond ASCII, as math (no inputenc or fonts needed)
            "·": r"$\cdot$", "−": r"$-$", "±": r"$\pm$", "Δ": r"$\Delta$"}


def latex_tables(report: Report) -> str:
    """Every experiment's table, separated by blank lines, ready for \\input."""
    return "\n\n".join(_table(experiment, report.bootstrap.alpha) for experiment in report.experiments) + "\n"


def escape(text: str) -> str:
    # "--" would be an en dash, so `--max-eval-examples` keeps its two hyphens as -{}-
    return re.sub(r"-(?=-)", "-{}", "".join(_SPECIAL.get(char, char) for char in text))


def _table(experiment: Experiment, alpha: float) -> str:
    languages = shared.experiment_languages(experiment)
    systems = shared.experiment_systems(experiment)
    sources = {system.source_lang for system in systems}
    seeds = sorted({len(system.runs) for system in systems})
    header = ["System", *[escape(lang) + (r"$^\dagger$" if lang in sources else "") for lang in languages],
              "Avg."]
    lines = [r"\begin{table}[t]", r"\centering", r"\small",
             r"\begin{tabular}{l" + "r" * (len(languages) + 1) + "}", r"\toprule", " & ".join(header) + r" \\",
             r"\midrule"]
    for system in systems:
        cells = [_stat_tex(system.per_language.get(lang)) for lang in languages]
        lines.append(" & ".join([escape(system.label), *cells, _stat_tex(system.average)]) + r" \\")
    if experiment.comparisons:
        lines.append(r"\midrule")
        for comparison in experiment.comparisons:
            cells = [_delta_tex(comparison.per_language.get(lang)) for lang in languages]
            average = shared.format_average(comparison, missing="--", mark=_DAGGER, wrap="${}$",
                                            superscript=_SUPERSCRIPT)
            lines.append(" & ".join([r"$\Delta$ " + escape(comparison.system), *cells, average]) + r" \\")
    seed_count = "seed" if seeds == [1] else "seeds"
    caption = (f"{escape(shared.section_title(experiment, ', '))}: {escape(experiment.primary)} (\\%), mean $\\pm$ "
               f"sd over {'/'.join(map(str, seeds))} {seed_count}; $^\\dagger$ source language")
    if experiment.comparisons:
        caption += (f"; $\\Delta$ against {escape(experiment.baseline.label)}, $^*$ $p < {alpha:g}$ "
                    f"(one-sided paired bootstrap), $^{_DAGGER}$ $p < {alpha:g}$ (two-sided t-test over seeds; "
                    + "; ".join(escape(shared.seed_test_line(comparison).rstrip("."))
                                for comparison in experiment.comparisons)
                    + ")")
    caps = shared.experiment_caps(experiment)
    if caps:
        caption += ". Not the full benchmark: " + "; ".join(escape(cap) for cap in caps)
    lines += [r"\bottomrule", r"\end{tabular}", r"\caption{" + caption + ".}",
              r"\label{tab:" + shared.experiment_folder(experiment) + "}", r"\end{table}"]
    return "\n".join(lines)


def _stat_tex(stat: Stat | None) -> str:
    return shared.format_stat(stat, missing="--", plus_minus=r" \pm ", wrap="${}$")


def _delta_tex(cell: Delta | None) -> str:
    return shared.format_delta(cell, missing="--", marks=("*", _DAGGER), wrap="${}$", superscript=_SUPERSCRIPT)
