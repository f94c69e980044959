"""Writing a `Report`: report.md, report.json, CSV tables and PNG heatmaps, each written atomically."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xsyn import __version__
from xsyn.data.cards import load_card
from xsyn.data.pairs import pair_axes
from xsyn.report.aggregate import BootstrapSettings, Comparison, Delta, Experiment, Report, Stat, System
from xsyn.report.constant_predictions import AlikeRuns, pair_key
from xsyn.report.findings_render import analyses_markdown
from xsyn.report.format import (
    BOOTSTRAP_MARK,
    SEED_TEST_MARK,
    csv_text,
    csv_value,
    experiment_caps,
    experiment_folder,
    experiment_languages,
    experiment_systems,
    format_average,
    format_delta,
    format_stat,
    markdown_table,
    marks_text,
    md,
    number,
    section_title,
    seed_test_line,
    signed,
    slug,
)
from xsyn.report.latex import latex_tables
from xsyn.report.runs import ProbeRun
from xsyn.utils import plots
from xsyn.utils.errors import XsynError
from xsyn.utils.io import atomic_write_bytes, atomic_write_text


def write_report(report: Report, output_dir: Path, latex: bool = False, html: bool = False) -> list[Path]:
    """Write report.md, report.json, the CSV tables, the PNG charts (and report.tex with `latex`, the
    self-contained report.html with `html`); return the paths written."""
    output_dir = Path(output_dir)
    written: list[Path] = []

    def put(relative: str, content: str | bytes) -> str:
        path = output_dir / relative
        if isinstance(content, bytes):
            atomic_write_bytes(path, content)
        else:
            atomic_write_text(path, content)
        written.append(path)
        return relative

    scale = _shared_scale(report)
    sections = []
    for experiment in report.experiments:
        sections.append(_experiment_markdown(experiment, report.bootstrap, scale, put))
    if report.probes:
        sections.append(_probe_markdown(report.probes, put))
    if report.analyses:
        sections.append(analyses_markdown(report.analyses, put))
    markdown = _header_markdown(report) + "\n\n".join(sections) + "\n"
    put("report.md", markdown)
    put("report.json", json.dumps(_json_ready(_report_json(report)), indent=2, ensure_ascii=False,
                                  allow_nan=False) + "\n")
    if latex:
        put("report.tex", latex_tables(report))
    if html:
        from xsyn.report.html import Part, html_page  # (markdown-it)

        put("report.html", html_page([Part(markdown, output_dir)], "xsyn report"))  # its images are written
    return written


def _header_markdown(report: Report) -> str:
    runs = sum(len(system.runs) for experiment in report.experiments for system in experiment_systems(experiment))
    settings = report.bootstrap
    capped = [experiment for experiment in report.experiments if experiment_caps(experiment)]
    warning = (f"**Not the full benchmark:** {len(capped)} of {_count(len(report.experiments), 'experiment')} ran with "
               "caps (see each one's *Caps*).\n\n" if capped else "")
    return ("# xsyn report\n\n"
            f"{_count(runs, 'run')} in {_count(len(report.experiments), 'experiment')}. Scores are percentages, "
            "mean ± sample standard deviation over seeds. `*` marks a difference from the baseline with p < "
            f"{settings.alpha:g} in a one-sided paired bootstrap ({settings.resamples} resamples of the "
            f"examples, seed {settings.seed}); `{SEED_TEST_MARK}` marks p < {settings.alpha:g} in the papers' "
            "two-sided t-test over seeds (paired by seed where both systems have the same seeds, Welch's "
            "otherwise; each Δ table names the kind).\n\n" + warning)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _experiment_markdown(experiment: Experiment, settings: BootstrapSettings, scale: _Scale, put) -> str:
    folder = experiment_folder(experiment)
    systems = experiment_systems(experiment)
    languages = experiment_languages(experiment)
    with_gap = len(languages) > 1  # a single-language task has no transfer to measure
    sources = ", ".join(dict.fromkeys(system.source_lang for system in systems))
    chance = chance_level(experiment)
    lines = [f"## {md(section_title(experiment))}", "",
             f"Primary score: {md(experiment.primary)}. Average: over the languages shown."
             + (f" Transfer gap: the source language ({md(sources)}) minus the mean of the others." if with_gap else "")
             + (f" Chance: {chance:.1f}." if chance is not None else ""), ""]
    tail = ["avg", "gap"] if with_gap else ["avg"]
    header = ["system", "seeds", *languages, *tail]
    alike = AlikeRuns.of(experiment)
    rows = [[system.label, str(len(system.runs)),
             *[format_stat(system.per_language.get(lang)) + alike.mark([system.label], [lang]) for lang in languages],
             *[format_stat(stat) + alike.mark([system.label], system.languages)
               for stat in [system.average, *([system.transfer_gap] if with_gap else [])]]]
            for system in systems]
    lines += [markdown_table(header, rows), "", _examples_line(systems, languages)]
    if alike:
        lines += ["", *alike.legend()]
    caps = experiment_caps(experiment)
    if caps:
        lines += ["", "**Caps** (these numbers are not the full benchmark):", "", *[f"- {md(cap)}" for cap in caps]]
    put(f"{folder}/per_language.csv", _per_language_csv(systems, languages))
    bars = put(f"{folder}/per_language.png", plots.language_bars_png(
        {system.label: {lang: stat.mean for lang, stat in system.per_language.items()} for system in systems},
        errors={system.label: {lang: stat.std for lang, stat in system.per_language.items()} for system in systems},
        title=f"{experiment.task} ({experiment.split}): {experiment.primary} per language"
              + ("; error bars: sd over seeds" if any(len(system.runs) > 1 for system in systems) else ""),
        value_label=f"{experiment.primary} (%)", marked=sources.split(", "), chance=chance))
    lines += ["", f"![{md(experiment.primary)} per language]({bars})"]
    if experiment.comparisons:
        lines += ["", f"### Δ against {md(experiment.baseline.label)}", ""]
        delta_rows = [[comparison.system,
                       *[format_delta(comparison.per_language.get(lang)) + _fed(alike, comparison, [lang])
                         for lang in languages],
                       *[text + _fed(alike, comparison, list(comparison.per_language))
                         for text in [format_average(comparison), *([signed(comparison.transfer_gap)] if with_gap
                                                                   else [])]]]
                      for comparison in experiment.comparisons]
        lines.append(markdown_table(["system", *languages, *tail], delta_rows))
        lines += ["", *[f"t-test over seeds: {md(seed_test_line(comparison))}"
                        for comparison in experiment.comparisons]]
        lines += _one_seed_lines(experiment, settings)
        put(f"{folder}/deltas.csv", _deltas_csv(experiment.comparisons, languages))
    for system in systems:
        if system.pairs:
            lines += ["", *_pairs_markdown(experiment, system, scale, put, alike)]
    for comparison in experiment.comparisons:
        if comparison.pairs:
            lines += ["", *_delta_pairs_markdown(experiment, comparison, settings, scale, put, alike)]
    curves = _curves_markdown(experiment, put)
    if curves:
        lines += ["", *curves]
    if experiment.notes:
        lines += ["", "Notes:", "", *[f"- {md(note)}" for note in dict.fromkeys(experiment.notes)]]
    return "\n".join(lines)


def _fed(alike: AlikeRuns, comparison: Comparison, keys: list[str]) -> str:
    return alike.mark([comparison.system, comparison.baseline], keys)


def _one_seed_lines(experiment: Experiment, settings: BootstrapSettings) -> list[str]:
    """Where a side of a Δ has one seed, what its `*` measures: the bootstrap resamples the test examples of
    fixed models, so it says nothing of how another seed's training would have scored."""
    single = [system.label for system in experiment_systems(experiment) if len(system.runs) == 1]
    if not single:
        return []
    return ["", f"**One seed** ({', '.join(single)}): `*` measures the sampling of the test examples only, not the "
                "variance between training seeds; a difference that another seed could undo can still be "
                f"starred. Train more seeds (the `{SEED_TEST_MARK}` t-test needs at least 2 a side) to test that."]


def chance_level(experiment: Experiment) -> float | None:
    """The score of guessing uniformly among the card's labels, for accuracy-scored tasks with a fixed
    label set; None where no such number exists (spans, tags, regression)."""
    from xsyn.metrics.accuracy import Accuracy

    try:
        card = load_card(experiment.task)
    except XsynError:  # a task card the report cannot find (a run of a card file elsewhere)
        return None
    if experiment.primary != Accuracy.primary or not isinstance(card.labels, tuple):
        return None
    return 100.0 / len(card.labels) if card.labels else None


def _examples_line(systems: list[System], languages: list[str]) -> str:
    """Examples per language and what was dropped, from the first run that scored each language (a system
    may cover fewer languages than the table); a system scored on another number of examples is named beside
    it, as its scores and deltas then rest on other examples."""
    counts: dict[str, dict[str, int]] = {}  # language -> system -> examples
    dropped: dict[str, int] = {}
    for system in systems:
        results = system.runs[0].results
        for key, n in (results.get("n_examples") or {}).items():
            counts.setdefault(key, {})[system.label] = n
        for key, n in (results.get("dropped") or {}).items():
            dropped.setdefault(key, n)
    parts, unlike = [], False
    for lang in (lang for lang in languages if lang in counts):
        first, *others = counts[lang].items()
        differ = [f"{md(label)}: {md(n)}" for label, n in others if n != first[1]]
        unlike = unlike or bool(differ)
        parts.append(f"{md(lang)} {md(first[1])}" + (f" ({', '.join(differ)})" if differ else ""))
    text = "Examples: " + ", ".join(parts)
    lost = {key: n for key, n in dropped.items() if n}
    if lost:
        text += ". Dropped: " + ", ".join(f"{md(key)} {md(n)}" for key, n in lost.items())
    if unlike:
        text += (". **The systems were scored on different numbers of examples** (another --max-eval-examples, or "
                 "other data): their scores and deltas rest on different examples; evaluate them alike")
    return text + "."


@dataclass(frozen=True)
class _Scale:
    """One colour scale for every heatmap of a report: scores between `low` and `high`, deltas within
    ±`delta_bound`; so the same colour means the same number in every figure."""

    low: float
    high: float
    delta_bound: float


def _shared_scale(report: Report) -> _Scale:
    scores = [stat.mean for experiment in report.experiments for system in experiment_systems(experiment)
              for cols in system.pairs.values() for stat in cols.values()]
    scores += [chance for experiment in report.experiments if any(s.pairs for s in experiment_systems(experiment))
               for chance in [chance_level(experiment)] if chance is not None]
    deltas = [abs(cell.delta) for experiment in report.experiments for comparison in experiment.comparisons
              for cols in comparison.pairs.values() for cell in cols.values()]
    low, high = (min(scores), max(scores)) if scores else (0.0, 100.0)
    return _Scale(low, high if high > low else low + 1.0, max(deltas, default=0.0) or 1.0)


def pair_axis_names(experiment: Experiment) -> tuple[str, str]:
    """What the rows and columns of the language-pair matrix are, as `xsyn evaluate` recorded them
    (`pair_axes`: MLQA's rows are the context language, its columns the question language)."""
    for system in experiment_systems(experiment):
        axes = system.runs[0].results.get("pair_axes")
        if isinstance(axes, list) and len(axes) == 2:
            return str(axes[0]), str(axes[1])

    try:
        return pair_axes(load_card(experiment.task))
    except XsynError:
        return "first segment", "second segment"


def _pairs_markdown(experiment: Experiment, system: System, scale: _Scale, put, alike: AlikeRuns) -> list[str]:
    name = f"pairs-{slug(system.label)}"
    rows_langs, cols_langs = system.pair_rows, system.pair_cols
    row_axis, col_axis = pair_axis_names(experiment)
    matrix = [[_mean_or_nan(system.pairs[row].get(col)) for col in cols_langs] for row in rows_langs]
    title = f"{experiment.task} · {system.label} · {experiment.primary} ({experiment.split})"
    put(f"{experiment_folder(experiment)}/{name}.csv", _matrix_csv(rows_langs, cols_langs, matrix))
    examples = system.runs[0].results.get("n_examples") or {}  # the seeds score the same examples
    counts = [[examples.get(row if row == col else f"{row}-{col}") for col in cols_langs] for row in rows_langs]
    put(f"{experiment_folder(experiment)}/{name}.png", plots.heatmap_png(
        matrix, rows_langs, cols_langs, title=title, value_label=f"{experiment.primary} (%)",
        row_label=f"{row_axis} language", col_label=f"{col_axis} language", limits=(scale.low, scale.high),
        chance=chance_level(experiment), counts=counts))
    rows = [[row, *(number(value) + (f" (n={n})" if n is not None else "") + alike.mark([system.label],
                                                                                      [pair_key(row, col)])
                    for value, n, col in zip(values, line, cols_langs))]
            for row, values, line in zip(rows_langs, matrix, counts, strict=True)]
    return [f"### Language pairs: {md(system.label)} (rows: {md(row_axis)} language, columns: {md(col_axis)} "
            "language; n: examples scored)", "", markdown_table([_corner(row_axis, col_axis), *system.pair_cols], rows),
            "", f"![{md(title)}]({experiment_folder(experiment)}/{name}.png)"]


def _corner(row_axis: str, col_axis: str) -> str:
    """A pair table's first header: what its rows and columns are (an empty one showed as a bare sort arrow)."""
    return f"{row_axis} ↓ {col_axis} →"


def _delta_pairs_markdown(experiment: Experiment, comparison: Comparison, settings: BootstrapSettings,
                          scale: _Scale, put, alike: AlikeRuns) -> list[str]:
    rows_langs = list(comparison.pairs)
    cols_langs = list(dict.fromkeys(col for cols in comparison.pairs.values() for col in cols))
    row_axis, col_axis = pair_axis_names(experiment)
    cells = [[comparison.pairs[row].get(col) for col in cols_langs] for row in rows_langs]
    deltas = [[cell.delta if cell else math.nan for cell in row] for row in cells]
    marks = [[marks_text((BOOTSTRAP_MARK, SEED_TEST_MARK), (cell.significant, cell.seed_significant), "{}")
              + _fed(alike, comparison, [pair_key(row, col)]) if cell else ""
              for col, cell in zip(cols_langs, line)] for row, line in zip(rows_langs, cells)]
    p_values = [[cell.p_value if cell and cell.p_value is not None else math.nan for cell in row]
                for row in cells]
    name = f"pairs-delta-{slug(comparison.system)}"
    title = (f"{experiment.task} · {comparison.system} − {comparison.baseline} · Δ {experiment.primary} "
             f"(* bootstrap, {SEED_TEST_MARK} t-test over seeds: p < {settings.alpha:g})")
    put(f"{experiment_folder(experiment)}/{name}.csv", _matrix_csv(rows_langs, cols_langs, deltas))
    put(f"{experiment_folder(experiment)}/{name}-p.csv", _matrix_csv(rows_langs, cols_langs, p_values))
    put(f"{experiment_folder(experiment)}/{name}.png", plots.heatmap_png(
        deltas, rows_langs, cols_langs, title=title, value_label=f"Δ {experiment.primary} (points)",
        diverging=True, marks=marks, row_label=f"{row_axis} language", col_label=f"{col_axis} language",
        limits=(-scale.delta_bound, scale.delta_bound)))
    rows = [[row, *(format_delta(cell) + _fed(alike, comparison, [pair_key(row, col)])
                    for col, cell in zip(cols_langs, line))] for row, line in zip(rows_langs, cells, strict=True)]
    return [f"### Δ language pairs: {md(comparison.system)} − {md(comparison.baseline)} "
            f"(* bootstrap, {SEED_TEST_MARK} t-test over seeds: p < {settings.alpha:g}; rows: {md(row_axis)} language, "
            f"columns: {md(col_axis)} language)", "",
            markdown_table([_corner(row_axis, col_axis), *cols_langs], rows), "",
            f"![{md(title)}]({experiment_folder(experiment)}/{name}.png)"]


def _curves_markdown(experiment: Experiment, put) -> list[str]:
    """Each run's training curves (the PNG its run folder holds), copied beside the report and shown."""
    trainings: dict[Path, list[tuple[str, int]]] = {}  # one training evaluated several ways (--parser): drawn once
    missing = []
    for system in experiment_systems(experiment):
        for run in system.runs:
            candidates = run.curves_candidates()
            source = next((path for path in candidates if path.is_file()), None)
            if source is not None:
                trainings.setdefault(source.resolve(), []).append((system.label, run.seed))
            elif run.results.get("run_dir"):  # an xsyn run, whose folder should hold them
                missing.append(f"{system.label}, seed {run.seed}: none in {' or '.join(map(str, candidates))}")
    lines = [f"Training curves not found: {md('; '.join(missing))}.", ""] if missing else []
    for source, shown in trainings.items():
        label, seed = shown[0]  # (a seed may be any string: a file name only through `slug`)
        copied = put(f"{experiment_folder(experiment)}/curves-{slug(label)}-seed{slug(str(seed))}.png",
                     source.read_bytes())
        lines += ["; ".join(f"{md(label)}, seed {md(seed)}" for label, seed in shown)
                  + (" (one training, evaluated each way)" if len(shown) > 1 else "") + ":", "",
                  f"![training curves]({copied})", ""]
    return ["### Training curves", "", *lines[:-1]] if lines else []


def _probe_markdown(probes: list[ProbeRun], put) -> str:
    from xsyn.pretraining.probe import METRICS as PROBE_METRICS  # the probe table's columns (numpy: here)

    labels = _path_labels([probe.path for probe in probes])
    header = ["run", "language", *PROBE_METRICS, "n_sentences"]
    rows = [[labels[probe.path], lang, *[number(values.get(name), ".3f") for name in PROBE_METRICS],
             number(values.get("n_sentences"), ".0f")]
            for probe in probes for lang, values in probe.metrics.items()]
    put("probe.csv", csv_text(header, [[labels[probe.path], lang, *[values.get(name, "") for name in header[2:]]]
                                   for probe in probes for lang, values in probe.metrics.items()]))
    table = {labels[probe.path]: probe.metrics for probe in probes}
    put("probe.png", plots.probe_png(table, PROBE_METRICS))
    return "\n".join(["## Structural probes per language", "", markdown_table(header, rows), "",
                      "![structural probes](probe.png)"])


def _path_labels(paths: list[Path]) -> dict[Path, str]:
    names = [path.name for path in paths]
    return {path: path.name if names.count(path.name) == 1 else str(path) for path in paths}


# --------------------------------------------------------------------------- formatting helpers


def _mean_or_nan(stat: Stat | None) -> float:
    return stat.mean if stat else math.nan


def _per_language_csv(systems: list[System], languages: list[str]) -> str:
    header = ["system", "variant", "model", "seeds"]
    for name in [*languages, "average", "transfer_gap"]:
        header += [name, f"{name}_std"]
    rows = []
    for system in systems:
        stats = [system.per_language.get(lang) for lang in languages] + [system.average, system.transfer_gap]
        row = [system.label, system.variant, system.model, len(system.runs)]
        for stat in stats:
            row += [csv_value(stat.mean if stat else None), csv_value(stat.std if stat else None)]
        rows.append(row)
    return csv_text(header, rows)


def _deltas_csv(comparisons: list[Comparison], languages: list[str]) -> str:
    header = ["system", "baseline"]
    for lang in languages:
        header += [lang, f"{lang}_p", f"{lang}_ttest_p"]
    rows = []
    for comparison in comparisons:
        row = [comparison.system, comparison.baseline]
        for lang in languages:
            cell = comparison.per_language.get(lang)
            test = cell.seed_test if cell else None
            row += [csv_value(cell.delta if cell else None), csv_value(cell.p_value if cell else None),
                    csv_value(test.p_value if test else None)]
        average_p = comparison.average_test.p_value if comparison.average_test else None
        rows.append([*row, csv_value(comparison.average), csv_value(average_p),
                     csv_value(comparison.transfer_gap)])
    return csv_text([*header, "average", "average_ttest_p", "transfer_gap"], rows)


def _matrix_csv(rows: list[str], cols: list[str], matrix: list[list[float]]) -> str:
    return csv_text(["row\\col", *cols], [[row, *map(csv_value, values)] for row, values in zip(rows, matrix,
                                                                                             strict=True)])


def _report_json(report: Report) -> dict:
    return {
        "xsyn_version": __version__,
        "bootstrap": {"test": "one-sided paired bootstrap: p is the share of resamples of the shared "
                              "examples in which the seed-mean difference is zero or reversed",
                      "resamples": report.bootstrap.resamples, "seed": report.bootstrap.seed,
                      "alpha": report.bootstrap.alpha},
        "ttest": {"test": "two-sided t-test over seeds: paired by seed where both systems have the same seeds "
                          "(scipy ttest_rel), Welch's otherwise (ttest_ind, equal_var=False)",
                  "alpha": report.bootstrap.alpha},
        "experiments": [_experiment_json(experiment) for experiment in report.experiments],
        "probes": [{"run": str(probe.path), "per_language": probe.metrics} for probe in report.probes],
        "analyses": [dataclasses.asdict(analysis) for analysis in report.analyses],
    }


def _json_ready(value: Any) -> Any:
    """NaN (a probe metric nothing was scored for) becomes null: report.json stays strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _json_ready(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(item) for item in value]
    return value


def _experiment_json(experiment: Experiment) -> dict:
    return {
        "task": experiment.task, "split": experiment.split, "metric": experiment.metric,
        "primary": experiment.primary,
        "systems": [_system_json(system) for system in experiment.systems],
        "baseline": _system_json(experiment.baseline) if experiment.baseline else None,
        "comparisons": [{
            "system": comparison.system, "baseline": comparison.baseline,
            "per_language": {lang: _delta_json(cell) for lang, cell in comparison.per_language.items()},
            "average": comparison.average, "transfer_gap": comparison.transfer_gap,
            "average_ttest": _seed_test_json(comparison.average_test),
            "pairs": {row: {col: _delta_json(cell) for col, cell in cols.items()}
                      for row, cols in comparison.pairs.items()},
        } for comparison in experiment.comparisons],
        "notes": list(dict.fromkeys(experiment.notes)),
    }


def _system_json(system: System) -> dict:
    first = system.runs[0].results
    return {
        "label": system.label, "variant": system.variant, "model": system.model,
        "runs": [{"path": str(run.path), "seed": run.seed,  # where it predicted the same for every example
                  "predicted_alike": run.results.get("predicted_nothing") or {}} for run in system.runs],
        "source_lang": system.source_lang,
        "per_language": {lang: _stat_json(stat) for lang, stat in system.per_language.items()},
        "average": _stat_json(system.average),
        "transfer_gap": _stat_json(system.transfer_gap) if system.transfer_gap else None,
        "pairs": {row: {col: _stat_json(stat) for col, stat in cols.items()}
                  for row, cols in system.pairs.items()},
        "n_examples": first.get("n_examples", {}), "dropped": first.get("dropped", {}),
    }


def _stat_json(stat: Stat) -> dict:
    return {"mean": stat.mean, "std": stat.std, "n_seeds": len(stat.values), "values": list(stat.values)}


def _delta_json(cell: Delta) -> dict:
    return {"delta": cell.delta, "p_value": cell.p_value, "significant": cell.significant,
            "paired_examples": cell.paired_examples, "unpaired_examples": cell.unpaired_examples,
            "ttest": _seed_test_json(cell.seed_test), "ttest_significant": cell.seed_significant}


def _seed_test_json(test) -> dict | None:
    if test is None:
        return None
    return {"kind": test.kind, "p_value": test.p_value, "statistic": test.statistic, "df": test.df,
            "n_system": test.n_system, "n_baseline": test.n_baseline, "reason": test.reason}
