"""`xsyn experiment plan`: what an experiment will cost, before it runs.

Per task and system (variant and grid point): the cells, the training examples and optimiser steps of a
cell, the seconds per step and the hours per cell and in all; per language the sentences to parse and
the time they take; per cell the disk its checkpoints hold. Every figure says what it rests on:

- measured: a benchmark's own figure for this device, precision, model shape and batch
  (`xsyn bench model` step times in `benchmarks/*.json`, `xsyn bench parse` rates);
- extrapolated: a measured figure scaled to what differs (tokens per step, the model's layer sizes, a
  parser other than the measured one of its kind, a number of parse workers not measured);
- counted: examples counted in the task's data (the data folder of the cell, local files only);
- given: a number the command line stated (`--examples TASK=N`);
- unknown: nothing to go on (no benchmark for the device, no data); the plan says which.

Step times scale with the matrix work of a step (layers x (4 h^2 + 2 h x intermediate) x tokens). On an H100
(float32, mBERT's shape, batch 32; 2026-11-27) 384 tokens a step took 2.97x (none) and 2.87x (gat) the time of
128, where the plan says 3x; 96 tokens took 0.85x and 0.93x, where it says 0.75x: scaling up holds within a
few percent, scaling down gives a lower bound (a step's fixed costs do not shrink), and the plan says so.

Steps are `xsyn.training.checkpoint.total_steps` of the cell's own settings (epochs, batch size, max_steps,
max_train_examples): one training input per example, so a QA task whose long contexts make several
windows takes more. Hours are training only (evaluation is not benchmarked per step). Disk: the
`save_total_limit` resumable states (weights, AdamW's two moments) and the best model (weights), all
float32; saving a new state holds one more for a moment.
"""

from __future__ import annotations

import json
import math
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xsyn.experiments.bench_figures import (
    COUNTED,
    EXTRAPOLATED,
    GIVEN,
    MEASURED,
    PRECISION_DTYPES,
    UNKNOWN,
    Benchmarks,
    Figure,
    StepBench,
    _parse_rate,
    _whys,
    combine,
)
from xsyn.experiments.experiment_file import Cell, Experiment

DEVICES = ("h100", "h200", "cpu")  # a device is matched in a benchmark's `environment` ("NVIDIA H200", "cpu")
BF16_DEVICES = ("h100", "h200")  # GPUs with native bfloat16: where `mixed_precision = "auto"` trains in bf16
OPTIMIZER_MOMENTS = 2  # AdamW keeps two float32 tensors per weight
FLOAT_BYTES = 4


# --------------------------------------------------------------------------- the plan


@dataclass
class SystemPlan:
    """The cells of one system of a task (its variant and grid point, every seed)."""

    task: str
    model: str
    system: str  # the variant and grid point: `gat (gat_delta=2)`
    cells: list[str]
    examples: Figure  # training examples per cell
    steps: Figure  # optimiser steps per cell
    step_seconds: Figure
    hours_per_cell: Figure
    disk_per_cell: Figure  # bytes

    @property
    def hours(self) -> Figure:
        return self.hours_per_cell.times(len(self.cells))


@dataclass
class TaskPlan:
    task: str
    model: str
    parser: str
    systems: list[SystemPlan]
    sentences: dict[str, Figure]  # language -> sentences to parse (every split the cells read)
    parse_seconds: dict[str, Figure]  # language -> wall seconds at `parse_workers`


@dataclass
class Plan:
    title: str
    device: str
    step_bench: StepBench | None
    parse_workers: int
    tasks: list[TaskPlan]
    cell_hours: dict[str, Figure]  # cell name -> its estimated training hours
    notes: list[str] = field(default_factory=list)

    @property
    def hours(self) -> Figure:
        figures = list(self.cell_hours.values())
        return combine(sum(f.value or 0.0 for f in figures), *figures) if figures else Figure(0.0, MEASURED)

    @property
    def parse_hours(self) -> Figure:
        figures = [f for task in self.tasks for f in task.parse_seconds.values()]
        return combine(sum(f.value or 0.0 for f in figures) / 3600, *figures) if figures else Figure(0.0, MEASURED)

    @property
    def disk(self) -> Figure:
        figures = [s.disk_per_cell.times(len(s.cells)) for task in self.tasks for s in task.systems]
        return combine(sum(f.value or 0.0 for f in figures), *figures) if figures else Figure(0.0, MEASURED)


def make_plan(experiment: Experiment, device: str, benchmarks: Benchmarks, given: Mapping[str, int] | None = None,
              parse_workers: int | None = None) -> Plan:
    """The cost of every cell of `experiment` on `device` (one of `DEVICES`), from `benchmarks`; `given`:
    training examples per task where its data is not on this machine."""
    from xsyn.syntax.parse import default_workers

    bench = next((b for b in benchmarks.steps if device in b.device.lower()), None)
    plan = Plan(experiment.title, device, bench, parse_workers or default_workers(), [], {})
    if bench is None:
        plan.notes.append(f"{device} is an unmeasured device: no `xsyn bench model` figures for it in "
                          f"{', '.join(sorted({str(b.source) for b in benchmarks.steps})) or 'the benchmarks given'}; "
                          "step times and hours are unknown (scripts/gpu_benchmarks.py on that device measures them)")
    counter = _ExampleCounter(dict(given or {}))
    for task in experiment.tasks:
        for model in experiment.models_of(task):
            cells = [c for c in experiment.cells if c.task == task and c.model == model]
            if cells:
                plan.tasks.append(_task_plan(experiment, cells, bench, benchmarks, counter, plan))
    plan.notes += counter.notes
    return plan


def _task_plan(experiment: Experiment, cells: list[Cell], bench: StepBench | None, benchmarks: Benchmarks,
               counter: _ExampleCounter, plan: Plan) -> TaskPlan:
    systems: dict[str, list[Cell]] = {}
    for cell in cells:
        label = cell.variant + (f" ({', '.join(f'{k}={v}' for k, v in cell.grid)})" if cell.grid else "")
        systems.setdefault(label, []).append(cell)
    rows = []
    for label, members in systems.items():
        config = experiment.config(members[0], check_model=False, check_paths=False)
        examples = counter.training_examples(experiment, members[0], config)
        steps = _steps(config, examples)
        step_seconds = _step_seconds(bench, config, members[0].variant, plan.device)
        row = SystemPlan(cells[0].task, cells[0].model, label, [c.name for c in members], examples, steps,
                         step_seconds, combine(_product(steps, step_seconds, 1 / 3600), steps, step_seconds),
                         _disk(config.model, config.save_total_limit or 1, benchmarks))
        plan.cell_hours.update(dict.fromkeys(row.cells, row.hours_per_cell))
        rows.append(row)
    config = experiment.config(cells[0], check_model=False, check_paths=False)
    sentences = counter.sentences(experiment, cells[0], config)
    rate = _parse_rate(config.parser, benchmarks.parses, plan.parse_workers)
    seconds = {lang: combine(_product(count, Figure(1 / rate.value, rate.basis) if rate.value else rate),
                             count, rate) for lang, count in sentences.items()}
    return TaskPlan(cells[0].task, cells[0].model, config.parser, rows, sentences, seconds)


def _product(*parts) -> float | None:
    values = [p.value if isinstance(p, Figure) else p for p in parts]
    return None if any(v is None for v in values) else math.prod(values)


def _steps(config, examples: Figure) -> Figure:
    from xsyn.training.checkpoint import total_steps

    if config.max_steps:
        return Figure(config.max_steps, GIVEN, "max_steps")
    if examples.value is None:
        return Figure(None, UNKNOWN, examples.why)
    return Figure(total_steps(config, int(examples.value)), examples.basis, examples.why)


class _ExampleCounter:
    """Examples counted in the local data, once per task, language, split and folder."""

    def __init__(self, given: dict[str, int]):
        self.given = given
        self.counts: dict[tuple, int | None] = {}
        self.missing: dict[tuple[str, str, str], list[str]] = {}  # (task, split, folder) -> languages not here

    def count(self, card, lang: str, split: str, data_dir: str | None) -> int | None:
        from xsyn.data.loading import default_data_dir, load_examples
        from xsyn.utils.errors import XsynError

        key = (card.name, lang, split, data_dir)
        if key not in self.counts:
            try:
                self.counts[key] = len(load_examples(card, lang, split, data_dir, skip_bad_rows=True,
                                                     allow_hub=False)[0])
            except XsynError:
                self.counts[key] = None
                folder = str(data_dir or default_data_dir(card))
                self.missing.setdefault((card.name, split, folder), []).append(lang)
        return self.counts[key]

    @property
    def notes(self) -> list[str]:
        return [f"{task} {split}: no data in {folder} for {', '.join(langs)}, not counted"
                for (task, split, folder), langs in self.missing.items()]

    def training_examples(self, experiment: Experiment, cell: Cell, config) -> Figure:
        card = experiment.cards[cell.task]
        if cell.task in self.given:
            found = Figure(self.given[cell.task], GIVEN, f"--examples {cell.task}={self.given[cell.task]}")
        else:
            n = self.count(card, config.train_lang, "train", config.data_dir)
            found = (Figure(None, UNKNOWN, f"{cell.task}: no training data here (--data-dir, or --examples "
                                           f"{cell.task}=N)") if n is None else Figure(n, COUNTED))
            fraction = config.dev_fraction or card.dev_fraction
            if n is not None and "validation" not in card.splits and fraction:
                found = Figure(n - round(n * fraction), EXTRAPOLATED, f"{cell.task}: {fraction:g} of train held "
                                                                      "out as the dev set")
        cap = config.max_train_examples
        if cap and (found.value is None or found.value > cap):
            return Figure(cap, GIVEN, f"at most max_train_examples={cap}")
        return found

    def sentences(self, experiment: Experiment, cell: Cell, config) -> dict[str, Figure]:
        """Sentences to parse per language: every segment of the training data (train language), its dev
        set, and each evaluated split of each evaluated language (the parse cache parses each once)."""
        card = experiment.cards[cell.task]
        evaluation = experiment.evaluation_of(cell.task)
        wanted = [(config.train_lang, "train")] + [(config.train_lang, "validation")] * ("validation" in card.splits)
        wanted += [(lang, split) for split in evaluation.splits for lang in evaluation.langs]
        per_lang: dict[str, Figure] = {}
        for lang, split in dict.fromkeys(wanted):
            n = (self.given.get(cell.task) if split == "train" and cell.task in self.given
                 else self.count(card, lang, split, config.data_dir))
            found = (Figure(None, UNKNOWN) if n is None else  # the counter's notes name what is missing
                     Figure(n * len(card.segments), GIVEN if split == "train" and cell.task in self.given else COUNTED))
            before = per_lang.get(lang, Figure(0, COUNTED))
            per_lang[lang] = combine(_sum(before, found), before, found)
        return per_lang


def _sum(*figures: Figure) -> float | None:
    return None if any(f.value is None for f in figures) else sum(f.value for f in figures)


def _step_seconds(bench: StepBench | None, config, variant: str, device: str) -> Figure:
    """The bench's step time for the cell's precision on `device` (`auto` resolved there) and variant, scaled to
    its model and tokens per step."""
    from xsyn.training.precision import resolve_precision

    if bench is None:
        return Figure(None, UNKNOWN, "unmeasured device")
    dtype = PRECISION_DTYPES[resolve_precision(config.mixed_precision, bf16_gpu=device in BF16_DEVICES)]
    basis, why = MEASURED, f"{bench.device} {dtype}"
    rows = bench.rows.get(dtype)
    if rows is None and "bfloat16" in bench.rows and dtype != "float32":  # a half type as the other
        rows, basis, why = bench.rows["bfloat16"], EXTRAPOLATED, f"{bench.device} {dtype} taken as bfloat16"
    if rows is None or variant not in rows:
        return Figure(None, UNKNOWN, f"{bench.source} has no {dtype} step time for {variant}")
    shape = model_shape(config.model)
    if shape is None:
        return Figure(None, UNKNOWN, f"the shape of {config.model} is not known here (no config.json found offline)")
    row = rows[variant]
    bench_tokens = round(row["tokens_per_second"] * row["step_seconds"])
    scale = _matrix_cost(shape, config.batch_size * config.max_length) / _matrix_cost(bench.shape, bench_tokens)
    if math.isclose(scale, 1.0):
        return Figure(row["step_seconds"], basis, why)
    small = " (less work than measured: a lower bound, the fixed costs of a step do not shrink)" if scale < 1 else ""
    return Figure(row["step_seconds"] * scale, EXTRAPOLATED,
                  f"{why}, measured at {bench_tokens} tokens a step on mBERT's shape, x{scale:.3g} for "
                  f"{config.batch_size} x {config.max_length} tokens on {config.model}{small}")


def _matrix_cost(shape: Mapping[str, Any], tokens: int) -> float:
    """What a step's matrix products cost, up to a constant: per token and layer, the attention projections
    (4 h^2) and the feed-forward block (2 h x intermediate). Attention's own n^2 term is left out."""
    hidden, inner = shape["hidden_size"], shape.get("intermediate_size", 4 * shape["hidden_size"])
    return shape["num_hidden_layers"] * (4 * hidden * hidden + 2 * hidden * inner) * tokens


def model_shape(model: str) -> dict[str, Any] | None:
    """A model's config: a published checkpoint xsyn knows, the `tiny` preset, a local folder's config.json,
    or the hub cache's copy; None where none is on this machine."""
    from xsyn.benchmarks.model import ENCODER_SHAPES
    from xsyn.models.defaults import MODEL_CONFIG, TINY, TINY_SHAPE

    known = {TINY: TINY_SHAPE, **{shape.checkpoint: shape.config for shape in ENCODER_SHAPES.values()}}
    if model in known:
        return known[model]
    file: Path | str | None = Path(model) / MODEL_CONFIG
    if not Path(file).is_file():
        from huggingface_hub import try_to_load_from_cache

        file = try_to_load_from_cache(model, MODEL_CONFIG)
    if isinstance(file, (str, Path)) and Path(file).is_file():
        return json.loads(Path(file).read_text(encoding="utf-8"))
    return None


def _disk(model: str, keep: int, benchmarks: Benchmarks) -> Figure:
    """Bytes a finished cell holds: `keep` resumable states (weights + AdamW moments) and the best weights."""
    from xsyn.benchmarks.model import ENCODER_SHAPES

    shape = model_shape(model)
    if shape is None:
        return Figure(None, UNKNOWN, f"the shape of {model} is not known here")
    measured = next((benchmarks.sizes[name] for name, known in ENCODER_SHAPES.items()
                     if known.config == shape and name in benchmarks.sizes), None)
    if measured:
        weights = FLOAT_BYTES * measured["parameters"]
        return Figure(keep * (weights + measured["optimizer_state_bytes"]) + weights, MEASURED,
                      f"save_total_limit {keep}")
    weights = FLOAT_BYTES * _parameters(shape)
    return Figure(weights * (keep * (1 + OPTIMIZER_MOMENTS) + 1), EXTRAPOLATED,
                  f"save_total_limit {keep}, parameters counted from {model}'s config")


def _parameters(shape: Mapping[str, Any]) -> int:
    """BERT's parameter count from its config (embeddings, layers, pooler); the tiny preset's vocabulary is
    mBERT's, whose tokenizer it uses by default."""
    from xsyn.benchmarks.model import ENCODER_SHAPES

    h = shape["hidden_size"]
    inner = shape.get("intermediate_size", 4 * h)
    vocab = shape.get("vocab_size", ENCODER_SHAPES["mbert"].config["vocab_size"])
    embeddings = (vocab + shape.get("max_position_embeddings", 512) + shape.get("type_vocab_size", 2)) * h + 2 * h
    layer = 4 * (h * h + h) + 2 * h * inner + inner + h + 4 * h  # attention, feed-forward, two layer norms
    return embeddings + shape["num_hidden_layers"] * layer + h * h + h



# --------------------------------------------------------------------------- showing it

MARKS = {MEASURED: "m", EXTRAPOLATED: "x", COUNTED: "c", GIVEN: "g", UNKNOWN: "?"}


def _shown(figure: Figure, spec: str, scale: float = 1.0, unit: str = "") -> str:
    value = "?" if figure.value is None else format(figure.value * scale, spec)
    return f"{value}{unit} {MARKS[figure.basis]}"


def plan_lines(plan: Plan) -> list[str]:
    """The plan as the terminal shows it: a table per task, the totals, and what each figure rests on."""
    bench = plan.step_bench
    lines = [f"Plan: {plan.title} on {plan.device} (" + (f"step times measured on {bench.device}, {bench.date}, "
             f"{bench.source}" if bench else f"{plan.device} is an unmeasured device") +
             f"; parsing with {plan.parse_workers} workers)",
             "Each figure: " + ", ".join(f"{mark} {basis}" for basis, mark in MARKS.items()) + "."]
    header = ["system", "cells", "train examples", "steps/cell", "s/step", "hours/cell", "hours", "disk/cell GB"]
    for task in plan.tasks:
        rows = [[s.system, str(len(s.cells)), _shown(s.examples, ",.0f"), _shown(s.steps, ",.0f"),
                 _shown(s.step_seconds, ".3g"), _shown(s.hours_per_cell, ".3g"), _shown(s.hours, ".3g"),
                 _shown(s.disk_per_cell, ".3g", 1e-9)] for s in task.systems]
        parses = "; ".join(f"{lang} {_shown(task.sentences[lang], ',.0f')}, {_shown(seconds, '.3g', 1 / 60)}"
                           for lang, seconds in task.parse_seconds.items())
        lines += ["", f"{task.task} · {task.model} · parser {task.parser}", *_table(header, rows),
                  *textwrap.wrap(f"parse (sentences, minutes): {parses}", 116, initial_indent="  ",
                                 subsequent_indent="    ")]
    cells = sum(len(s.cells) for task in plan.tasks for s in task.systems)
    lines += ["", f"Total: {cells} cells; training {_shown(plan.hours, ',.3g', unit=' hours')}; parsing "
                  f"{_shown(plan.parse_hours, ',.3g', unit=' hours')}; checkpoints "
                  f"{_shown(plan.disk, ',.3g', 1e-9, ' GB')}."]
    whys = _whys(f for f in _figures(plan) if f.basis != MEASURED).split("; ")
    if whys or plan.notes:
        lines += ["", "Notes:", *[f"- {line}" for line in [*plan.notes, *whys] if line]]
    return lines


def _figures(plan: Plan) -> list[Figure]:
    found = []
    for task in plan.tasks:
        for s in task.systems:
            found += [s.examples, s.steps, s.step_seconds, s.disk_per_cell]
        found += [*task.sentences.values(), *task.parse_seconds.values()]
    return found


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return ["  " + "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in
                             enumerate(zip(row, widths))) for row in [header, *rows]]


def plan_json(plan: Plan) -> dict[str, Any]:
    def figure(f: Figure) -> dict[str, Any]:
        return {"value": f.value, "basis": f.basis, "why": f.why}

    return {"title": plan.title, "device": plan.device, "parse_workers": plan.parse_workers,
            "step_bench": None if plan.step_bench is None else {"source": str(plan.step_bench.source),
                                                                "device": plan.step_bench.device,
                                                                "date": plan.step_bench.date},
            "tasks": [{"task": t.task, "model": t.model, "parser": t.parser,
                       "systems": [{"system": s.system, "cells": s.cells, "examples": figure(s.examples),
                                    "steps": figure(s.steps), "step_seconds": figure(s.step_seconds),
                                    "hours_per_cell": figure(s.hours_per_cell), "hours": figure(s.hours),
                                    "disk_bytes_per_cell": figure(s.disk_per_cell)} for s in t.systems],
                       "sentences": {k: figure(v) for k, v in t.sentences.items()},
                       "parse_seconds": {k: figure(v) for k, v in t.parse_seconds.items()}} for t in plan.tasks],
            "hours": figure(plan.hours), "parse_hours": figure(plan.parse_hours), "disk_bytes": figure(plan.disk),
            "notes": plan.notes}


# --------------------------------------------------------------------------- progress against the plan


@dataclass(frozen=True)
class Progress:
    done: int
    total: int
    spent_hours: float  # training hours of the finished cells (their train_results.json)
    eta: Figure  # training hours left, one cell at a time


def progress(experiment: Experiment, plan: Plan, done: Sequence[Cell]) -> Progress:
    """How far the cells are, and the hours left: the plan's hours of the cells not done, scaled by how the
    finished cells' real training time compares with their planned time (their mean where the plan has none)."""
    from xsyn.training.folder import RunFolder
    from xsyn.utils.io import saved_json_object

    spent = {}
    for cell in done:
        seconds = (saved_json_object(RunFolder(experiment.cell_dir(cell)).train_results) or {}).get("train_seconds")
        if isinstance(seconds, (int, float)):
            spent[cell.name] = seconds / 3600
    names = {cell.name for cell in done}
    left = [figure for name, figure in plan.cell_hours.items() if name not in names]
    planned = [plan.cell_hours[name] for name in spent if name in plan.cell_hours]
    eta = combine(_sum(*left), *left) if left else Figure(0.0, MEASURED)
    eta = Figure(eta.value, eta.basis, "the plan's hours of the cells left" if left else "")
    if spent and planned and None not in [f.value for f in planned] and sum(f.value for f in planned) > 0:
        ratio = sum(spent.values()) / sum(f.value for f in planned)
        eta = eta.times(ratio, EXTRAPOLATED, f"the plan x {ratio:.2f}: the pace of the {len(spent)} cells done")
    elif spent:
        mean = sum(spent.values()) / len(spent)
        eta = Figure(mean * len(left), EXTRAPOLATED, f"the mean of the {len(spent)} cells done")
    return Progress(len(names), len(plan.cell_hours), sum(spent.values()), eta)


def progress_line(plan: Plan, state: Progress) -> str:
    """One line for `experiment status`: the plan's total beside the progress and the time left."""
    eta = _shown(state.eta, ",.3g", unit=" hours")
    return (f"plan on {plan.device}: {_shown(plan.hours, ',.3g', unit=' hours')} of training for "
            f"{state.total} cells; {state.done} done ({state.spent_hours:,.2f} hours spent); left: {eta}"
            + (f" ({state.eta.why})" if state.eta.why else "") + ", one cell at a time")
