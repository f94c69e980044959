"""An experiment file: a grid of runs (tasks x models x variants x settings x seeds), the evaluations
of each, the baseline, and where the runs go. Every cell of the grid is a normal run folder.

    title = "Syntax-augmented mBERT, Table 2"
    tasks = ["pawsx"]
    variants = ["none", "gat"]          # the baseline among them
    seeds = [1, 2, 3]
    models = ["bert-base-multilingual-cased"]
    baseline = "none"
    runs_dir = "experiments/pawsx"      # default: experiments/<file name>
    paper = "ahmad2021"                 # published scores shown beside ours

    [settings]                          # every cell: run or model settings, as `--set`
    [grid]                              # lists: a cell per combination, every variant but the baseline
    [grid.gat]                          # lists for one variant only, e.g. gat_delta = [1, 2, 4]
    [search]                            # lists searched for EVERY variant, the best point chosen on dev
    [search.sla]                        # ... for one variant only, e.g. sla_threshold = [3, 4]
    [evaluation]                        # split ("test" or a list), generalized, langs
    [task.pawsx]                        # per task: settings = {...}, data_dir, split, generalized, langs,
                                        #   models = [...], search = {...} (replaces [search] for the task)

A grid point is a system of its own in the report (gat_delta=1 beside gat_delta=2). A search point is
not: the papers tune learning rate, epochs or a threshold on dev, so for each task, model, variant and
grid point the report keeps the search point with the best mean dev score over the seeds
(`xsyn.experiments.selection`) and reports that point's runs; the validation split is evaluated for it.

Cells are ordered task, seed, model, variant, grid point: a run that stops early has the first
seed of every system of the first task, which already makes a table.
"""

from __future__ import annotations

import difflib
import fnmatch
import itertools
import json
import re
import tomllib
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from xsyn.data.cards import TaskCard, list_tasks, load_card
from xsyn.models.defaults import TINY
from xsyn.models.variants import VARIANTS
from xsyn.run.settings import MODEL_SETTINGS, RunConfig, resolve, split_settings
from xsyn.utils.errors import XsynError
from xsyn.utils.schema import Invalid, SchemaError, at_least, load, one_of, strict, validated_field

RECIPE_PACKAGE = "xsyn.experiments"
RECIPE_FOLDER = "recipes"
CELL_SETTINGS = ("seed", "model", "variant", "output_dir")  # what each cell sets for itself
SYNTH_VOCAB = "synth-vocab.txt"  # the synthetic benchmark's own vocabulary, for `tiny` on `synth`


class ExperimentError(SchemaError):
    """An experiment file that cannot run as written; the message names the file, the key and the fix."""


def _distinct(values: list) -> None:
    if not values:
        raise ValueError("must name at least one, e.g. [1, 2, 3]")
    if len(set(values)) != len(values):
        raise ValueError(f"names one entry twice: {values!r}")


def _check_lists(table: dict[str, Any], key: str, variants: list[str]) -> None:
    """A [grid] or [search] table: lists of values, for every variant or in a sub-table per variant."""
    for name, value in table.items():
        if isinstance(value, dict) and name not in variants:
            raise Invalid(f"{key}.{name}", f"{name!r} is not one of the variants ({', '.join(variants)})")
        for setting, values in (value if isinstance(value, dict) else {name: value}).items():
            here = f"{key}.{name}.{setting}" if isinstance(value, dict) else f"{key}.{name}"
            if not isinstance(values, list) or not values:
                raise Invalid(here, "expected a non-empty list of values, e.g. gat_delta = [1, 2, 4]")


@strict
@dataclass
class EvaluationTable:
    """`[evaluation]` (every task) or the evaluation keys of `[task.<name>]` (that task); unset keys inherit."""

    split: str | list[str] | None = None  # "test" (the default), "validation", or both
    generalized: bool | None = None
    langs: list[str] | None = None  # default: the task's languages


@strict
@dataclass
class TaskTable(EvaluationTable):
    """`[task.<name>]`: one task's own settings, data folder and evaluation."""

    settings: dict[str, Any] = field(default_factory=dict)
    data_dir: str | None = None
    models: list[str] | None = validated_field(lambda v: v is None or _distinct(v), default=None)
    search: dict[str, list | dict[str, list]] | None = None  # replaces the file's [search] for this task


@strict
@dataclass
class ExperimentFile:
    """The schema of an experiment file (the module docstring shows one)."""

    tasks: list[str] = validated_field([_distinct, one_of(list_tasks)])
    variants: list[str] = validated_field([_distinct, one_of(VARIANTS)])
    seeds: list[int] = validated_field([_distinct, at_least(0)])
    title: str | None = None
    description: str = ""
    models: list[str] | None = validated_field(lambda v: v is None or _distinct(v), default=None)
    baseline: str | None = None  # default: the first variant
    runs_dir: str | None = None
    paper: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    grid: dict[str, list | dict[str, list]] = field(default_factory=dict)  # systems compared
    search: dict[str, list | dict[str, list]] = field(default_factory=dict)  # tuned on dev, for every variant
    evaluation: EvaluationTable = field(default_factory=EvaluationTable)
    task: dict[str, TaskTable] = field(default_factory=dict)

    def validate_baseline(self) -> None:
        baseline = self.baseline or self.variants[0]
        if baseline not in self.variants:
            raise Invalid("baseline", f"{baseline!r} is not one of the variants ({', '.join(self.variants)})")
        if isinstance(self.grid.get(baseline), dict):
            raise Invalid(f"grid.{baseline}", "varies the baseline, and every system is compared with one "
                          "baseline: give the baseline fixed settings ([settings] or [task.<name>.settings])")

    def validate_grid_and_search(self) -> None:
        tables = [("grid", self.grid), ("search", self.search),
                  *((f"task.{name}.search", table.search) for name, table in self.task.items() if table.search)]
        for key, table in tables:
            _check_lists(table, key, self.variants)

    def validate_task_tables(self) -> None:
        for name in self.task:
            if name not in self.tasks:
                raise Invalid(f"task.{name}", f"names a task that is not in tasks ({', '.join(self.tasks)})")


@dataclass(frozen=True)
class Overrides:
    """Command-line options that apply to every cell."""

    data_dir: str | None = None  # a folder with one folder per task, as $XSYN_DATA_DIR
    model: str | None = None
    max_steps: int | None = None
    runs_dir: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)  # --set, as parse_overrides gives them

    def to_json(self) -> str:
        return json.dumps({"data_dir": self.data_dir, "model": self.model, "max_steps": self.max_steps,
                           "runs_dir": self.runs_dir, "settings": self.settings}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Overrides:
        return cls(**json.loads(text))


@dataclass(frozen=True)
class Evaluation:
    splits: tuple[str, ...]  # every split evaluated
    generalized: bool
    langs: tuple[str, ...]  # resolved: the task's languages when the file names none
    reported: tuple[str, ...] = ()  # the splits the report shows (the others only choose search points)


@dataclass(frozen=True)
class Cell:
    """One run of the grid: a finetune plus its evaluations, in `runs_dir/name`."""

    task: str
    variant: str
    model: str
    seed: int
    grid: tuple[tuple[str, Any], ...]  # the grid and search point: (setting, value), in the file's order
    name: str  # task/<variant>[-model][-setting=value...][-max_steps=N]-seed<seed> (model: several, or --model)
    searched: tuple[str, ...] = ()  # the settings of `grid` that are tuned on dev, not systems of their own

    @property
    def system(self) -> tuple[tuple[str, Any], ...]:
        """The grid point without the searched settings: what tells one system from another."""
        return tuple((key, value) for key, value in self.grid if key not in self.searched)


@dataclass
class Experiment:
    source: str  # what the user named: a recipe or a file
    path: Path
    name: str
    title: str
    description: str
    tasks: list[str]
    variants: list[str]
    seeds: list[int]
    models: list[str]
    baseline: str
    runs_dir: Path
    paper: str | None
    settings: dict[str, Any]  # checked, model settings under MODEL_SETTINGS (as `--set` gives them)
    variant_grid: dict[str, dict[str, list]]  # variant -> setting -> values (the baseline is never varied)
    variant_search: dict[str, dict[str, dict[str, list]]]  # task -> variant -> setting -> values (tuned on dev)
    evaluation: EvaluationTable
    task_options: dict[str, TaskTable]
    overrides: Overrides
    cards: dict[str, TaskCard]
    cells: list[Cell] = field(default_factory=list)

    def cell(self, name: str) -> Cell:
        for cell in self.cells:
            if cell.name == name:
                return cell
        close = difflib.get_close_matches(name, [c.name for c in self.cells], n=1)
        raise ExperimentError(f"{self.path}: no cell {name!r}" + (f"; did you mean {close[0]!r}?" if close else
                                                                  " (`xsyn experiment status` lists them)"))

    def select(self, patterns: tuple[str, ...] | list[str]) -> list[Cell]:
        """The cells whose names match any of the glob patterns (all cells without patterns), in order."""
        if not patterns:
            return list(self.cells)
        chosen = [cell for cell in self.cells if any(fnmatch.fnmatchcase(cell.name, p) for p in patterns)]
        if not chosen:
            raise ExperimentError(f"{self.path}: no cell matches {', '.join(patterns)} (`xsyn experiment status` "
                                  f"lists them, e.g. {self.cells[0].name})")
        return chosen

    def cell_dir(self, cell: Cell) -> Path:
        return self.runs_dir / cell.name

    def models_of(self, task: str) -> list[str]:
        """The task's models: its own `models`, else the file's (the command line's --model wins over both)."""
        if self.overrides.model:
            return [self.overrides.model]
        return list(self.task_options.get(task, TaskTable()).models or self.models)

    def searched(self, task: str) -> bool:
        return any(self.variant_search.get(task, {}).values())

    def evaluation_of(self, task: str) -> Evaluation:
        """The splits reported for the task (`reported`), and every split evaluated: with a search, the
        validation split as well, on which the search point is chosen."""
        own = self.task_options.get(task, TaskTable())
        split = own.split if own.split is not None else self.evaluation.split
        generalized = own.generalized if own.generalized is not None else self.evaluation.generalized
        langs = own.langs if own.langs is not None else self.evaluation.langs
        reported = ("test",) if split is None else (split,) if isinstance(split, str) else tuple(split)
        splits = reported if not self.searched(task) or "validation" in reported else ("validation", *reported)
        return Evaluation(splits, bool(generalized), tuple(langs or self.cards[task].languages), reported)

    def config(self, cell: Cell) -> RunConfig:
        """The cell's resolved settings: the card's paper hyperparameters, then the file's settings (every
        cell, then its task's), the grid point, and the command line's; checked as `xsyn finetune` checks."""
        card = self.cards[cell.task]
        task_options = self.task_options.get(cell.task, TaskTable())
        flags: dict[str, Any] = {"train_lang": card.train_languages[0]}
        where = str(self.path)
        for layer in (self.settings, split_settings(task_options.settings, where, f"task.{cell.task}", ExperimentError),
                      split_settings(dict(cell.grid), where, "grid", ExperimentError), self.overrides.settings):
            _merge(flags, layer)
        data_dir = (str(Path(self.overrides.data_dir) / cell.task) if self.overrides.data_dir
                    else task_options.data_dir)
        flags.update({"model": cell.model, "seed": cell.seed, "output_dir": str(self.cell_dir(cell))})
        if data_dir:
            flags["data_dir"] = data_dir
        if self.overrides.max_steps:
            flags["max_steps"] = self.overrides.max_steps
        if cell.task == "synth" and cell.model == TINY and "tokenizer" not in flags:
            flags["tokenizer"] = str(self.runs_dir / SYNTH_VOCAB)
        return resolve(cell.task, cell.variant, card, {}, flags)


def _merge(into: dict[str, Any], layer: dict[str, Any]) -> None:
    for key, value in layer.items():
        if key == MODEL_SETTINGS:
            into.setdefault(MODEL_SETTINGS, {}).update(value)
        else:
            into[key] = value


def recipe_names() -> list[str]:
    """The experiment files that come with xsyn (`xsyn experiment run NAME`)."""
    folder = resources.files(RECIPE_PACKAGE) / RECIPE_FOLDER
    return sorted(item.name.removesuffix(".toml") for item in folder.iterdir() if item.name.endswith(".toml"))


def find_experiment_file(source: str | Path) -> Path:
    """A path to a TOML file, or the name of a bundled recipe."""
    path = Path(source)
    if path.is_file():
        return path
    bundled = resources.files(RECIPE_PACKAGE) / RECIPE_FOLDER / f"{source}.toml"
    if bundled.is_file():
        return Path(str(bundled))
    names = recipe_names()
    close = difflib.get_close_matches(str(source), names, n=1)
    raise ExperimentError(f"{source}: no such file, and no bundled recipe of that name"
                          + (f" (did you mean {close[0]}?)" if close else "")
                          + f"; bundled recipes: {', '.join(names)}")


def load_experiment(source: str | Path, overrides: Overrides = Overrides()) -> Experiment:
    """Read, check and expand an experiment file; every cell's settings are resolved (and so checked) here,
    before anything runs."""
    path = find_experiment_file(source)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ExperimentError(f"{path}: not valid TOML ({err})") from None
    except OSError as err:
        raise ExperimentError(f"{path}: cannot be read ({err.strerror or err}); check its permissions") from None
    where = str(path)
    written = load(ExperimentFile, data, where, error=ExperimentError)
    settings = _file_settings(written.settings, where, "settings")
    for name, table in written.task.items():
        _file_settings(table.settings, where, f"task.{name}.settings")
    baseline = written.baseline or written.variants[0]
    grid = {key: values for key, values in written.grid.items() if not isinstance(values, dict)}
    per_variant = {key: table for key, table in written.grid.items() if isinstance(table, dict)}
    for key, table in [("grid", grid), *((f"grid.{v}", t) for v, t in per_variant.items())]:
        for name, values in table.items():
            split_settings({name: values[0]}, where, key, ExperimentError)  # cells check the other values
    variant_grid = {variant: {**grid, **per_variant.get(variant, {})} for variant in written.variants
                    if variant != baseline and (grid or variant in per_variant)}
    cards = {task: load_card(task) for task in written.tasks}
    variant_search = {task: _search(written.task[task].search if task in written.task and
                                    written.task[task].search is not None else written.search,
                                    written.variants, variant_grid, where,
                                    f"task.{task}.search" if task in written.task and
                                    written.task[task].search is not None else "search")
                      for task in written.tasks}
    name = path.stem
    runs_dir = Path(overrides.runs_dir or written.runs_dir or f"experiments/{name}").absolute()
    if overrides.data_dir:
        overrides = replace(overrides, data_dir=str(Path(overrides.data_dir).absolute()))
    overrides = replace(overrides, runs_dir=str(runs_dir))  # workers and cluster jobs may start elsewhere
    bundled = not Path(source).is_file()
    experiment = Experiment(
        source=str(source) if bundled else str(path.absolute()), path=path, name=name, title=written.title or name,
        description=written.description, tasks=written.tasks, variants=written.variants, seeds=written.seeds,
        models=[overrides.model] if overrides.model else written.models or [RunConfig.model],
        baseline=baseline, runs_dir=runs_dir, paper=written.paper, settings=settings, variant_grid=variant_grid,
        variant_search=variant_search, evaluation=written.evaluation, task_options=written.task, overrides=overrides,
        cards=cards)
    for task in written.tasks:
        _check_evaluation(experiment, task, where)
    experiment.cells = _cells(experiment)
    for cell in experiment.cells:
        try:
            experiment.config(cell)
        except XsynError as err:
            raise ExperimentError(f"{where}: cell {cell.name}: {err}") from None
    return experiment


def _file_settings(table: dict[str, Any], where: str, key: str) -> dict[str, Any]:
    """A settings table of the file, checked; what each cell sets itself is refused (it would be overridden)."""
    for name in table:
        if name in CELL_SETTINGS:
            raise ExperimentError(where, f"{key}.{name}", "each cell sets it from the file's seeds, models, "
                                  "variants and runs_dir; delete it here")
    return split_settings(table, where, key, ExperimentError)


def _cells(experiment: Experiment) -> list[Cell]:
    cells = []
    # the model is in the name when a task has several, or when the command line chose it (not the file's runs)
    several_models = (experiment.overrides.model is not None
                      or any(len(experiment.models_of(task)) > 1 for task in experiment.tasks))
    for task, seed in itertools.product(experiment.tasks, experiment.seeds):
        for model, variant in itertools.product(experiment.models_of(task), experiment.variants):
            searched = experiment.variant_search[task].get(variant, {})
            grid = {**experiment.variant_grid.get(variant, {}), **searched}
            for values in itertools.product(*grid.values()):
                point = tuple(zip(grid, values))
                parts = [variant, *([_slug(model)] if several_models else []),
                         *(f"{key}={_slug(json.dumps(value) if not isinstance(value, str) else value)}"
                           for key, value in point)]
                if experiment.overrides.max_steps:
                    parts.append(f"max_steps={experiment.overrides.max_steps}")
                cells.append(Cell(task, variant, model, seed, point, f"{task}/{'-'.join(parts)}-seed{seed}",
                                  tuple(searched)))
    return cells


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=,-]+", "_", text).strip("_")


def _check_evaluation(experiment: Experiment, task: str, where: str) -> None:
    card = experiment.cards[task]
    evaluation = experiment.evaluation_of(task)
    for split in evaluation.splits:
        if split not in ("validation", "test") or split not in card.splits:
            raise ExperimentError(f"{where}: split {split!r} for {task}: choose from "
                                  f"{', '.join(s for s in card.splits if s != 'train')}")
    unknown = [lang for lang in evaluation.langs if lang not in card.languages]
    if unknown:
        raise ExperimentError(f"{where}: langs for {task}: {', '.join(unknown)} not in the task's languages "
                              f"({', '.join(card.languages)})")
    if evaluation.generalized and len(card.segments) < 2:
        raise ExperimentError(f"{where}: generalized evaluation for {task}: it has one segment "
                              f"({card.segments[0]}), so there are no language pairs; set generalized = false")


def _search(table: dict[str, Any], variants: list[str], variant_grid: dict[str, dict[str, list]], where: str,
            key: str) -> dict[str, dict[str, list]]:
    """Variant -> setting -> values searched on dev: the table's lists for every variant (the baseline
    included: the papers tune its learning rate too), its sub-tables for one variant each."""
    shared = {name: values for name, values in table.items() if not isinstance(values, dict)}
    searched = {variant: {**shared, **table.get(variant, {})} for variant in variants}
    for variant, settings in searched.items():
        for name, values in settings.items():
            split_settings({name: values[0]}, where, key, ExperimentError)  # cells check the other values
        both = sorted(set(settings) & set(variant_grid.get(variant, {})))
        if both:
            raise ExperimentError(where, key, f"{', '.join(both)} is both in [grid] (systems compared) and searched "
                                  f"(tuned on dev) for {variant}; keep it in one of them")
    return {variant: settings for variant, settings in searched.items() if settings}
