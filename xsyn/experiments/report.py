"""`xsyn experiment report`: one folder with an index page and, per task, the full `xsyn report`
(tables, deltas with significance, pair matrices, heatmaps, transfer gap) of the finished cells.

    index.md            status, the cap on steps, and per task: our systems with the paper's rows
                        beside them and our difference, and the generalized deltas beside the paper's
    index.json          the same numbers
    <task>/             `xsyn report` of the task's cells (report.md, report.json, CSVs, PNGs)
    <task>/paper.csv    ours, the paper's, and the difference, per system and language

With several models, each model of a task has its own folder (`<task>/<model>/`).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xsyn.experiments.cells import DONE, cell_state
from xsyn.experiments.experiment_file import Cell, Experiment, slug
from xsyn.experiments.papers import Paper, PaperPairDeltas, PaperScores, load_paper
from xsyn.experiments.selection import Selection, select
from xsyn.models.variants import get_variant
from xsyn.report import BootstrapSettings, Report, ReportError, build_report, write_report
from xsyn.report.aggregate import Experiment as ReportedExperiment
from xsyn.report.aggregate import System
from xsyn.report.format import (
    SEED_TEST_MARK,
    format_average,
    format_delta,
    format_stat,
    markdown_table,
    md,
    number,
    seed_test_line,
    signed,
)
from xsyn.training.folder import RunFolder, eval_results
from xsyn.utils.io import atomic_write_json, atomic_write_text, saved_json_object


@dataclass
class TaskSection:
    task: str
    model: str
    folder: str  # relative to the report folder
    cells: list[Cell]
    finished: list[Cell]
    report: Report | None = None
    error: str | None = None
    paper_rows: list[dict[str, Any]] = field(default_factory=list)
    selections: list[Selection] = field(default_factory=list)  # the search point chosen on dev, per system


def write_experiment_report(experiment: Experiment, output_dir: Path,
                            bootstrap: BootstrapSettings | None = None, html: bool = False) -> Path:
    """Write every task's report and the index (and with `html`, index.html: the index and every task's
    report in one self-contained page); return the index page."""
    output_dir = Path(output_dir)
    bootstrap = bootstrap or BootstrapSettings()
    states = {cell.name: cell_state(experiment, cell) for cell in experiment.cells}
    paper = load_paper(experiment.paper) if experiment.paper else None
    sections = []
    for task in experiment.tasks:
        models = experiment.models_of(task)
        for model in models:
            cells = [c for c in experiment.cells if c.task == task and c.model == model]
            folder = task if len(models) == 1 else f"{task}/{slug(model)}"
            section = TaskSection(task, model, folder, cells, [c for c in cells if states[c.name].state == DONE])
            _task_report(experiment, section, output_dir / folder, bootstrap)
            if section.report and paper:
                _paper_rows(experiment, section, paper, output_dir / folder)
            sections.append(section)
    counts: dict[str, int] = {}
    for state in states.values():
        counts[state.state] = counts.get(state.state, 0) + 1
    index = output_dir / "index.md"
    markdown = _index_markdown(experiment, sections, counts, paper)
    atomic_write_text(index, markdown)
    atomic_write_json(output_dir / "index.json", _index_json(experiment, sections, counts, paper))
    if html:
        from xsyn.report.html import Part, write_html  # (markdown-it)

        parts = [Part(markdown, output_dir)] + [
            Part((output_dir / s.folder / "report.md").read_text(encoding="utf-8"), output_dir / s.folder, demote=1,
                 source=f"{s.folder}/report.md") for s in sections if s.report]
        write_html(parts, output_dir / "index.html", experiment.title)
    return index


def _task_report(experiment: Experiment, section: TaskSection, folder: Path, bootstrap: BootstrapSettings) -> None:
    if not section.finished:
        section.error = "no finished cell yet"
        return
    evaluation = experiment.evaluation_of(section.task)
    shown, section.selections = select(experiment, section.task, section.finished)
    if not shown:
        section.error = "no search point has finished all its seeds yet"
        return
    runs, baselines = [], []
    for cell in shown:
        for split in evaluation.splits:
            (baselines if cell.variant == experiment.baseline else runs).append(
                RunFolder(experiment.cell_dir(cell)).eval_dir(split))
    try:
        section.report = build_report(runs or baselines, baselines if runs else (), bootstrap)
        write_report(section.report, folder)
    except ReportError as err:
        section.error = str(err)


def _ours(system: System, score: str, lang: str) -> float | None:
    """The seed mean of one score of one language (any score the metric gives, not only the primary)."""
    values = [run.results.get("scores", {}).get(lang, {}).get(score) for run in system.runs]
    if not values or any(not isinstance(v, (int, float)) for v in values):
        return None
    return math.fsum(values) / len(values)


def _paper_rows(experiment: Experiment, section: TaskSection, paper: Paper, folder: Path) -> None:
    for published in paper.scores_for(section.task, section.model):
        _paper_table_rows(section, paper, published)
    _write_paper_csv(section, folder)


def _paper_table_rows(section: TaskSection, paper: Paper, published: PaperScores) -> None:
    for reported in section.report.experiments:
        if published.split not in (None, reported.split):
            continue
        systems = [*reported.systems, *([reported.baseline] if reported.baseline else [])]
        for system in systems:
            if system.variant not in published.systems:
                continue
            languages = list(system.languages)
            ours = {lang: _ours(system, published.score, lang) for lang in languages}
            theirs = {lang: published.systems[system.variant].get(lang) for lang in languages}
            shared = [lang for lang in languages if ours[lang] is not None and theirs[lang] is not None]
            section.paper_rows.append({
                "split": reported.split, "system": system.label, "variant": system.variant,
                "paper_system": paper.system_names[system.variant], "score": published.score,
                "table": published.table, "where": published.where, "languages": languages, "ours": ours,
                "paper": theirs, "difference": {lang: ours[lang] - theirs[lang] for lang in shared},
                "ours_average": _mean([ours[lang] for lang in shared]),
                "paper_average": _mean([theirs[lang] for lang in shared]),
                "paper_printed_average": published.average.get(system.variant),
                "paper_languages": list(published.languages),
                "shared_languages": shared})


def _write_paper_csv(section: TaskSection, folder: Path) -> None:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["split", "system", "row", "language", "score", "value"])
    for row in section.paper_rows:
        for lang in row["languages"]:
            for name, values in (("ours", row["ours"]), ("paper", row["paper"]), ("difference", row["difference"])):
                value = values.get(lang)
                writer.writerow([row["split"], row["system"], name, lang, row["score"],
                                 "" if value is None else f"{value:.4f}"])
    if section.paper_rows:
        atomic_write_text(folder / "paper.csv", buffer.getvalue())


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return math.fsum(present) / len(present) if present else None


# --------------------------------------------------------------------------- the index


def _index_markdown(experiment: Experiment, sections: list[TaskSection], counts: dict[str, int],
                    paper: Paper | None) -> str:
    total = len(experiment.cells)
    lines = [f"# {experiment.title}", ""]
    if experiment.description:
        lines += [experiment.description, ""]
    lines += [f"Experiment file: `{experiment.path}`; runs in `{experiment.runs_dir}`.", "",
              f"{total} cells: " + ", ".join(f"{counts.get(s, 0)} {s}" for s in ("done", "running", "failed", "to do"))
              + ". The tables hold the finished cells (`xsyn experiment status` lists the others).", ""]
    caps = sorted({_max_steps(experiment, cell) for section in sections for cell in section.finished} - {None})
    if caps:
        lines += [f"**Every cell's training is capped at {', '.join(map(str, caps))} optimiser steps** "
                  "(`--max-steps`): a quick look, not the papers' schedules.", ""]
    if paper:
        lines += [f"Published scores: {paper.citation}. Each of our systems is followed by the paper's row and "
                  "our difference (ours − paper) on the languages both have.", ""]
    for section in sections:
        title = section.task if len(experiment.models_of(section.task)) == 1 else f"{section.task} · {section.model}"
        lines += [f"## {title}", ""]
        if section.error:
            lines += [f"No report: {md(section.error)}. ({len(section.finished)} of {len(section.cells)} cells "
                      "finished.)", ""]
            continue
        lines += [f"Full report: [{section.folder}/report.md]({section.folder}/report.md). "
                  f"{len(section.finished)} of {len(section.cells)} cells finished.", ""]
        if section.selections:
            lines += _selection_lines(section.selections)
        for reported in section.report.experiments:
            lines += _experiment_table(reported, [row for row in section.paper_rows
                                                  if row["split"] == reported.split], section.report.bootstrap.alpha)
            if paper and section.task in paper.pair_deltas:
                lines += _pair_delta_lines(reported, paper.pair_deltas[section.task], paper)
    return "\n".join(lines) + "\n"


def _selection_lines(selections: list[Selection]) -> list[str]:
    rows = [[selection.variant + "".join(f", {key}={value}" for key, value in selection.system), selection.describe()]
            for selection in selections]
    return ["Chosen on dev (the best mean dev score over the seeds; the tables show these runs):", "",
            markdown_table(["system", "search point"], rows), ""]


def _max_steps(experiment: Experiment, cell: Cell) -> int | None:
    return (saved_json_object(RunFolder(experiment.cell_dir(cell)).config) or {}).get("max_steps")


def _experiment_table(reported: ReportedExperiment, paper_rows: list[dict[str, Any]], alpha: float) -> list[str]:
    systems = [*([reported.baseline] if reported.baseline else []), *reported.systems]
    languages = list(dict.fromkeys(lang for system in systems for lang in system.languages))
    header = ["system", "seeds", *languages, "avg", "gap"]
    rows = []
    for system in systems:
        rows.append([system.label, str(len(system.runs)),
                     *[format_stat(system.per_language.get(lang)) for lang in languages],
                     format_stat(system.average), format_stat(system.transfer_gap)])
        for paper_row in (r for r in paper_rows if r["system"] == system.label):
            score = "" if paper_row["score"] == reported.primary else f" {paper_row['score']}"
            rows.append([f"paper: {paper_row['paper_system']}{score} ({paper_row['table']}, {paper_row['where']})",
                         "", *[number(paper_row["paper"].get(lang)) for lang in languages],
                         number(paper_row["paper_average"]), ""])
            averages = (paper_row["ours_average"], paper_row["paper_average"])
            rows.append([f"ours − paper{score}", "",
                         *[signed(paper_row["difference"].get(lang)) for lang in languages],
                         signed(None if None in averages else averages[0] - averages[1]), ""])
    lines = [f"### {reported.split} · {reported.primary}", "", markdown_table(header, rows), ""]
    if reported.comparisons:
        lines += [f"Δ against {md(reported.baseline.label)} (* p < {alpha:g}, one-sided paired bootstrap; "
                  f"{SEED_TEST_MARK} p < {alpha:g}, two-sided t-test over seeds):", ""]
        delta_rows = [[c.system, *[format_delta(c.per_language.get(lang)) for lang in languages],
                       format_average(c), signed(c.transfer_gap)] for c in reported.comparisons]
        lines += [markdown_table(["system", *languages, "avg", "gap"], delta_rows), "",
                  *[f"t-test over seeds: {md(seed_test_line(c))}" for c in reported.comparisons], ""]
    for row in paper_rows:
        if row["paper_printed_average"] is not None and len(row["shared_languages"]) < len(row["paper_languages"]):
            lines += [f"(The paper's printed average for {row['paper_system']}, over its "
                      f"{len(row['paper_languages'])} languages, is {row['paper_printed_average']:.1f}; the avg "
                      "above is over the languages both have.)", ""]
    return lines


def _pair_delta_lines(reported: ReportedExperiment, published: PaperPairDeltas, paper: Paper) -> list[str]:
    lines = []
    for comparison in reported.comparisons:
        system = next(s for s in reported.systems if s.label == comparison.system)
        if (not comparison.pairs or system.variant not in paper.system_names
                or get_variant(system.variant).is_baseline):
            continue
        axes = tuple(system.runs[0].results.get("pair_axes") or ())
        flip = axes == published.axes[::-1]
        theirs = {(c, r) if flip else (r, c): value for r, cols in published.delta.items() for c, value in cols.items()}
        ours = {(r, c): cell.delta for r, cols in comparison.pairs.items() for c, cell in cols.items() if r != c}
        shared = [key for key in ours if key in theirs]
        if not shared:
            continue
        rows_langs = [r for r in system.pair_rows if any(key[0] == r for key in shared)]
        cols_langs = [c for c in system.pair_cols if any(key[1] == c for key in shared)]
        matrix = [[r, *[(f"{signed(ours[(r, c)])} / {signed(theirs[(r, c)])}" if (r, c) in theirs and (r, c) in ours
                         else "–") for c in cols_langs]] for r in rows_langs]
        ours_avg = _mean([ours[k] for k in shared])
        theirs_avg = _mean([theirs[k] for k in shared])
        lines += [f"Generalized transfer, Δ {md(comparison.system)} − {md(comparison.baseline)} per language pair, "
                  "ours / paper "
                  f"({published.table}, {published.where}; rows: {md(axes[0]) if axes else 'first'}, columns: "
                  f"{md(axes[1]) if axes else 'second'}). Mean over the {len(shared)} pairs both have: ours "
                  f"{signed(ours_avg)}, paper {signed(theirs_avg)}.", "",
                  markdown_table(["", *cols_langs], matrix), ""]
    return lines


def _index_json(experiment: Experiment, sections: list[TaskSection], counts: dict[str, int],
                paper: Paper | None) -> dict[str, Any]:
    return {"title": experiment.title, "experiment_file": str(experiment.path), "runs_dir": str(experiment.runs_dir),
            "cells": len(experiment.cells), "states": counts, "paper": paper.citation if paper else None,
            "tasks": [{"task": s.task, "model": s.model, "folder": s.folder, "cells": len(s.cells),
                       "finished": len(s.finished), "error": s.error,
                       "max_steps": sorted({_max_steps(experiment, c) for c in s.finished} - {None}),
                       "selected_on_dev": [{"variant": sel.variant, "system": dict(sel.system),
                                            "chosen": dict(sel.chosen), "dev_score": sel.dev_score,
                                            "dev_language": sel.dev_language, "candidates": sel.candidates,
                                            "incomplete": sel.incomplete} for sel in s.selections],
                       "paper": _json_ready(s.paper_rows)} for s in sections]}


def _json_ready(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_ready(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_ready(v) for v in value]
    return value



# --------------------------------------------------------------------------- `experiment status`


@dataclass(frozen=True)
class PaperStatus:
    """One system's published average beside ours so far, for `xsyn experiment status`."""

    task: str
    model: str
    label: str  # the variant and its grid point, as the cell names spell them
    paper_system: str
    table: str  # "Table 2, page 4543"
    score: str
    paper: float  # the printed average, else the mean of the paper's languages
    ours: float | None  # the seed mean of our finished runs over the languages both have (None: none finished)
    languages: int  # languages both have
    paper_languages: int
    seeds: int  # our finished seeds that `ours` averages
    seeds_planned: int


def paper_status(experiment: Experiment, states: dict[str, Any]) -> list[PaperStatus]:
    """Each published system of the experiment's paper with its average, and ours over the finished cells
    (after the dev search, where the task has one): what `status` shows before any report is written."""
    if not experiment.paper:
        return []
    paper = load_paper(experiment.paper)
    rows = []
    for task in experiment.tasks:
        split = experiment.evaluation_of(task).splits[0]
        for model in experiment.models_of(task):
            cells = [c for c in experiment.cells if c.task == task and c.model == model]
            shown, _ = select(experiment, task, [c for c in cells if states[c.name].state == DONE])
            for published in paper.scores_for(task, model, split):
                rows += [_paper_status_row(experiment, published, paper, task, model, system, cells, shown, split)
                         for system in dict.fromkeys((c.variant, c.system) for c in cells)
                         if system[0] in published.systems]
    return rows


def _paper_status_row(experiment: Experiment, published: PaperScores, paper: Paper, task: str, model: str,
                      system: tuple[str, tuple], cells: list[Cell], shown: list[Cell], split: str) -> PaperStatus:
    variant, grid = system
    theirs = published.systems[variant]
    results = [saved_json_object(eval_results(RunFolder(experiment.cell_dir(c)).eval_dir(split))) or {}
               for c in shown if (c.variant, c.system) == system]
    per_seed = [{lang: values.get(published.score) for lang, values in (r.get("scores") or {}).items()
                 if isinstance(values, dict)} for r in results]
    shared = [lang for lang in published.languages
              if per_seed and all(isinstance(s.get(lang), (int, float)) for s in per_seed)]
    ours = _mean([_mean([s[lang] for lang in shared]) for s in per_seed]) if shared else None
    planned = len({c.seed for c in cells if (c.variant, c.system) == system})
    return PaperStatus(task, model, variant + "".join(f"-{key}={value}" for key, value in grid),
                       paper.system_names[variant], f"{published.table}, {published.where}", published.score,
                       published.average.get(variant, _mean(list(theirs.values()))), ours, len(shared),
                       len(published.languages), len(per_seed) if shared else 0, planned)
