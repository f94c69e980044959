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
    [pretrain]                          # pre-train the GAT on UD first (once per model): variants = ["gat"],
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
from xsyn.models.defaults import GAT_CONFIG, TINY
from xsyn.models.variants import VARIANTS
from xsyn.run.settings import MODEL_SETTINGS, ConfigError, RunConfig, resolve, split_settings
from xsyn.syntax.parsing.base import ParserChoiceError
from xsyn.syntax.parsing.registry import resolve_parser_choice
from xsyn.utils.schema import SchemaError

RECIPE_PACKAGE = "xsyn.experiments"
RECIPE_FOLDER = "recipes"
_TOP_KEYS = {"title", "description", "tasks", "variants", "seeds", "models", "baseline", "runs_dir", "paper",
             "settings", "grid", "search", "pretrain", "evaluation", "task"}
PRETRAIN_FOLDER = "pretrain"  # under runs_dir: one GAT pre-training per model ([pretrain])
_EVALUATION_KEYS = {"split", "generalized", "langs"}
_TASK_KEYS = {*_EVALUATION_KEYS, "settings", "data_dir", "models", "variants", "search"}
SYNTH_VOCAB = "synth-vocab.txt"  # the synthetic benchmark's own vocabulary, for `tiny` on `synth`


class ExperimentError(SchemaError):
    """An experiment file that cannot run as written; the message names the file, the key and the fix."""


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
    evaluation: dict[str, Any]
    task_options: dict[str, dict[str, Any]]
    overrides: Overrides
    cards: dict[str, TaskCard]
    pretrain: dict[str, Any] = field(default_factory=dict)  # [pretrain]: the GAT pre-training before fine-tuning
    missing_inputs: dict[str, list[str]] = field(default_factory=dict)  # what is missing -> the cells that need it
    cells: list[Cell] = field(default_factory=list)

    def pretrained_variants(self) -> list[str]:
        return list(self.pretrain.get("variants", ["gat"])) if self.pretrain else []

    def pretrain_dir(self, model: str) -> Path:
        return self.runs_dir / PRETRAIN_FOLDER / _slug(model)

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
        return list(self.task_options.get(task, {}).get("models") or self.models)

    def variants_of(self, task: str) -> list[str]:
        """The task's variants: its own `variants` (a paper's table without a row), else the file's."""
        return list(self.task_options.get(task, {}).get("variants") or self.variants)

    def searched(self, task: str) -> bool:
        return any(self.variant_search.get(task, {}).values())

    def evaluation_of(self, task: str) -> Evaluation:
        options = {**self.evaluation, **{k: v for k, v in self.task_options.get(task, {}).items()
                                         if k in _EVALUATION_KEYS}}
        split = options.get("split", "test")
        splits = (split,) if isinstance(split, str) else tuple(split)
        langs = tuple(options.get("langs") or self.cards[task].languages)
        return Evaluation(splits, bool(options.get("generalized", False)), langs)

    def config(self, cell: Cell, check_model: bool = True) -> RunConfig:
        """The cell's resolved settings: the card's paper hyperparameters, then the file's settings (every
        cell, then its task's), the grid point, and the command line's; checked as `xsyn finetune` checks
        (`check_model` off: all but the model's configuration, which needs the model library)."""
        return resolve(cell.task, cell.variant, self.cards[cell.task], {}, self._flags(cell), check_model=check_model)

    def missing_parser_model(self, cell: Cell) -> str | None:
        """The message when the cell's parser needs a model file or folder that is not there (a UDPipe
        folder a recipe names): the experiment can still be listed; `run` refuses to start without it."""
        parser = self._flags(cell).get("parser", RunConfig.parser)
        try:
            return resolve_parser_choice(parser).missing_path()
        except ParserChoiceError:
            return None  # not a valid choice at all: `config` says so

    def _flags(self, cell: Cell) -> dict[str, Any]:
        card = self.cards[cell.task]
        task_options = self.task_options.get(cell.task, {})
        flags: dict[str, Any] = {"train_lang": card.train_languages[0]}
        for layer in (self.settings, task_options.get("settings", {}), dict(cell.grid)):
            _merge(flags, split_settings(layer, str(self.path), "settings", ExperimentError))
        _merge(flags, self.overrides.settings)
        data_dir = (str(Path(self.overrides.data_dir) / cell.task) if self.overrides.data_dir
                    else task_options.get("data_dir"))
        flags.update({"model": cell.model, "seed": cell.seed, "output_dir": str(self.cell_dir(cell))})
        if data_dir:
            flags["data_dir"] = data_dir
        if self.overrides.max_steps:
            flags["max_steps"] = self.overrides.max_steps
        if cell.task == "synth" and cell.model == TINY and "tokenizer" not in flags:
            flags["tokenizer"] = str(self.runs_dir / SYNTH_VOCAB)
        pretrained = self.pretrain_dir(cell.model) / GAT_CONFIG
        if cell.variant in self.pretrained_variants() and pretrained.is_file():
            flags["gat_init"] = str(pretrained.parent)  # before the pre-training ran, the cell is listed without it
        return flags

    def require_inputs(self) -> None:
        """Refuse to run while a parser model the cells need is missing (listed, with the fix)."""
        if self.missing_inputs:
            message, cells = next(iter(self.missing_inputs.items()))
            raise ExperimentError(f"{self.path}: {message} ({len(cells)} cells need it, e.g. {cells[0]}); "
                                  "or choose another parser for every cell with --set parser=...")


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
    _known(data, _TOP_KEYS, where)
    tasks = _strings(data, "tasks", where)
    for task in tasks:
        if task not in list_tasks():
            raise ExperimentError(f"{where}: tasks: unknown task {task!r}; known tasks: {', '.join(list_tasks())}")
    variants = _strings(data, "variants", where)
    for variant in variants:
        if variant not in VARIANTS:
            raise ExperimentError(f"{where}: variants: unknown variant {variant!r}; choose from {', '.join(VARIANTS)}")
    seeds = data.get("seeds")
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) and not isinstance(s, bool)
                                                           for s in seeds) or len(set(seeds)) != len(seeds):
        raise ExperimentError(f"{where}: seeds must be a non-empty list of distinct integers, e.g. seeds = [1, 2, 3]")
    models = [overrides.model] if overrides.model else _strings(data, "models", where, [RunConfig.model])
    baseline = data.get("baseline", variants[0])
    if baseline not in variants:
        raise ExperimentError(f"{where}: baseline {baseline!r} is not one of the variants ({', '.join(variants)})")
    grid, variant_grid = _grid(data.get("grid", {}), variants, where)
    if baseline in variant_grid:
        raise ExperimentError(f"{where}: [grid.{baseline}] varies the baseline, and every system is compared with one "
                              "baseline: give the baseline fixed settings ([settings] or [task.<name>.settings])")
    variant_grid = {variant: {**grid, **variant_grid.get(variant, {})} for variant in variants
                    if variant != baseline and (grid or variant in variant_grid)}
    task_options = _table(data, "task", where)
    for task in task_options:
        if task not in tasks:
            raise ExperimentError(f"{where}: [task.{task}] names a task that is not in tasks ({', '.join(tasks)})")
        _known(_table(task_options, task, where), _TASK_KEYS, f"{where} [task.{task}]")
        if "models" in task_options[task]:
            _strings(task_options[task], "models", f"{where} [task.{task}]")
        if "variants" in task_options[task]:
            own = _strings(task_options[task], "variants", f"{where} [task.{task}]")
            if baseline not in own or not set(own) <= set(variants):
                raise ExperimentError(f"{where} [task.{task}]: variants must be some of the file's variants "
                                      f"({', '.join(variants)}), the baseline {baseline!r} among them")
    search = _table(data, "search", where)
    variant_search = {task: _search(task_options.get(task, {}).get("search", search), variants, variant_grid,
                                    f"{where} [task.{task}] search" if "search" in task_options.get(task, {})
                                    else f"{where} [search]")
                      for task in tasks}
    evaluation = _table(data, "evaluation", where)
    _known(evaluation, _EVALUATION_KEYS, f"{where} [evaluation]")
    try:
        cards = {task: load_card(task) for task in tasks}
    except CardError as err:
        raise ExperimentError(str(err)) from None
    name = path.stem
    runs_dir = Path(overrides.runs_dir or data.get("runs_dir") or f"experiments/{name}").absolute()
    if overrides.data_dir:
        overrides = replace(overrides, data_dir=str(Path(overrides.data_dir).absolute()))
    overrides = replace(overrides, runs_dir=str(runs_dir))  # workers and cluster jobs may start elsewhere
    bundled = not Path(source).is_file()
    experiment = Experiment(
        source=str(source) if bundled else str(path.absolute()), path=path, name=name,
        title=str(data.get("title", name)),
        description=str(data.get("description", "")), tasks=tasks, variants=variants, seeds=seeds, models=models,
        baseline=baseline, runs_dir=runs_dir, paper=data.get("paper"), settings=_table(data, "settings", where),
        pretrain=_pretrain(_table(data, "pretrain", where), variants, where),
        variant_grid=variant_grid, variant_search=variant_search, evaluation=evaluation, task_options=task_options,
        overrides=overrides, cards=cards)
    for task in tasks:
        _check_evaluation(experiment, task, where)
    experiment.cells = _cells(experiment)
    for cell in experiment.cells:
        try:
            experiment.config(cell, check_model=False)  # listing loads no model library; each run checks it
        except ConfigError as err:
            missing = experiment.missing_parser_model(cell)
            if missing is None or str(err) != missing:
                raise ExperimentError(f"{where}: cell {cell.name}: {err}") from None
            experiment.missing_inputs.setdefault(missing, []).append(cell.name)
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


def _grid(table: Any, variants: list[str], where: str) -> tuple[dict[str, list], dict[str, dict[str, list]]]:
    if not isinstance(table, dict):
        raise ExperimentError(f"{where}: [grid] must be a table of lists")
    grid: dict[str, list] = {}
    per_variant: dict[str, dict[str, list]] = {}
    for key, value in table.items():
        if isinstance(value, dict):
            if key not in variants:
                raise ExperimentError(f"{where}: [grid.{key}]: {key!r} is not one of the variants "
                                      f"({', '.join(variants)})")
            per_variant[key] = {k: _values(v, f"[grid.{key}] {k}", where) for k, v in value.items()}
        else:
            grid[key] = _values(value, f"[grid] {key}", where)
    return grid, per_variant


def _search(table: Any, variants: list[str], variant_grid: dict[str, dict[str, list]],
            where: str) -> dict[str, dict[str, list]]:
    """Variant -> setting -> values searched on dev: the table's lists for every variant (the baseline
    included: the papers tune its learning rate too), its sub-tables for one variant each."""
    if not isinstance(table, dict):
        raise ExperimentError(f"{where} must be a table of lists, e.g. learning_rate = [2e-5, 3e-5]")
    shared, own = _grid(table, variants, where)
    searched = {variant: {**shared, **own.get(variant, {})} for variant in variants}
    for variant, settings in searched.items():
        both = sorted(set(settings) & set(variant_grid.get(variant, {})))
        if both:
            raise ExperimentError(f"{where}: {', '.join(both)} is both in [grid] (systems compared) and searched "
                                  f"(tuned on dev) for {variant}; keep it in one of them")
    return {variant: settings for variant, settings in searched.items() if settings}


def _pretrain(table: dict[str, Any], variants: list[str], where: str) -> dict[str, Any]:
    """[pretrain]: which variants start from the pre-trained GAT, and the pre-training's settings (checked
    by `xsyn.experiments.pretrain` against `xsyn pretrain-gat`'s, before any pre-training runs)."""
    if not table:
        return {}
    own = table.get("variants", ["gat"])
    if not isinstance(own, list) or not own or not set(own) <= set(variants):
        raise ExperimentError(f"{where} [pretrain]: variants must be a list of the file's variants that start from "
                              f"the pre-trained GAT, e.g. variants = [\"gat\"] (the file's: {', '.join(variants)})")
    for key in ("model", "output_dir"):
        if key in table:
            raise ExperimentError(f"{where} [pretrain]: {key} is set per model by the experiment "
                                  f"(<runs dir>/{PRETRAIN_FOLDER}/<model>); remove it")
    return dict(table)


def _values(value: Any, what: str, where: str) -> list:
    if not isinstance(value, list) or not value:
        raise ExperimentError(f"{where}: {what} must be a non-empty list of values, e.g. gat_delta = [1, 2, 4]")
    return value


def _known(table: dict[str, Any], known: set[str], where: str) -> None:
    for key in table:
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            raise ExperimentError(f"{where}: unknown key {key!r}" + (f"; did you mean {close[0]!r}?" if close else "")
                                  + f" (valid keys: {', '.join(sorted(known))})")


def _table(data: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise ExperimentError(f"{where}: {key} must be a table ([{key}]), got {value!r}")
    return value


def _strings(data: dict[str, Any], key: str, where: str, default: list[str] | None = None) -> list[str]:
    value = data.get(key, default)
    if value is None:
        raise ExperimentError(f"{where}: {key} is missing (a list, e.g. {key} = [...])")
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise ExperimentError(f"{where}: {key} must be a non-empty list of names, got {value!r}")
    if len(set(value)) != len(value):
        raise ExperimentError(f"{where}: {key} names one entry twice: {value!r}")
    return list(value)
