"""`xsyn report`: tables over runs and seeds, deltas against a baseline, and heatmaps.

It reads the run directories `xsyn evaluate` writes:

- `results.json`: task, variant, model, seed, metric, split, `per_language` {lang: score},
  optional `pairs` {row: {col: score}}, `n_examples`, `dropped`, `config`, optional
  `metric_options` (options of the metric, e.g. {"mode": "strict"});
- `per_example/{split}-{lang}.jsonl` and `per_example/{split}-{row}-{col}.jsonl`: one line per example,
  `{"id", "prediction", "reference"}`, which lets the report pair two runs by example id and
  recompute the metric on bootstrap resamples;
- `probe_metrics.json` (from `xsyn pretrain-gat`): {lang: {"uuas", "dist_spearman", ...}}.

Runs are grouped into experiments by (task, split, metric) and, within one, into systems by
(variant, model); the seeds of a system give mean and sample standard deviation (n - 1). Per system:
each language, the average over languages, and the transfer gap (the source language, `train_lang` of
the run's config or else en, minus the mean of the others; Ahmad et al. 2021 Table 7). Against the
baseline: the difference of means per language and per language pair (their Table 3), marked when a
one-sided paired bootstrap gives p < alpha (`xsyn.metrics.bootstrap`). For `mlqa` without a `lang`
option the context language is the pair's row (MLQA's matrix is context x question).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from xsyn.cli import main
from xsyn.io import OutputError, atomic_write_bytes, atomic_write_text

RESULTS_FILE = "results.json"
PROBE_FILE = "probe_metrics.json"
PROBE_METRICS = ("uuas", "dist_spearman", "root_acc", "norm_spearman")
DEFAULT_RESAMPLES = 1000
DEFAULT_BOOTSTRAP_SEED = 20210801
DEFAULT_ALPHA = 0.05
_REQUIRED = ("task", "variant", "model", "seed", "metric", "split", "per_language")
_CONSISTENCY_TOLERANCE = 0.01  # points: recomputed per-example score vs results.json

Key = tuple[str, ...]  # (lang,) or (row, col)


class ReportError(ValueError):
    """Run directories that cannot be reported as given; the message says what to change."""


# --------------------------------------------------------------------------- reading run directories


@dataclass(frozen=True)
class Run:
    """One evaluated run directory."""

    path: Path
    results: dict

    @property
    def variant(self) -> str:
        return self.results["variant"]

    @property
    def model(self) -> str:
        return self.results["model"]

    @property
    def seed(self) -> Any:
        return self.results["seed"]

    @property
    def experiment(self) -> tuple[str, str, str]:
        return (self.results["task"], self.results["split"], self.results["metric"])

    @property
    def system(self) -> tuple[str, str]:
        return (self.results["variant"], self.results["model"])

    @property
    def source_lang(self) -> str:
        return str((self.results.get("config") or {}).get("train_lang", "en"))

    def score(self, key: Key) -> float | None:
        if len(key) == 1:
            return self.results["per_language"].get(key[0])
        return (self.results.get("pairs") or {}).get(key[0], {}).get(key[1])

    def metric_options(self, key: Key) -> dict:
        options = dict(self.results.get("metric_options") or {})
        if self.results["metric"] == "mlqa":
            options.setdefault("lang", key[0])
        return options

    def per_example_file(self, key: Key) -> Path:
        return self.path / "per_example" / f"{self.results['split']}-{'-'.join(key)}.jsonl"


@dataclass(frozen=True)
class ProbeRun:
    path: Path
    metrics: dict[str, dict[str, float]]  # lang -> probe metric -> value


def read_run(path: Path) -> Run:
    file = path / RESULTS_FILE
    results = _read_json(file)
    missing = [key for key in _REQUIRED if key not in results]
    if missing:
        raise ReportError(f"{file} lacks {', '.join(missing)}; it was not written by `xsyn evaluate` "
                          "(see the README for the results.json schema)")
    if not isinstance(results["per_language"], dict) or not isinstance(results.get("pairs") or {}, dict):
        raise ReportError(f"{file}: per_language and pairs must be JSON objects keyed by language")
    scores = dict(results["per_language"])
    scores.update({f"{row}-{col}": value for row, cols in (results.get("pairs") or {}).items()
                   for col, value in cols.items()})
    for key, value in scores.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ReportError(f"{file}: the score of {key} is {value!r}, not a number; re-run its evaluation")
    return Run(path, results)


def read_probe_run(path: Path) -> ProbeRun:
    file = path / PROBE_FILE
    metrics = _read_json(file)
    for lang, values in metrics.items():
        if not isinstance(values, dict):
            raise ReportError(f"{file}: language {lang!r} holds {values!r}, not a mapping of probe metrics")
    return ProbeRun(path, metrics)


def _read_json(file: Path) -> dict:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReportError(f"{file} does not exist") from None
    except json.JSONDecodeError as err:
        raise ReportError(f"{file}: not valid JSON ({err}); re-run the evaluation that writes it") from None
    if not isinstance(data, dict):
        raise ReportError(f"{file}: expected a JSON object")
    return data


def find_runs(paths: Iterable[Path]) -> tuple[list[Run], list[ProbeRun]]:
    """Run directories as given, or every run below a folder that is not one itself."""
    runs: list[Run] = []
    probes: list[ProbeRun] = []
    for path in paths:
        found = _run_directories(Path(path))
        if not found:
            raise ReportError(f"no {RESULTS_FILE} or {PROBE_FILE} in or below {path}: pass run directories "
                              "written by `xsyn evaluate` (an unfinished evaluation has none yet; "
                              "re-run it, it resumes)")
        for directory in found:
            if (directory / RESULTS_FILE).is_file():
                runs.append(read_run(directory))
            if (directory / PROBE_FILE).is_file():
                probes.append(read_probe_run(directory))
    return runs, probes


def _run_directories(path: Path) -> list[Path]:
    if (path / RESULTS_FILE).is_file() or (path / PROBE_FILE).is_file():
        return [path]
    files = sorted({*path.rglob(RESULTS_FILE), *path.rglob(PROBE_FILE)})
    return sorted({file.parent for file in files})


def read_per_example(run: Run, key: Key) -> tuple[list[str], list, list]:
    """Ids, predictions and references of one language or pair of a run."""
    file = run.per_example_file(key)
    ids, predictions, references = [], [], []
    seen: set[str] = set()
    with file.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                example_id, prediction, reference = str(row["id"]), row["prediction"], row["reference"]
            except (json.JSONDecodeError, KeyError, TypeError) as err:
                raise ReportError(f"{file}:{number}: expected a JSON object with id, prediction and "
                                  f"reference ({err})") from None
            if example_id in seen:
                raise ReportError(f"{file}:{number}: example id {example_id!r} appears twice; ids must be "
                                  "unique to pair runs")
            seen.add(example_id)
            ids.append(example_id)
            predictions.append(prediction)
            references.append(reference)
    return ids, predictions, references


# --------------------------------------------------------------------------- aggregation


@dataclass(frozen=True)
class Stat:
    """Mean and sample standard deviation over seeds."""

    mean: float
    std: float | None  # None with a single seed
    values: tuple[float, ...]

    @classmethod
    def of(cls, values: Sequence[float]) -> Stat:
        n = len(values)
        mean = math.fsum(values) / n
        std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else None
        return cls(mean, std, tuple(values))


@dataclass(frozen=True)
class Delta:
    """System mean minus baseline mean, with its bootstrap p-value when per-example files allow one."""

    delta: float
    p_value: float | None = None
    significant: bool = False
    paired_examples: int = 0
    unpaired_examples: int = 0


@dataclass
class System:
    label: str
    variant: str
    model: str
    runs: list[Run]
    languages: list[str]
    per_language: dict[str, Stat]
    average: Stat
    transfer_gap: Stat | None
    source_lang: str
    pair_rows: list[str] = field(default_factory=list)
    pair_cols: list[str] = field(default_factory=list)
    pairs: dict[str, dict[str, Stat]] = field(default_factory=dict)


@dataclass
class Comparison:
    system: str
    baseline: str
    per_language: dict[str, Delta]
    average: float
    transfer_gap: float | None
    pairs: dict[str, dict[str, Delta]] = field(default_factory=dict)


@dataclass
class Experiment:
    task: str
    split: str
    metric: str
    primary: str
    systems: list[System]
    baseline: System | None
    comparisons: list[Comparison]
    notes: list[str]

    @property
    def slug(self) -> str:
        return _slug(f"{self.task}-{self.split}-{self.metric}")


@dataclass(frozen=True)
class BootstrapSettings:
    resamples: int = DEFAULT_RESAMPLES
    seed: int = DEFAULT_BOOTSTRAP_SEED
    alpha: float = DEFAULT_ALPHA


@dataclass
class Report:
    experiments: list[Experiment]
    probes: list[ProbeRun]
    bootstrap: BootstrapSettings


def build_report(run_dirs: Sequence[Path], baseline_dirs: Sequence[Path] = (),
                 bootstrap: BootstrapSettings = BootstrapSettings()) -> Report:
    """Read, group and aggregate the runs, and test each system against the baseline."""
    runs, probes = find_runs(run_dirs)
    baseline_runs, baseline_probes = find_runs(baseline_dirs)
    shared = {run.path.resolve() for run in runs} & {run.path.resolve() for run in baseline_runs}
    if shared:
        raise ReportError(f"{sorted(map(str, shared))[0]} is given both as a run and as a baseline")
    if not runs and not probes:
        raise ReportError("nothing to report: the run directories hold no results")
    experiments = []
    for key in dict.fromkeys(run.experiment for run in [*runs, *baseline_runs]):
        members = [run for run in runs if run.experiment == key]
        baselines = [run for run in baseline_runs if run.experiment == key]
        experiments.append(_experiment(key, members, baselines, bootstrap))
    return Report(experiments, [*probes, *baseline_probes], bootstrap)


def _experiment(key: tuple[str, str, str], runs: list[Run], baseline_runs: list[Run],
                bootstrap: BootstrapSettings) -> Experiment:
    from xsyn.metrics import primary_name

    task, split, metric = key
    try:
        primary = primary_name(metric)
    except ValueError as err:
        raise ReportError(f"{(runs or baseline_runs)[0].path / RESULTS_FILE}: {err}") from None
    notes: list[str] = []
    groups = _group_systems(runs)
    labels = _system_labels(list(groups))
    systems = [_system(labels[system], members) for system, members in groups.items()]
    baseline = None
    if baseline_runs:
        baseline_groups = _group_systems(baseline_runs)
        if len(baseline_groups) > 1:
            found = ", ".join(f"{variant} ({model})" for variant, model in baseline_groups)
            raise ReportError(f"the --baseline runs of {task}/{split}/{metric} are several systems "
                              f"({found}); give the seeds of one variant and model as the baseline")
        ((variant, model), members), = baseline_groups.items()
        baseline = _system(f"{variant} (baseline)", members)
    elif systems:
        notes.append("no --baseline runs for this experiment: no deltas")
    comparisons = ([_compare(system, baseline, metric, bootstrap, notes) for system in systems]
                   if baseline else [])
    return Experiment(task, split, metric, primary, systems, baseline, comparisons, notes)


def _group_systems(runs: list[Run]) -> dict[tuple[str, str], list[Run]]:
    groups: dict[tuple[str, str], list[Run]] = {}
    for run in runs:
        groups.setdefault(run.system, []).append(run)
    for members in groups.values():
        seeds: dict[Any, Path] = {}
        for run in members:
            if run.seed in seeds:
                raise ReportError(f"{seeds[run.seed]} and {run.path} are the same system with the same seed "
                                  f"({run.seed}); give each seed once")
            seeds[run.seed] = run.path
    return groups


def _system_labels(systems: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
    variants = [variant for variant, _ in systems]
    return {(variant, model): variant if variants.count(variant) == 1 else f"{variant} ({model})"
            for variant, model in systems}


def _same_keys(runs: list[Run], keys_of, what: str) -> list:
    """The keys every seed has; seeds that disagree are an error (an unfinished evaluation)."""
    first = list(keys_of(runs[0]))
    for run in runs[1:]:
        if set(keys_of(run)) != set(first):
            raise ReportError(f"{run.path} and {runs[0].path} are seeds of one system but cover different "
                              f"{what} ({sorted(keys_of(run))} vs {sorted(first)}); finish the evaluation "
                              "of both (`xsyn evaluate` resumes) or leave one out")
    return first


def _system(label: str, runs: list[Run]) -> System:
    runs = sorted(runs, key=_seed_order)
    languages = _same_keys(runs, lambda run: run.results["per_language"], "languages")
    per_language = {lang: Stat.of([run.results["per_language"][lang] for run in runs]) for lang in languages}
    average = Stat.of([math.fsum(run.results["per_language"][lang] for lang in languages) / len(languages)
                       for run in runs])
    source = runs[0].source_lang
    others = [lang for lang in languages if lang != source]
    gap = None
    if source in languages and others:
        gap = Stat.of([run.results["per_language"][source]
                       - math.fsum(run.results["per_language"][lang] for lang in others) / len(others)
                       for run in runs])
    system = System(label, runs[0].variant, runs[0].model, runs, languages, per_language, average, gap,
                    source)
    if any(run.results.get("pairs") for run in runs):
        cells = _same_keys(runs, _pair_keys, "language pairs")
        system.pair_rows = list(dict.fromkeys(row for row, _ in cells))
        system.pair_cols = list(dict.fromkeys(col for _, col in cells))
        for row, col in cells:
            system.pairs.setdefault(row, {})[col] = Stat.of([run.score((row, col)) for run in runs])
    return system


def _seed_order(run: Run) -> tuple:
    seed = run.seed
    return (0, seed, "") if isinstance(seed, (int, float)) else (1, 0, str(seed))


def _pair_keys(run: Run) -> list[tuple[str, str]]:
    return [(row, col) for row, cols in (run.results.get("pairs") or {}).items() for col in cols]


def _compare(system: System, baseline: System, metric: str, bootstrap: BootstrapSettings,
             notes: list[str]) -> Comparison:
    per_language = {lang: _delta(system, baseline, (lang,), metric, bootstrap, notes)
                    for lang in system.languages if lang in baseline.per_language}
    left_out = [lang for lang in system.languages if lang not in baseline.per_language]
    if left_out:
        notes.append(f"{system.label}: no baseline score for {', '.join(left_out)}; no delta there")
    gap = (system.transfer_gap.mean - baseline.transfer_gap.mean
           if system.transfer_gap and baseline.transfer_gap else None)
    comparison = Comparison(system.label, baseline.label, per_language,
                            system.average.mean - baseline.average.mean, gap)
    for row, cols in system.pairs.items():
        for col in cols:
            if col in baseline.pairs.get(row, {}):
                comparison.pairs.setdefault(row, {})[col] = _delta(system, baseline, (row, col), metric,
                                                                   bootstrap, notes)
    return comparison


def _delta(system: System, baseline: System, key: Key, metric: str, bootstrap: BootstrapSettings,
           notes: list[str]) -> Delta:
    """Difference of seed means; p from the paired bootstrap over the examples all runs share."""
    from xsyn.metrics import MetricInputError, get_metric
    from xsyn.metrics.bootstrap import paired_bootstrap

    mean = _cell(system, key).mean - _cell(baseline, key).mean
    runs = [*system.runs, *baseline.runs]
    missing = [run.per_example_file(key) for run in runs if not run.per_example_file(key).is_file()]
    if missing:
        notes.append(f"{'-'.join(key)}: no significance test, {missing[0]} is missing")
        return Delta(mean)
    loaded = [read_per_example(run, key) for run in runs]
    common = set(loaded[0][0]).intersection(*(set(ids) for ids, _, _ in loaded[1:]))
    every = set().union(*(set(ids) for ids, _, _ in loaded))
    if not common:
        notes.append(f"{'-'.join(key)}: no significance test, the runs share no example id")
        return Delta(mean, unpaired_examples=len(every))
    order = [example_id for example_id in loaded[0][0] if example_id in common]
    tables = []
    for run, (ids, predictions, references) in zip(runs, loaded, strict=True):
        try:
            scorer = get_metric(metric, **run.metric_options(key))
        except ValueError as err:
            raise ReportError(f"{run.path / RESULTS_FILE}: metric_options: {err}") from None
        try:
            table = scorer.count_table(predictions, references)
        except MetricInputError as err:
            raise ReportError(f"{run.per_example_file(key)}: {err}") from None
        _check_consistency(run, key, scorer.scores_of(table)[scorer.primary], notes)
        position = {example_id: i for i, example_id in enumerate(ids)}
        tables.append(table.take([position[example_id] for example_id in order]))
    rng = _rng(bootstrap.seed, key)
    split = len(system.runs)
    result = paired_bootstrap(get_metric(metric, **system.runs[0].metric_options(key)), tables[:split],
                              tables[split:], bootstrap.resamples, rng)
    if len(every) > len(common):
        notes.append(f"{'-'.join(key)}: {len(every) - len(common)} example ids are not in every run; "
                     "the significance test uses the shared ones")
    return Delta(mean, result.p_value, result.p_value < bootstrap.alpha and mean != 0,
                 len(common), len(every) - len(common))


def _cell(system: System, key: Key) -> Stat:
    return system.per_language[key[0]] if len(key) == 1 else system.pairs[key[0]][key[1]]


def _check_consistency(run: Run, key: Key, recomputed: float, notes: list[str]) -> None:
    stated = run.score(key)
    if stated is not None and abs(recomputed - stated) > _CONSISTENCY_TOLERANCE:
        notes.append(f"{run.per_example_file(key)} scores {recomputed:.2f} but {run.path / RESULTS_FILE} "
                     f"says {stated:.2f}: check the metric options (`metric_options` in results.json)")


def _rng(seed: int, key: Key):
    """A generator per cell, so a cell's p-value does not depend on which other cells are reported."""
    import numpy as np

    return np.random.default_rng([seed, zlib.crc32("-".join(key).encode("utf-8"))])


# --------------------------------------------------------------------------- writing


def write_report(report: Report, output_dir: Path) -> list[Path]:
    """Write report.md, report.json, the CSV tables and the PNG heatmaps; return the paths written."""
    from xsyn import plots

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

    sections = []
    for experiment in report.experiments:
        sections.append(_experiment_markdown(experiment, report.bootstrap, put, plots))
    if report.probes:
        sections.append(_probe_markdown(report.probes, put, plots))
    put("report.md", _header_markdown(report) + "\n\n".join(sections) + "\n")
    put("report.json", json.dumps(_json_ready(_report_json(report)), indent=2, ensure_ascii=False,
                                  allow_nan=False) + "\n")
    return written


def _header_markdown(report: Report) -> str:
    runs = sum(len(system.runs) for experiment in report.experiments
               for system in [*experiment.systems, *([experiment.baseline] if experiment.baseline else [])])
    settings = report.bootstrap
    return ("# xsyn report\n\n"
            f"{runs} runs in {len(report.experiments)} experiment(s). Scores are percentages, mean ± sample "
            "standard deviation over seeds. `*` marks a difference from the baseline with p < "
            f"{settings.alpha:g} in a one-sided paired bootstrap ({settings.resamples} resamples of the "
            f"examples, seed {settings.seed}).\n\n")


def _experiment_markdown(experiment: Experiment, settings: BootstrapSettings, put, plots) -> str:
    folder = experiment.slug
    systems = [*experiment.systems, *([experiment.baseline] if experiment.baseline else [])]
    languages = list(dict.fromkeys(lang for system in systems for lang in system.languages))
    sources = ", ".join(dict.fromkeys(system.source_lang for system in systems))
    lines = [f"## {experiment.task} · {experiment.split} · {experiment.metric}", "",
             f"Primary score: {experiment.primary}. Average: over the languages shown. Transfer gap: the "
             f"source language ({sources}) minus the mean of the others.", ""]
    header = ["system", "seeds", *languages, "avg", "gap"]
    rows = [[system.label, str(len(system.runs)),
             *[_format_stat(system.per_language.get(lang)) for lang in languages],
             _format_stat(system.average), _format_stat(system.transfer_gap)] for system in systems]
    lines += [_markdown_table(header, rows), "", _examples_line(systems[0], languages)]
    put(f"{folder}/per_language.csv", _per_language_csv(systems, languages))
    if experiment.comparisons:
        lines += ["", f"### Δ against {experiment.baseline.label}", ""]
        delta_rows = [[comparison.system,
                       *[_format_delta(comparison.per_language.get(lang)) for lang in languages],
                       _signed(comparison.average), _signed(comparison.transfer_gap)]
                      for comparison in experiment.comparisons]
        lines.append(_markdown_table(["system", *languages, "avg", "gap"], delta_rows))
        put(f"{folder}/deltas.csv", _deltas_csv(experiment.comparisons, languages))
    for system in systems:
        if system.pairs:
            lines += ["", *_pairs_markdown(experiment, system, put, plots)]
    for comparison in experiment.comparisons:
        if comparison.pairs:
            lines += ["", *_delta_pairs_markdown(experiment, comparison, settings, put, plots)]
    if experiment.notes:
        lines += ["", "Notes:", "", *[f"- {note}" for note in dict.fromkeys(experiment.notes)]]
    return "\n".join(lines)


def _examples_line(system: System, languages: list[str]) -> str:
    results = system.runs[0].results
    counts = results.get("n_examples") or {}
    dropped = results.get("dropped") or {}
    text = "Examples: " + ", ".join(f"{lang} {counts[lang]}" for lang in languages if lang in counts)
    lost = {key: n for key, n in dropped.items() if n}
    if lost:
        text += ". Dropped: " + ", ".join(f"{key} {n}" for key, n in lost.items())
    return text + "."


def _pairs_markdown(experiment: Experiment, system: System, put, plots) -> list[str]:
    name = f"pairs-{_slug(system.label)}"
    rows_langs, cols_langs = system.pair_rows, system.pair_cols
    matrix = [[_mean_or_nan(system.pairs[row].get(col)) for col in cols_langs] for row in rows_langs]
    title = f"{experiment.task} · {system.label} · {experiment.primary} ({experiment.split})"
    put(f"{experiment.slug}/{name}.csv", _matrix_csv(rows_langs, cols_langs, matrix))
    put(f"{experiment.slug}/{name}.png", plots.heatmap_png(matrix, rows_langs, cols_langs, title=title,
                                                           value_label=f"{experiment.primary} (%)"))
    rows = [[row, *map(_number, values)] for row, values in zip(rows_langs, matrix, strict=True)]
    return [f"### Language pairs: {system.label} (rows: first-segment language, columns: second)", "",
            _markdown_table(["", *system.pair_cols], rows), "", f"![{title}]({experiment.slug}/{name}.png)"]


def _delta_pairs_markdown(experiment: Experiment, comparison: Comparison, settings: BootstrapSettings,
                          put, plots) -> list[str]:
    rows_langs = list(comparison.pairs)
    cols_langs = list(dict.fromkeys(col for cols in comparison.pairs.values() for col in cols))
    cells = [[comparison.pairs[row].get(col) for col in cols_langs] for row in rows_langs]
    deltas = [[cell.delta if cell else math.nan for cell in row] for row in cells]
    marks = [["*" if cell and cell.significant else "" for cell in row] for row in cells]
    p_values = [[cell.p_value if cell and cell.p_value is not None else math.nan for cell in row]
                for row in cells]
    name = f"pairs-delta-{_slug(comparison.system)}"
    title = (f"{experiment.task} · {comparison.system} − {comparison.baseline} · Δ {experiment.primary} "
             f"(* p < {settings.alpha:g})")
    put(f"{experiment.slug}/{name}.csv", _matrix_csv(rows_langs, cols_langs, deltas))
    put(f"{experiment.slug}/{name}-p.csv", _matrix_csv(rows_langs, cols_langs, p_values))
    put(f"{experiment.slug}/{name}.png", plots.heatmap_png(deltas, rows_langs, cols_langs, title=title,
                                                           value_label=f"Δ {experiment.primary} (points)",
                                                           diverging=True, marks=marks))
    rows = [[row, *map(_format_delta, line)] for row, line in zip(rows_langs, cells, strict=True)]
    return [f"### Δ language pairs: {comparison.system} − {comparison.baseline} "
            f"(* p < {settings.alpha:g})", "", _markdown_table(["", *cols_langs], rows), "",
            f"![{title}]({experiment.slug}/{name}.png)"]


def _probe_markdown(probes: list[ProbeRun], put, plots) -> str:
    labels = _path_labels([probe.path for probe in probes])
    header = ["run", "language", *PROBE_METRICS, "n_sentences"]
    rows = [[labels[probe.path], lang, *[_number(values.get(name), ".3f") for name in PROBE_METRICS],
             _number(values.get("n_sentences"), ".0f")]
            for probe in probes for lang, values in probe.metrics.items()]
    put("probe.csv", _csv(header, [[labels[probe.path], lang, *[values.get(name, "") for name in header[2:]]]
                                   for probe in probes for lang, values in probe.metrics.items()]))
    table = {labels[probe.path]: probe.metrics for probe in probes}
    put("probe.png", plots.probe_png(table, PROBE_METRICS))
    return "\n".join(["## Structural probes per language", "", _markdown_table(header, rows), "",
                      "![structural probes](probe.png)"])


def _path_labels(paths: list[Path]) -> dict[Path, str]:
    names = [path.name for path in paths]
    return {path: path.name if names.count(path.name) == 1 else str(path) for path in paths}


# --------------------------------------------------------------------------- formatting helpers


def _markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _format_stat(stat: Stat | None) -> str:
    if stat is None:
        return "–"
    return f"{stat.mean:.1f}" if stat.std is None else f"{stat.mean:.1f} ± {stat.std:.1f}"


def _signed(value: float | None) -> str:
    return "–" if value is None else f"{value:+.1f}"


def _format_delta(cell: Delta | None) -> str:
    return "–" if cell is None else _signed(cell.delta) + ("*" if cell.significant else "")


def _number(value: float | None, spec: str = ".1f") -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


def _mean_or_nan(stat: Stat | None) -> float:
    return stat.mean if stat else math.nan


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")


def _csv_value(value: float | None) -> str:
    return "" if value is None or math.isnan(value) else f"{value:.4f}"


def _csv(header: list[str], rows: list[list]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


def _per_language_csv(systems: list[System], languages: list[str]) -> str:
    header = ["system", "variant", "model", "seeds"]
    for name in [*languages, "average", "transfer_gap"]:
        header += [name, f"{name}_std"]
    rows = []
    for system in systems:
        stats = [system.per_language.get(lang) for lang in languages] + [system.average, system.transfer_gap]
        row = [system.label, system.variant, system.model, len(system.runs)]
        for stat in stats:
            row += [_csv_value(stat.mean if stat else None), _csv_value(stat.std if stat else None)]
        rows.append(row)
    return _csv(header, rows)


def _deltas_csv(comparisons: list[Comparison], languages: list[str]) -> str:
    header = ["system", "baseline"]
    for lang in languages:
        header += [lang, f"{lang}_p"]
    rows = []
    for comparison in comparisons:
        row = [comparison.system, comparison.baseline]
        for lang in languages:
            cell = comparison.per_language.get(lang)
            row += [_csv_value(cell.delta if cell else None), _csv_value(cell.p_value if cell else None)]
        rows.append([*row, _csv_value(comparison.average), _csv_value(comparison.transfer_gap)])
    return _csv([*header, "average", "transfer_gap"], rows)


def _matrix_csv(rows: list[str], cols: list[str], matrix: list[list[float]]) -> str:
    return _csv(["row\\col", *cols], [[row, *map(_csv_value, values)] for row, values in zip(rows, matrix,
                                                                                             strict=True)])


def _report_json(report: Report) -> dict:
    from xsyn import __version__

    return {
        "xsyn_version": __version__,
        "bootstrap": {"test": "one-sided paired bootstrap: p is the share of resamples of the shared "
                              "examples in which the seed-mean difference is zero or reversed",
                      "resamples": report.bootstrap.resamples, "seed": report.bootstrap.seed,
                      "alpha": report.bootstrap.alpha},
        "experiments": [_experiment_json(experiment) for experiment in report.experiments],
        "probes": [{"run": str(probe.path), "per_language": probe.metrics} for probe in report.probes],
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
            "pairs": {row: {col: _delta_json(cell) for col, cell in cols.items()}
                      for row, cols in comparison.pairs.items()},
        } for comparison in experiment.comparisons],
        "notes": list(dict.fromkeys(experiment.notes)),
    }


def _system_json(system: System) -> dict:
    first = system.runs[0].results
    return {
        "label": system.label, "variant": system.variant, "model": system.model,
        "runs": [{"path": str(run.path), "seed": run.seed} for run in system.runs],
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
            "paired_examples": cell.paired_examples, "unpaired_examples": cell.unpaired_examples}


# --------------------------------------------------------------------------- command


@main.command(name="report")
@click.argument("run_dirs", nargs=-1, required=True,
                type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--baseline", "baseline_dirs", multiple=True,
              type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="A baseline run directory (repeat for its seeds) or a folder holding them.")
@click.option("--output-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("xsyn-report"),
              show_default=True, help="Where report.md, report.json, the CSVs and PNGs go.")
@click.option("--resamples", type=click.IntRange(min=1), default=DEFAULT_RESAMPLES, show_default=True,
              help="Bootstrap resamples per language or pair.")
@click.option("--bootstrap-seed", type=int, default=DEFAULT_BOOTSTRAP_SEED, show_default=True)
@click.option("--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=DEFAULT_ALPHA,
              show_default=True, help="Significance level of the marks.")
def report_command(run_dirs: tuple[Path, ...], baseline_dirs: tuple[Path, ...], output_dir: Path,
                   resamples: int, bootstrap_seed: int, alpha: float) -> None:
    """Tables over runs and seeds, deltas against a baseline with significance, and heatmaps.

    \b
    Example:
      xsyn report runs/pawsx/gat-seed* --baseline runs/pawsx/none-seed1 \\
          --baseline runs/pawsx/none-seed2 --output-dir reports/pawsx
    """
    try:
        report = build_report(run_dirs, baseline_dirs, BootstrapSettings(resamples, bootstrap_seed, alpha))
        written = write_report(report, output_dir)
    except (ReportError, OutputError) as err:
        raise click.ClickException(str(err)) from None
    click.echo(f"wrote {len(written)} files to {output_dir}; start with {output_dir / 'report.md'}")
