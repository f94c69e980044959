"""Aggregation: runs grouped into experiments and systems, seed statistics, and deltas against
the baseline with their paired-bootstrap significance and the t-test over seeds."""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xsyn.metrics import get_metric, primary_name
from xsyn.report.runs import RESULTS_FILE, Key, ProbeRun, ReportError, Run, find_runs, read_per_example

DEFAULT_RESAMPLES = 1000
DEFAULT_BOOTSTRAP_SEED = 20210801
DEFAULT_ALPHA = 0.05
_CONSISTENCY_TOLERANCE = 0.01  # points: recomputed per-example score vs results.json

if TYPE_CHECKING:  # xsyn.metrics loads numpy: `xsyn report --help` must not
    from xsyn.metrics.seeds import SeedTest


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
    """System mean minus baseline mean, with its bootstrap p-value when per-example files allow one, and
    the t-test over seeds (`seed_test`; `seed_significant` at the report's alpha)."""

    delta: float
    p_value: float | None = None
    significant: bool = False
    paired_examples: int = 0
    unpaired_examples: int = 0
    seed_test: SeedTest | None = None
    seed_significant: bool = False


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
    average: float | None  # over the languages both have; None when they share none
    transfer_gap: float | None
    pairs: dict[str, dict[str, Delta]] = field(default_factory=dict)
    average_test: SeedTest | None = None  # t-test of the per-seed averages, where both cover the same languages
    average_seed_significant: bool = False


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
    analyses: list = field(default_factory=list)  # `findings.Analysis`, from `findings.analyse(report, ...)`


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
    run_keys = list(dict.fromkeys(run.experiment for run in runs))
    baseline_keys = list(dict.fromkeys(run.experiment for run in baseline_runs))
    for key in dict.fromkeys([*run_keys, *baseline_keys]):
        members = [run for run in runs if run.experiment == key]
        baselines = [run for run in baseline_runs if run.experiment == key]
        experiments.append(_experiment(key, members, baselines, bootstrap, run_keys, baseline_keys))
    return Report(experiments, [*probes, *baseline_probes], bootstrap)


def _experiment(key: tuple[str, str, str], runs: list[Run], baseline_runs: list[Run],
                bootstrap: BootstrapSettings, run_keys: list, baseline_keys: list) -> Experiment:
    task, split, metric = key
    try:
        primary = primary_name(metric)
    except ValueError as err:
        raise ReportError(f"{(runs or baseline_runs)[0].path / RESULTS_FILE}: {err}") from None
    notes = _parse_notes([*runs, *baseline_runs])
    several_parsers = len({run.settings().get("parser") for run in [*runs, *baseline_runs]}) > 1
    groups = _group_systems(runs)
    labels = _system_labels(list(groups))
    systems = [_system(_parser_named(labels[system], members, several_parsers), members)
               for system, members in groups.items()]
    baseline = None
    if baseline_runs:
        baseline_groups = _group_systems(baseline_runs)
        if len(baseline_groups) > 1:
            found = "; ".join(_system_labels(list(baseline_groups)).values())
            raise ReportError(f"the --baseline runs of {task}/{split}/{metric} are several systems "
                              f"({found}); give the seeds of one system as the baseline")
        ((variant, _, _), members), = baseline_groups.items()
        baseline = _system(_parser_named(f"{variant} (baseline)", members, several_parsers), members)
    elif baseline_keys:  # baselines were given, for other experiments only
        notes.append(f"the --baseline runs are of {_unlike(key, baseline_keys)} ({_names(baseline_keys)}), none of "
                     f"{'/'.join(key)}: no deltas (a baseline is compared with runs of its own task, split and "
                     "metric)")
    else:
        notes.append("no --baseline runs for this experiment: no deltas")
    if not runs:
        notes.append(f"only --baseline runs for {'/'.join(key)}"
                     + (f" (the runs are of {_unlike(key, run_keys)}: {_names(run_keys)})" if run_keys else "")
                     + ": no deltas")
    if baseline:
        twins = [system.label for system in systems if (system.variant, system.model) == (baseline.variant,
                                                                                         baseline.model)]
        if twins:
            notes.append(f"{', '.join(twins)}: the same variant and model as the baseline; if these are more "
                         "baseline seeds, give each with its own --baseline (a shell glob after --baseline "
                         "passes only its first match)")
    comparisons = ([_compare(system, baseline, metric, bootstrap, notes) for system in systems]
                   if baseline else [])
    return Experiment(task, split, metric, primary, systems, baseline, comparisons, notes)


def _parser_named(label: str, runs: list[Run], several_parsers: bool) -> str:
    """Where an experiment's runs used several parsers (gold against predicted trees), every label names its
    own, the baseline's too: `none (baseline, parser=gold)`, `gat (parser=udpipe:models)`."""
    shown = f"parser={runs[0].settings().get('parser')}"
    if not several_parsers or shown in label:
        return label
    return f"{label[:-1]}, {shown})" if label.endswith(")") else f"{label} ({shown})"


def _parse_notes(runs: list[Run]) -> list[str]:
    """Runs scored on other trees than they were trained on (`xsyn evaluate --parser`), said once each."""
    notes = []
    for run in runs:
        trained, tested = run.results.get("train_parser"), run.settings().get("parser")
        if trained and tested and trained != tested:
            notes.append(f"trained on the trees of parser {trained}, tested on those of parser {tested} "
                         f"(`xsyn evaluate --parser`): {run.path}")
    return notes


def _names(keys: list[tuple[str, str, str]]) -> str:
    return ", ".join("/".join(key) for key in keys)


def _unlike(key: tuple[str, str, str], others: list[tuple[str, str, str]]) -> str:
    """What sets `others` apart from `key`: "another task", "another split", ... ("other experiments" if mixed)."""
    for i, part in enumerate(("task", "split", "metric")):
        if all(other[i] != key[i] for other in others) and all(other[:i] == key[:i] for other in others):
            return f"another {part}"
    return "other experiments"


SystemKey = tuple[str, str, tuple[tuple[str, str], ...]]  # variant, model, the settings that tell it apart


def _group_systems(runs: list[Run]) -> dict[SystemKey, list[Run]]:
    """Runs grouped into systems: by variant and model, then by any setting on which runs of one
    variant and model differ (gat_delta, parser, learning_rate, ...); what is left are seeds."""
    by_model: dict[tuple[str, str], list[Run]] = {}
    for run in runs:
        by_model.setdefault(run.system, []).append(run)
    groups: dict[SystemKey, list[Run]] = {}
    for (variant, model), members in by_model.items():
        settings = [run.settings() for run in members]
        differing = sorted({key for one in settings for key in one
                            if any(other.get(key) != one.get(key) for other in settings)})
        for run, values in zip(members, settings):
            apart = tuple((key, json.dumps(values.get(key), sort_keys=True)) for key in differing)
            groups.setdefault((variant, model, apart), []).append(run)
    for members in groups.values():
        seeds: dict[Any, Path] = {}
        for run in members:
            if run.seed in seeds:
                raise ReportError(f"{seeds[run.seed]} and {run.path} are the same system with the same seed "
                                  f"({run.seed}); give each seed once")
            seeds[run.seed] = run.path
    return groups


def _system_labels(systems: list[SystemKey]) -> dict[SystemKey, str]:
    """The variant, then the model where a variant runs on several, then the settings that tell
    its systems apart: `gat`, `gat (gat_delta=2)`, `none (xlm-roberta-base)`."""
    models: dict[str, set[str]] = {}
    for variant, model, _ in systems:
        models.setdefault(variant, set()).add(model)
    labels = {}
    for variant, model, apart in systems:
        parts = ([model] if len(models[variant]) > 1 else []) + [f"{key}={_shown(value)}" for key, value in apart]
        labels[(variant, model, apart)] = f"{variant} ({', '.join(parts)})" if parts else variant
    return labels


def _shown(value_json: str) -> str:
    value = json.loads(value_json)
    return value if isinstance(value, str) else value_json


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
    from xsyn.metrics.seeds import seed_ttest

    average_test = None
    if set(system.languages) == set(baseline.languages):
        average = system.average.mean - baseline.average.mean
        average_test = seed_ttest(by_seed(system, system.average), by_seed(baseline, baseline.average))
        gap = (system.transfer_gap.mean - baseline.transfer_gap.mean
               if system.transfer_gap and baseline.transfer_gap else None)
    else:  # means are linear: the delta of averages over the shared languages from the seed means
        shared = list(per_language)
        average = _mean_of(system, shared) - _mean_of(baseline, shared) if shared else None
        gaps = [_gap_of(side, shared) for side in (system, baseline)]
        gap = gaps[0] - gaps[1] if None not in gaps else None
        notes.append(f"{system.label}: the avg and gap deltas are over the languages it and {baseline.label} "
                     f"both have: {', '.join(shared) or 'none, so no avg or gap delta'}")
    comparison = Comparison(system.label, baseline.label, per_language, average, gap, average_test=average_test,
                            average_seed_significant=bool(average_test and average
                                                          and average_test.significant(bootstrap.alpha)))
    for row, cols in system.pairs.items():
        for col in cols:
            if col in baseline.pairs.get(row, {}):
                comparison.pairs.setdefault(row, {})[col] = _delta(system, baseline, (row, col), metric,
                                                                   bootstrap, notes)
    return comparison


def by_seed(system: System, stat: Stat) -> dict:
    """{seed: value} of one of the system's seed statistics (its values follow the runs' order)."""
    return dict(zip((run.seed for run in system.runs), stat.values, strict=True))


def _mean_of(system: System, languages: list[str]) -> float:
    return math.fsum(system.per_language[lang].mean for lang in languages) / len(languages)


def _gap_of(system: System, languages: list[str]) -> float | None:
    others = [lang for lang in languages if lang != system.source_lang]
    if system.source_lang not in languages or not others:
        return None
    return system.per_language[system.source_lang].mean - _mean_of(system, others)


def _delta(system: System, baseline: System, key: Key, metric: str, bootstrap: BootstrapSettings,
           notes: list[str]) -> Delta:
    """Difference of seed means; p from the paired bootstrap over the examples all runs share."""
    from xsyn.metrics.base import MetricInputError  # (numpy)
    from xsyn.metrics.bootstrap import paired_bootstrap
    from xsyn.metrics.seeds import seed_ttest

    mean = _cell(system, key).mean - _cell(baseline, key).mean
    seed_test = seed_ttest(by_seed(system, _cell(system, key)), by_seed(baseline, _cell(baseline, key)))
    by_seeds = {"seed_test": seed_test, "seed_significant": seed_test.significant(bootstrap.alpha) and mean != 0}
    if seed_test.statistic is not None and math.isinf(seed_test.statistic):
        notes.append(f"{'-'.join(key)}: the difference is the same on every seed ({seed_test.n_system} seeds), so the "
                     "t-test's p is 0 (its limit at zero variance); more seeds would test it")
    runs = [*system.runs, *baseline.runs]
    missing = [run.per_example_file(key) for run in runs if not run.per_example_file(key).is_file()]
    if missing:
        notes.append(f"{'-'.join(key)}: no bootstrap test, {missing[0]} is missing")
        return Delta(mean, **by_seeds)
    loaded = [read_per_example(run, key) for run in runs]
    common = set(loaded[0][0]).intersection(*(set(ids) for ids, _, _ in loaded[1:]))
    every = set().union(*(set(ids) for ids, _, _ in loaded))
    if not common:
        notes.append(f"{'-'.join(key)}: no bootstrap test, the runs share no example id")
        return Delta(mean, unpaired_examples=len(every), **by_seeds)
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
                 len(common), len(every) - len(common), **by_seeds)


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
