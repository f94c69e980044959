"""Where syntax helps, measured: each system's gain over the baseline per language, read against the
language's family, its syntactic distance from the source, and the parser's LAS (`xsyn report --analysis`).

`analyse(report, AnalysisSettings(names=("family", "typology", "parser")))` returns `Analysis` objects:
numbers and a one-line finding, no rendering (`findings_render` writes markdown and charts from them;
report.json holds them as they are). Per comparison of a system with the baseline:

- **family** (Ahmad et al. 2021, Figure 4): the gain on each target language (the source left out),
  grouped by its URIEL family; a family whose reported languages fall in several branches is split
  into them (Indo-European.Germanic, Indo-European.Italic, ...). Groups run from the syntactically
  closest to the source to the most distant (mean URIEL distance), so the left and right halves of the
  chart are the comparison the paper reads.
- **typology**: gain against the URIEL syntactic distance from the source (`uriel`), the source left
  out; for a language-pair matrix, each pair's gain against the distance between its two languages.
  Spearman's rho with a permutation p-value (`xsyn.metrics.correlation`; seed and count recorded).
- **parser**: gain against the parser's LAS per language (`xsyn parser-quality --output` JSON, or a file
  of LAS per language), the source included: its parses feed the model too.

A gain's error is its sample sd over seeds: of the per-seed differences where both systems have the
same seeds, else sqrt(sd_system^2 + sd_baseline^2); none with fewer than 2 seeds a side. A language
that cannot be placed (URIEL lacks it, no LAS given) is named in `left_out`, never dropped silently.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from xsyn.data.cards import load_card
from xsyn.report.aggregate import Comparison, Experiment, Report, Stat, System, by_seed
from xsyn.report.constant_predictions import AlikeRuns
from xsyn.report.runs import ReportError
from xsyn.utils.errors import XsynError
from xsyn.utils.schema import did_you_mean

if TYPE_CHECKING:  # xsyn.metrics loads numpy: `xsyn report --help` must not
    from xsyn.metrics.correlation import Correlation

DEFAULT_PERMUTATIONS = 10000
DEFAULT_PERMUTATION_SEED = 20210801


@dataclass(frozen=True)
class Point:
    label: str  # a language (de) or a pair (en-de)
    gain: float  # system mean minus baseline mean, in points
    error: float | None  # sd of the gain over seeds
    x: float | None = None  # distance or LAS; None for family
    group: str | None = None  # family


@dataclass
class Analysis:
    """One analysis of one system against the baseline in one experiment."""

    name: str  # family, typology or parser
    experiment: str  # the report section's title, e.g. "pawsx · test"
    system: str
    baseline: str
    source_lang: str
    unit: str  # what the points are: "languages" or "language pairs"
    x_label: str | None
    points: list[Point]
    finding: str  # one line
    correlation: Correlation | None = None
    groups: dict[str, list[str]] = field(default_factory=dict)  # family -> its languages, closest first
    left_out: list[str] = field(default_factory=list)  # "ja: URIEL has no syntax vector for it"
    alike: dict[str, list[str]] = field(default_factory=dict)  # point -> runs that predicted alike there


@dataclass(frozen=True)
class AnalysisSettings:
    names: tuple[str, ...] = ()
    parser_scores: dict[str, float] | None = None  # LAS per language
    parser_source: str = "the LAS file"  # named where a language has no LAS
    permutations: int = DEFAULT_PERMUTATIONS
    seed: int = DEFAULT_PERMUTATION_SEED
    alpha: float = 0.05


@dataclass(frozen=True)
class _Gains:
    """A comparison's gains with what the analyses need around them."""

    experiment: Experiment
    comparison: Comparison
    system: System
    baseline: System
    settings: AnalysisSettings

    @property
    def source(self) -> str:
        return self.system.source_lang

    def unknown_to_uriel(self, name: str, x_label: str | None) -> list[Analysis]:
        """The analysis of a task whose card says its languages are artificial: no points, the reason."""
        try:
            artificial = load_card(self.experiment.task).artificial_languages
        except XsynError:  # a card the report cannot find: its languages are taken as real ones
            return []
        if not artificial:
            return []
        languages = list(self.comparison.per_language)
        return [self.analysis(name, "languages", x_label, [],
                              f"no {name} analysis: {self.experiment.task}'s languages are artificial "
                              f"({', '.join(languages)}), and URIEL has none of them",
                              left_out=[f"{lang}: an artificial language" for lang in languages])]

    def source_left_out(self, why: str) -> list[str]:
        return [f"{self.source}: {why}"] if self.source in self.comparison.per_language else []

    def analysis(self, name: str, unit: str, x_label: str | None, points: list[Point], finding: str,
                 **more) -> Analysis:
        title = " · ".join([self.experiment.task, self.experiment.split])
        alike = _alike_points(points, self.system, self.baseline)
        if alike:
            finding += (f" ({', '.join(alike)}: a run there predicted the same for every example, which alone can make "
                        "a gain)")
        return Analysis(name, title, self.comparison.system, self.comparison.baseline, self.source, unit, x_label,
                        points, finding, alike=alike, **more)

    def language_points(self, include_source: bool) -> list[Point]:
        return [Point(lang, cell.delta, gain_error(self.system.per_language[lang], self.baseline.per_language[lang],
                                                   self.system, self.baseline))
                for lang, cell in self.comparison.per_language.items() if include_source or lang != self.source]

    def pair_points(self) -> list[Point]:
        return [Point(f"{row}-{col}", cell.delta, gain_error(self.system.pairs[row][col],
                                                             self.baseline.pairs[row][col], self.system,
                                                             self.baseline))
                for row, cols in self.comparison.pairs.items() for col, cell in cols.items()]


def _alike_points(points: list[Point], system: System, baseline: System) -> dict[str, list[str]]:
    """Each point fed by a run that predicted the same for every example there, naming the run."""
    alike, found = AlikeRuns([system, baseline]), {}
    for point in points:
        row, _, col = point.label.partition("-")
        keys = [point.label, row] if row == col else [point.label]  # results.json keys the diagonal by language
        runs = alike.at([system.label, baseline.label], keys)
        if runs:
            found[point.label] = [f"{run.system}, seed {run.seed}, predicted "
                                  + "; ".join(run.where[key] for key in keys if key in run.where) for run in runs]
    return found


def analyse(report: Report, settings: AnalysisSettings) -> list[Analysis]:
    """Every requested analysis of every comparison in the report, in the report's order."""
    unknown = [name for name in settings.names if name not in ANALYSES]
    if unknown:
        raise ReportError(f"--analysis {unknown[0]}: unknown analysis; choose from {', '.join(ANALYSES)}")
    if "parser" in settings.names and settings.parser_scores is None:
        raise ReportError("--analysis parser needs the parser's LAS per language: pass --parser-quality FILE "
                          "(the JSON `xsyn parser-quality --output` writes, or lines of `lang LAS`)")
    if "parser" in settings.names:
        _check_parser_languages(report, settings)
    if settings.names and not any(experiment.comparisons for experiment in report.experiments):
        apart = [experiment for experiment in report.experiments if experiment.baseline and not experiment.systems]
        raise ReportError(f"--analysis {','.join(settings.names)} reads gains over a baseline, and no run has one: "
                          + (f"the --baseline runs are of {_names(apart)}, the runs of "
                             f"{_names([e for e in report.experiments if e.systems])}; give baseline runs of the runs' "
                             "task, split and metric" if apart else "give the baseline's runs with --baseline"))
    found = []
    for experiment in report.experiments:
        systems = {system.label: system for system in experiment.systems}
        for comparison in experiment.comparisons:
            gains = _Gains(experiment, comparison, systems[comparison.system], experiment.baseline, settings)
            for name in settings.names:
                found += ANALYSES[name](gains)
    return found


def _names(experiments: Sequence[Experiment]) -> str:
    return ", ".join(f"{experiment.task}/{experiment.split}/{experiment.metric}" for experiment in experiments)


def _check_parser_languages(report: Report, settings: AnalysisSettings) -> None:
    """The LAS file's languages against the runs': none in common is an error, each one no run has a warning
    (a misspelt code would otherwise leave its language out with no word of why)."""
    scores = settings.parser_scores or {}
    where = getattr(scores, "where", {})
    known = sorted({lang for experiment in report.experiments for system in (*experiment.systems, experiment.baseline)
                    if system is not None for lang in system.languages})
    strangers = [lang for lang in scores if lang not in known]
    if strangers and len(strangers) == len(scores):
        raise ReportError(f"{settings.parser_source}: none of its languages ({', '.join(strangers)}) is one a run has "
                          f"({', '.join(known)}): give the LAS of the runs' languages, by the codes their results use"
                          + did_you_mean(strangers[0], known))
    for lang in strangers:
        logging.getLogger(__name__).warning(f"{where.get(lang, settings.parser_source)}: LAS for {lang}, a language "
                                            f"no run has (left out){did_you_mean(lang, known)}")


def gain_error(system_stat: Stat, baseline_stat: Stat, system: System, baseline: System) -> float | None:
    """Sample sd over seeds of a gain (see the module's docstring); None with fewer than 2 seeds a side."""
    ours, theirs = by_seed(system, system_stat), by_seed(baseline, baseline_stat)
    if set(ours) == set(theirs) and len(ours) > 1:
        return Stat.of([ours[seed] - theirs[seed] for seed in ours]).std
    if system_stat.std is None or baseline_stat.std is None:
        return None
    return math.hypot(system_stat.std, baseline_stat.std)


# --------------------------------------------------------------------------- the analyses


def family_analysis(gains: _Gains) -> list[Analysis]:
    from xsyn.report.uriel import load_uriel

    artificial = gains.unknown_to_uriel("family", None)
    if artificial:
        return artificial
    uriel = load_uriel()
    points, left_out = [], gains.source_left_out("the source language, not a transfer target")
    paths = {}
    for point in gains.language_points(include_source=False):
        path = uriel.family_path(point.label)
        if path is None:
            left_out.append(f"{point.label}: URIEL has no family for it")
        else:
            paths[point.label] = path
            points.append(point)
    names = _family_names(paths)
    points = [Point(point.label, point.gain, point.error, group=names[point.label]) for point in points]
    groups: dict[str, list[str]] = {}
    for point in sorted(points, key=lambda p: _closeness(uriel, gains.source, names, p.group)):
        groups.setdefault(point.group, []).append(point.label)
    by_label = {point.label: point for point in points}
    points = [by_label[lang] for members in groups.values() for lang in members]
    means = {group: math.fsum(by_label[lang].gain for lang in members) / len(members)
             for group, members in groups.items()}
    finding = (f"mean gain by family, syntactically closest to {gains.source} first: "
               + ", ".join(f"{group} {mean:+.1f} ({', '.join(groups[group])})" for group, mean in means.items())
               if groups else "no language to group by family")
    return [gains.analysis("family", "languages", None, points, finding, groups=groups, left_out=left_out)]


def _family_names(paths: dict[str, tuple[str, ...]]) -> dict[str, str]:
    """Each language's group: its outermost family, split into branches where the family's languages
    here fall in more than one (Ahmad et al.'s IE.Germanic, IE.Romance, ...)."""
    branches: dict[str, set[str]] = {}
    for path in paths.values():
        branches.setdefault(path[0], set()).add(path[1] if len(path) > 1 else path[0])
    return {lang: (f"{path[0]}.{path[1]}" if len(branches[path[0]]) > 1 and len(path) > 1 else path[0])
            for lang, path in paths.items()}


def _closeness(uriel, source: str, names: dict[str, str], group: str) -> tuple:
    """Sort key of a group: the mean syntactic distance of its languages from the source, then its name."""
    distances = [uriel.syntactic_distance(source, lang) for lang, name in names.items() if name == group]
    known = [d for d in distances if d is not None]
    return (0, math.fsum(known) / len(known), group) if known else (1, 0.0, group)


def typology_analysis(gains: _Gains) -> list[Analysis]:
    from xsyn.report.uriel import load_uriel

    artificial = gains.unknown_to_uriel("typology", f"URIEL syntactic distance from {gains.source}")
    if artificial:
        return artificial
    uriel = load_uriel()
    found = []
    languages = _placed(gains.language_points(include_source=False),
                        lambda point: uriel.syntactic_distance(gains.source, point.label), "URIEL lacks it")
    what = f"syntactic distance from {gains.source}"
    found.append(_correlated(gains, "typology", "languages", f"URIEL {what}", what, *languages,
                             gains.source_left_out("the source language, distance 0 by definition")))
    if gains.comparison.pairs:
        pairs = _placed(gains.pair_points(), lambda point: uriel.syntactic_distance(*_pair(point.label)),
                        "URIEL lacks one of its languages")
        what = "syntactic distance between the pair's languages"
        found.append(_correlated(gains, "typology", "language pairs", f"URIEL {what}", what, *pairs))
    return found


def _pair(label: str) -> tuple[str, str]:
    row, col = label.split("-", 1)
    return row, col


def parser_analysis(gains: _Gains) -> list[Analysis]:
    scores = gains.settings.parser_scores or {}
    placed = _placed(gains.language_points(include_source=True), lambda point: scores.get(point.label),
                     f"no LAS for it in {gains.settings.parser_source}")
    return [_correlated(gains, "parser", "languages", "parser LAS", "the parser's LAS", *placed)]


def _placed(points: Sequence[Point], place: Callable[[Point], float | None],
            why_not: str) -> tuple[list[Point], list[str]]:
    """The points with their x from `place`, and the labels it cannot place, each with `why_not`."""
    placed, left_out = [], []
    for point in points:
        x = place(point)
        if x is None:
            left_out.append(f"{point.label}: {why_not}")
        else:
            placed.append(Point(point.label, point.gain, point.error, x))
    return placed, left_out


def _correlated(gains: _Gains, name: str, unit: str, x_label: str, what: str, points: list[Point],
                left_out: list[str], also_left_out: Sequence[str] = ()) -> Analysis:
    from xsyn.metrics.correlation import spearman_permutation

    settings = gains.settings
    correlation = spearman_permutation([point.x for point in points], [point.gain for point in points],
                                       settings.permutations, settings.seed)
    return gains.analysis(name, unit, x_label, points, trend_finding(correlation, what, unit, settings.alpha),
                          correlation=correlation, left_out=[*also_left_out, *left_out])


def trend_finding(correlation: Correlation, what: str, unit: str, alpha: float) -> str:
    """The finding, worded as its test allows: a direction only where p < alpha (`gain rises with syntactic
    distance from en: rho = 0.52, p = 0.04, 14 languages`); else no evidence of one, and where the points are
    too few for any ordering to reach alpha (3 languages: 6 pairings, p >= 1/3), that instead."""
    if correlation.rho is None:
        return f"no rank correlation of gain with {what}: {correlation.reason}"
    p = correlation.p_value
    figures = f"rho = {correlation.rho:.2f}, p = {p:.2f}" if p >= 0.01 else f"rho = {correlation.rho:.2f}, p = {p:.1g}"
    figures += f", {correlation.n} {unit}"
    if p < alpha:
        direction = "rises" if correlation.rho > 0 else "falls"
        return f"gain {direction} with {what}: {figures}"
    smallest = smallest_p(correlation)
    if smallest >= alpha:
        return (f"too few {unit} to test whether gain changes with {what}: with {correlation.n}, no ordering "
                f"reaches p < {alpha:g} (the smallest p is {smallest:.2g}); {figures}")
    return f"no evidence that gain changes with {what} (p >= {alpha:g}): {figures}"


def smallest_p(correlation: Correlation) -> float:
    """The smallest p-value the permutation test can give over `n` points: the two perfectly (anti-)ordered
    pairings of all n! where the test is exact (ties only raise it), 1 / (permutations + 1) otherwise."""
    if correlation.exact:
        return min(1.0, 2 / math.factorial(correlation.n))
    return 1 / (correlation.permutations + 1)


ANALYSES: dict[str, Callable[[_Gains], list[Analysis]]] = {
    "family": family_analysis,
    "typology": typology_analysis,
    "parser": parser_analysis,
}


class ParserScores(dict):
    """LAS per language ({lang: LAS}), with where each was read (`where[lang]`: "file:line" or "file: lang")."""

    def __init__(self, source: str):
        super().__init__()
        self.source, self.where = source, {}

    def add(self, lang: str, value, where: str) -> None:
        if lang in self:
            raise ReportError(f"{where}: a second LAS for {lang} (the first: {self.where[lang]}); give each "
                              "language once")
        self[lang], self.where[lang] = _las(value, where), where

    def checked(self) -> ParserScores:
        """The scores, refused where there are none, or where they are not all on one scale (0-1 or 0-100)."""
        if not self:
            raise ReportError(f"{self.source}: no LAS in it; give one line `lang LAS` per language, or the JSON "
                              "`xsyn parser-quality --output` writes")
        percent = [lang for lang, value in self.items() if value > 1]
        shares = [lang for lang, value in self.items() if 0 < value <= 1]
        if percent and shares:
            raise ReportError(f"{self.where[shares[0]]}: LAS {self[shares[0]]:g} is a share (0-1), and "
                              f"{self.where[percent[0]]}: LAS {self[percent[0]]:g} a percentage (0-100): give every "
                              "LAS on one scale")
        return self


def read_parser_scores(path) -> ParserScores:
    """LAS per language from `xsyn parser-quality --output` JSON ({lang: {"las": ...}}), a JSON object
    {lang: LAS}, or a text file of `lang LAS` lines (comma, tab or space; `#` comments, a header line
    allowed). A bad entry (not a number, out of 0-100, a language twice, shares mixed with percentages) or a file
    without any is an error naming the file and line or key."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ReportError(f"{path}: cannot be read as text ({err}); pass the JSON `xsyn parser-quality --output` "
                          "writes, or lines of `lang LAS`") from None
    if text.lstrip()[:1] in ("{", "["):
        return _json_scores(path, text).checked()
    scores = ParserScores(str(path))
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split("#", 1)[0].replace(",", " ").split()
        if not fields or (number == 1 and len(fields) == 2 and not _is_number(fields[1])):
            continue  # a blank line, a comment or the header
        if len(fields) != 2:
            raise ReportError(f"{path}:{number}: expected `lang LAS`, found {line.strip()!r}")
        scores.add(fields[0], fields[1], f"{path}:{number}")
    return scores.checked()


def _json_scores(path, text: str) -> ParserScores:
    """{lang: {"las": ...}} (parser-quality's output) or {lang: LAS}."""
    try:
        pairs = json.loads(text, object_pairs_hook=lambda pairs: pairs)  # a key given twice is seen
    except json.JSONDecodeError as err:
        raise ReportError(f"{path}:{err.lineno}: not valid JSON ({err.msg}); pass the file "
                          "`xsyn parser-quality --output` writes") from None
    if text.lstrip().startswith("["):  # (the hook makes an object a list of pairs too)
        raise ReportError(f"{path}: expected a JSON object {{lang: LAS}} or {{lang: {{\"las\": ...}}}}, found a list")
    scores = ParserScores(str(path))
    for lang, value in pairs:
        fields = dict(value) if isinstance(value, list) and all(isinstance(v, tuple) for v in value) else None
        scores.add(str(lang), fields.get("las") if fields is not None else value, f"{path}: {lang}")
    return scores


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _las(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)) or not _is_number(str(value)) \
            or not math.isfinite(float(value)):
        raise ReportError(f"{where}: LAS {value!r} is not a number; give each language's LAS as a number "
                          "(parser-quality's 0-1, or percent)")
    if not 0 <= float(value) <= 100:
        raise ReportError(f"{where}: LAS {value} is out of range; give a share from 0 to 1 (parser-quality's) or a "
                          "percentage from 0 to 100")
    return float(value)
