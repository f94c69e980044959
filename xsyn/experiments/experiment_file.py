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
    [settings.parsers]                  # a parser per language over `parser`, e.g. sw = "udpipe:models/sw.udpipe"
    [grid]                              # lists: a cell per combination, every variant but the baseline
    [grid.gat]                          # lists for one variant only, e.g. gat_delta = [1, 2, 4]
    [search]                            # lists searched for EVERY variant, the best point chosen on dev
    [search.sla]                        # ... for one variant only, e.g. sla_threshold = [3, 4]
    [pretrain]                          # pre-train a syntax module on UD first (once per model): variants = ["gat"],
                                        #   recipe, and `xsyn pretrain-gat` settings (treebanks, treebank_dir, ...)
    [evaluation]                        # split ("test" or a list), generalized, langs
    [task.pawsx]                        # per task: settings = {...}, data_dir, split, generalized, langs,
                                        #   models = [...], variants = [...] (some of the file's),
                                        #   search = {...} (replaces [search] for the task)

A grid point is a system of its own in the report (gat_delta=1 beside gat_delta=2). A search point is
not: the papers tune learning rate, epochs or a threshold on dev, so for each task, model, variant and
grid point the report keeps the search point with the best mean dev score over the seeds
(`xsyn.experiments.selection`; the dev score each fine-tune kept its best checkpoint on) and reports that
point's runs.

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

from xsyn.data.cards import CardError, TaskCard, list_tasks, load_card
from xsyn.models.names import TINY
from xsyn.models.variants import pretraining_variant, variant_names
from xsyn.run.settings import MODEL_SETTINGS, ConfigError, RunConfig, missing_parser_file, resolve, split_settings
from xsyn.utils.io import not_utf8_at
from xsyn.utils.schema import Invalid, SchemaError, did_you_mean, distinct, load, one_of, strict, validated_field

RECIPE_PACKAGE = "xsyn.experiments"
RECIPE_FOLDER = "recipes"
PRETRAIN_FOLDER = "pretrain"  # under runs_dir: one pre-training per model ([pretrain])
SYNTH_VOCAB = "synth-vocab.txt"  # the synthetic benchmark's own vocabulary, for `tiny` on `synth`


class ExperimentError(SchemaError):
    """An experiment file that cannot run as written; the message names the file, the key and the fix."""


@strict
@dataclass(frozen=True)
class EvaluationOptions:
    """[evaluation], and a task's own evaluation keys: None is 'not set here' (a task's own value wins over the
    file's, the file's over the defaults: the test split, the task's languages, no language pairs)."""

    split: str | list[str] | None = None  # "test", "validation" or both
    generalized: bool | None = None  # every language pair of a cross-language task
    langs: list[str] | None = None  # default: the task's languages


@strict
@dataclass(frozen=True)
class TaskOptions(EvaluationOptions):
    """[task.<name>]: one task's own settings, data folder, models and variants (some of the file's), search."""

    settings: dict[str, Any] = field(default_factory=dict)
    data_dir: str | None = None
    models: list[str] | None = validated_field(distinct, default=None)
    variants: list[str] | None = validated_field(distinct, default=None)
    search: dict[str, Any] | None = None  # replaces the file's [search] for this task


@strict
@dataclass(frozen=True)
class ExperimentTable:
    """An experiment file's table as it is written; the tables of settings ([settings], [grid], [search],
    [pretrain]) are checked against the run settings and the variants when the cells are made."""

    tasks: list[str] = validated_field([distinct, one_of(list_tasks)])
    variants: list[str] = validated_field([distinct, one_of(variant_names)])
    seeds: list[int] = validated_field(distinct)
    title: str | None = None  # default: the file's name
    description: str = ""
    models: list[str] | None = validated_field(distinct, default=None)  # default: xsyn's default model
    baseline: str | None = None  # default: the first variant
    runs_dir: str | None = None  # default: experiments/<file name>
    paper: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    grid: dict[str, Any] = field(default_factory=dict)
    search: dict[str, Any] = field(default_factory=dict)
    pretrain: dict[str, Any] = field(default_factory=dict)
    evaluation: EvaluationOptions = field(default_factory=EvaluationOptions)
    task: dict[str, TaskOptions] = field(default_factory=dict)

    def validate_baseline(self) -> None:
        if self.baseline is not None and self.baseline not in self.variants:
            raise Invalid("baseline", f"{self.baseline!r} is not one of the variants ({', '.join(self.variants)})")

    def validate_task_options(self) -> None:
        baseline = self.baseline or self.variants[0]
        for task, options in self.task.items():
            if task not in self.tasks:
                raise Invalid(f"task.{task}", f"names a task that is not in tasks ({', '.join(self.tasks)})")
            if options.variants is not None and (baseline not in options.variants
                                                 or not set(options.variants) <= set(self.variants)):
                raise Invalid(f"task.{task}.variants", f"must be some of the file's variants "
                              f"({', '.join(self.variants)}), the baseline {baseline!r} among them")


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
    splits: tuple[str, ...]
    generalized: bool
    langs: tuple[str, ...]  # resolved: the task's languages when the file names none


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
    settings: dict[str, Any]
    variant_grid: dict[str, dict[str, list]]  # variant -> setting -> values (the baseline is never varied)
    variant_search: dict[str, dict[str, dict[str, list]]]  # task -> variant -> setting -> values (tuned on dev)
    evaluation: EvaluationOptions
    task_options: dict[str, TaskOptions]
    overrides: Overrides
    cards: dict[str, TaskCard]
    pretrain: dict[str, Any] = field(default_factory=dict)  # [pretrain]: the pre-training before fine-tuning
    cell_needs: dict[str, str] = field(default_factory=dict)  # cell name -> the missing input it needs (found once)
    cells: list[Cell] = field(default_factory=list)

    @property
    def missing_inputs(self) -> dict[str, list[str]]:
        """What is missing -> the cells that need it, in the cells' order."""
        grouped: dict[str, list[str]] = {}
        for name, missing in self.cell_needs.items():
            grouped.setdefault(missing, []).append(name)
        return grouped

    def pretrained_variants(self) -> list[str]:
        """The variants whose cells start from the pre-trained syntax module ([pretrain]'s `variants`, by default
        the one variant xsyn pre-trains: `pretraining_variant`)."""
        return list(self.pretrain.get("variants", [pretraining_variant().name])) if self.pretrain else []

    def pretrained(self, model: str) -> bool:
        """Whether `model`'s pre-training is finished: its folder holds every file of the pre-trained module (the
        pre-trained variant's `pretrained_files`, the last written last)."""
        folder = self.pretrain_dir(model)
        return all((folder / name).is_file() for name in pretraining_variant().pretrained_files)

    def pretrain_dir(self, model: str) -> Path:
        return self.runs_dir / PRETRAIN_FOLDER / slug(model)

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
        return list(self.options_of(task).models or self.models)

    def variants_of(self, task: str) -> list[str]:
        """The task's variants: its own `variants` (a paper's table without a row), else the file's."""
        return list(self.options_of(task).variants or self.variants)

    def options_of(self, task: str) -> TaskOptions:
        return self.task_options.get(task, TaskOptions())

    def searched(self, task: str) -> bool:
        return any(self.variant_search.get(task, {}).values())

    def evaluation_of(self, task: str) -> Evaluation:
        own, shared = self.options_of(task), self.evaluation
        split = _first_set(own.split, shared.split, "test")
        splits = (split,) if isinstance(split, str) else tuple(split)
        langs = tuple(_first_set(own.langs, shared.langs, None) or self.cards[task].languages)
        return Evaluation(splits, _first_set(own.generalized, shared.generalized, False), langs)

    def config(self, cell: Cell) -> RunConfig:
        """The cell's resolved settings: the card's paper hyperparameters, then the file's settings (every
        cell, then its task's), the grid point, and the command line's; checked as `xsyn finetune` checks
        them, reading no file (what they name is checked when the cell runs: `xsyn.run.resources`)."""
        return resolve(cell.task, cell.variant, self.cards[cell.task], {}, self._flags(cell))

    def _flags(self, cell: Cell) -> dict[str, Any]:
        card = self.cards[cell.task]
        task_options = self.options_of(cell.task)
        flags: dict[str, Any] = {"train_lang": card.train_languages[0]}
        for layer in (self.settings, task_options.settings, dict(cell.grid)):
            _merge(flags, split_settings(layer, str(self.path), "settings", ExperimentError))
        _merge(flags, self.overrides.settings)
        data_dir = (str(Path(self.overrides.data_dir) / cell.task) if self.overrides.data_dir
                    else task_options.data_dir)
        flags.update({"model": cell.model, "seed": cell.seed, "output_dir": str(self.cell_dir(cell))})
        if data_dir:
            flags["data_dir"] = data_dir
        if self.overrides.max_steps:
            flags["max_steps"] = self.overrides.max_steps
        if cell.task == "synth" and cell.model == TINY and "tokenizer" not in flags:
            flags["tokenizer"] = str(self.runs_dir / SYNTH_VOCAB)
        if cell.variant in self.pretrained_variants() and self.pretrained(cell.model):
            flags["pretrained_syntax"] = str(self.pretrain_dir(cell.model))  # before it ran: listed without it
        return flags

    def require_inputs(self) -> None:
        """Refuse to run while a parser model the cells need is missing (listed, with the fix)."""
        if self.missing_inputs:
            message, cells = next(iter(self.missing_inputs.items()))
            raise ExperimentError(f"{self.path}: {message} ({len(cells)} cells need it, e.g. {cells[0]}); "
                                  "or choose another parser for every cell with --set parser=...")


def _first_set(own: Any, shared: Any, default: Any) -> Any:
    return own if own is not None else shared if shared is not None else default


def _merge(into: dict[str, Any], layer: dict[str, Any]) -> None:
    for key, value in layer.items():
        if key in (MODEL_SETTINGS, "parsers"):  # tables: a later layer sets its keys, the others' stay
            into.setdefault(key, {}).update(value)
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
    if path.is_dir():  # e.g. the experiment's output folder given for its file
        tomls = sorted(p.name for p in path.glob("*.toml"))
        raise ExperimentError(f"{source}: a folder, not an experiment file: give its .toml file"
                              + (f" (this folder holds {', '.join(tomls[:5])})" if tomls else "")
                              + f" or a bundled recipe ({', '.join(names)})")
    close = difflib.get_close_matches(str(source), names, n=1)
    raise ExperimentError(f"{source}: no such file, and no bundled recipe of that name"
                          + (f" (did you mean {close[0]}?)" if close else "")
                          + f"; bundled recipes: {', '.join(names)}")


def load_experiment(source: str | Path, overrides: Overrides = Overrides()) -> Experiment:
    """Read, check and expand an experiment file; every cell's settings are resolved (and so checked) here,
    before anything runs."""
    path = find_experiment_file(source)
    try:
        raw = path.read_bytes()
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise ExperimentError(f"{path}: {not_utf8_at(raw, err)}; save it as UTF-8") from None
    except tomllib.TOMLDecodeError as err:
        raise ExperimentError(f"{path}: not valid TOML ({err})") from None
    except OSError as err:
        raise ExperimentError(f"{path}: cannot be read ({err.strerror or err}); check its permissions") from None
    where = str(path)
    table = load(ExperimentTable, data, where, error=ExperimentError)
    tasks, variants = table.tasks, table.variants
    models = [overrides.model] if overrides.model else table.models or [RunConfig.model]
    baseline = table.baseline or variants[0]
    grid, variant_grid = _grid(table.grid, variants, "grid", where)
    if baseline in variant_grid:
        raise ExperimentError(where, f"grid.{baseline}", "varies the baseline, and every system is compared with one "
                              "baseline: give the baseline fixed settings ([settings] or [task.<name>.settings])")
    variant_grid = {variant: {**grid, **variant_grid.get(variant, {})} for variant in variants
                    if variant != baseline and (grid or variant in variant_grid)}
    task_options = table.task
    variant_search = {}
    for task in tasks:
        own = task_options.get(task, TaskOptions()).search  # replaces the file's [search]
        variant_search[task] = _search(table.search if own is None else own, variants, variant_grid,
                                       "search" if own is None else f"task.{task}.search", where)
    try:
        cards = {task: load_card(task) for task in tasks}
    except CardError as err:
        raise ExperimentError(str(err)) from None
    name = path.stem
    runs_dir = Path(overrides.runs_dir or table.runs_dir or f"experiments/{name}").absolute()
    if overrides.data_dir:
        overrides = replace(overrides, data_dir=str(Path(overrides.data_dir).absolute()))
    overrides = replace(overrides, runs_dir=str(runs_dir))  # workers and cluster jobs may start elsewhere
    bundled = not Path(source).is_file()
    experiment = Experiment(
        source=str(source) if bundled else str(path.absolute()), path=path, name=name,
        title=table.title or name, description=table.description, tasks=tasks, variants=variants,
        seeds=table.seeds, models=models, baseline=baseline, runs_dir=runs_dir, paper=table.paper,
        settings=table.settings, pretrain=_pretrain(table.pretrain, variants, where),
        variant_grid=variant_grid, variant_search=variant_search, evaluation=table.evaluation,
        task_options=task_options,
        overrides=overrides, cards=cards)
    for task in tasks:
        _check_evaluation(experiment, task, where)
    experiment.cells = _cells(experiment)
    for cell in experiment.cells:
        try:
            config = experiment.config(cell)  # listing loads no model library; each run checks what it names
        except ConfigError as err:
            raise ExperimentError(f"{where}: cell {cell.name}: {err}") from None
        missing = missing_parser_file(config)  # (a UDPipe folder a recipe names: listed, but `run` waits for it)
        if missing is not None:
            experiment.cell_needs[cell.name] = missing
    return experiment


def _cells(experiment: Experiment) -> list[Cell]:
    cells = []
    # the model is in the name when a task has several, or when the command line chose it (not the file's runs)
    several_models = (experiment.overrides.model is not None
                      or any(len(experiment.models_of(task)) > 1 for task in experiment.tasks))
    for task, seed in itertools.product(experiment.tasks, experiment.seeds):
        for model, variant in itertools.product(experiment.models_of(task), experiment.variants_of(task)):
            searched = experiment.variant_search[task].get(variant, {})
            grid = {**experiment.variant_grid.get(variant, {}), **searched}
            for values in itertools.product(*grid.values()):
                point = tuple(zip(grid, values))
                parts = [variant, *([slug(model)] if several_models else []),
                         *(f"{key}={slug(json.dumps(value) if not isinstance(value, str) else value)}"
                           for key, value in point)]
                if experiment.overrides.max_steps:
                    parts.append(f"max_steps={experiment.overrides.max_steps}")
                cells.append(Cell(task, variant, model, seed, point, f"{task}/{'-'.join(parts)}-seed{seed}",
                                  tuple(searched)))
    return cells


def slug(text: str) -> str:
    """`text` as one part of a folder name: runs of other characters become `_`."""
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


def _grid(table: dict[str, Any], variants: list[str], key: str,
          where: str) -> tuple[dict[str, list], dict[str, dict[str, list]]]:
    """Setting -> values for every variant, and variant -> setting -> values from the sub-tables, of the table
    at `key` ("grid", "search", "task.<name>.search")."""
    shared: dict[str, list] = {}
    per_variant: dict[str, dict[str, list]] = {}
    for name, value in table.items():
        if isinstance(value, dict):
            if name not in variants:
                raise ExperimentError(where, f"{key}.{name}", "a sub-table is for one variant, and this is not one "
                                      f"of the file's ({', '.join(variants)}){did_you_mean(name, variants)}")
            per_variant[name] = {k: _values(v, f"{key}.{name}.{k}", where) for k, v in value.items()}
        else:
            shared[name] = _values(value, f"{key}.{name}", where)
    return shared, per_variant


def _search(table: dict[str, Any], variants: list[str], variant_grid: dict[str, dict[str, list]], key: str,
            where: str) -> dict[str, dict[str, list]]:
    """Variant -> setting -> values searched on dev: the table's lists for every variant (the baseline
    included: the papers tune its learning rate too), its sub-tables for one variant each."""
    shared, own = _grid(table, variants, key, where)
    searched = {variant: {**shared, **own.get(variant, {})} for variant in variants}
    for variant, settings in searched.items():
        both = sorted(set(settings) & set(variant_grid.get(variant, {})))
        if both:
            raise ExperimentError(where, key, f"{', '.join(both)} is both in [grid] (systems compared) and searched "
                                  f"(tuned on dev) for {variant}; keep it in one of them")
    return {variant: settings for variant, settings in searched.items() if settings}


def _pretrain(table: dict[str, Any], variants: list[str], where: str) -> dict[str, Any]:
    """[pretrain]: which variants start from the pre-trained syntax module, and the pre-training's settings (checked
    by `xsyn.experiments.pretrain` against `xsyn pretrain-<variant>`'s, before any pre-training runs)."""
    if not table:
        return {}
    pretrained = pretraining_variant().name  # the variant whose syntax module xsyn pre-trains
    own = table.get("variants", [pretrained])
    if not isinstance(own, list) or not own or not set(own) <= set(variants):
        raise ExperimentError(where, "pretrain.variants", "expected a list of the file's variants that start from "
                              f"the pre-trained {pretrained} module, e.g. variants = [\"{pretrained}\"] (the file's: "
                              f"{', '.join(variants)})")
    for key in ("model", "output_dir"):
        if key in table:
            raise ExperimentError(where, f"pretrain.{key}", "set per model by the experiment "
                                  f"(<runs dir>/{PRETRAIN_FOLDER}/<model>); remove it")
    return dict(table)


def _values(value: Any, key: str, where: str) -> list:
    if not isinstance(value, list) or not value:
        raise ExperimentError(where, key, f"expected a non-empty list of values, e.g. gat_delta = [1, 2, 4], "
                              f"got {value!r}")
    return value
