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

import heapq
import json
import math
import re
import shutil
import subprocess
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xsyn.data.loading import default_data_dir, load_examples
from xsyn.data.synth import vocabulary
from xsyn.experiments.bench_figures import (
    COUNTED,
    EXTRAPOLATED,
    GIVEN,
    MEASURED,
    UNKNOWN,
    Benchmarks,
    Figure,
    StepBench,
    bench_dtype,
    combine,
    derive_precisions,
    figure_sum,
    figure_whys,
    parse_rate,
)
from xsyn.experiments.experiment_file import SYNTH_VOCAB, Cell, Experiment, ExperimentError
from xsyn.models.names import CHECKPOINT_SHAPES, ENCODER_SHAPES, MODEL_CONFIG, TINY, TINY_SHAPE
from xsyn.syntax.parse import default_workers
from xsyn.syntax.parsing.base import ParserChoiceError
from xsyn.syntax.parsing.registry import resolve_parser_choice
from xsyn.training.checkpoint import total_steps
from xsyn.utils.errors import XsynError

PLAN_GPUS = 8  # the GPUs at once a plan also gives the hours for (a node of eight), unless told another number
DEVICES = ("h100", "h200", "cpu")  # a device is matched in a benchmark's `environment` ("NVIDIA H200", "cpu")


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
    memory_per_cell: Figure = Figure(None, UNKNOWN)  # device bytes a training cell holds at its peak
    variant: str = ""
    grid: tuple[tuple[str, Any], ...] = ()  # the grid point: (setting, value) pairs

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
    gpus: int = 1  # the GPUs at once `hours_on_gpus` spreads the cells over

    @property
    def hours_on_gpus(self) -> Figure:
        """The hours until the last cell ends with `gpus` cells at once, one a GPU, the longest started first
        (what `experiment run --gpus N` does with a queue of cells; greedy, within 4/3 of the best order)."""
        figures = list(self.cell_hours.values())
        if any(f.value is None for f in figures):
            return combine(None, *figures)
        loads = [0.0] * max(1, self.gpus)
        for hours in sorted((f.value for f in figures), reverse=True):
            heapq.heapreplace(loads, loads[0] + hours)
        return combine(max(loads), *figures) if figures else Figure(0.0, MEASURED)

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


def local_device() -> str:
    """This machine's device as the plan names it: its first GPU (`h100`, `h200`, else the GPU's own name) as
    nvidia-smi names it (no model library is loaded for it), or `cpu`."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "cpu"
    try:
        done = subprocess.run([smi, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True,
                              timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "cpu"
    names = [line.strip() for line in done.stdout.splitlines() if line.strip()] if done.returncode == 0 else []
    if not names:
        return "cpu"
    return next((device for device in DEVICES if device in names[0].lower()), names[0])


def given_examples(items: Sequence[str], tasks: Sequence[str]) -> dict[str, int]:
    """`--examples TASK=N` values: a task of the experiment, once, and a positive whole number in plain digits
    (not 1e3, 0, +5 or 5.0: a count is exact)."""
    found: dict[str, int] = {}
    for item in items:
        task, _, count = item.partition("=")
        if task not in tasks:
            raise ExperimentError(f"--examples {item!r}: {task!r} is not a task of the experiment (its tasks: "
                                  f"{', '.join(tasks)}); give TASK=N")
        if not re.fullmatch(r"[1-9][0-9]*", count):
            raise ExperimentError(f"--examples {item!r}: N must be a positive whole number in digits, e.g. "
                                  f"{task}=49401")
        if task in found and found[task] != int(count):
            raise ExperimentError(f"--examples gives {task} twice ({found[task]} and {count}); give it once")
        found[task] = int(count)
    return found


def make_plan(experiment: Experiment, device: str, benchmarks: Benchmarks, given: Mapping[str, int] | None = None,
              parse_workers: int | None = None, ratios_from: Sequence[StepBench] = (), gpus: int = PLAN_GPUS) -> Plan:
    """The cost of every cell of `experiment` on `device` (one of `DEVICES`), from `benchmarks`; `given`:
    training examples per task where its data is not on this machine. A precision the device's benchmark lacks
    is derived by the ratio another device measured (in `benchmarks`, else in `ratios_from`), and said so."""
    bench = next((b for b in benchmarks.steps if device in b.device.lower()), None)
    if bench is not None:
        bench = derive_precisions(bench, [*benchmarks.steps, *ratios_from])
    plan = Plan(experiment.title, device, bench, parse_workers or default_workers(), [], {}, gpus=gpus)
    plan.notes += [f"{bench.source.name}, a caveat recorded with its figures: {caveat}" for caveat in bench.caveats
                   ] if bench is not None else []
    if bench is None:
        plan.notes.append(f"{device} is an unmeasured device: no `xsyn bench model` figures for it in "
                          f"{', '.join(sorted({str(b.source) for b in benchmarks.steps})) or 'the benchmarks given'}; "
                          "step times and hours are unknown (scripts/gpu_benchmarks.py on that device measures them)")
    counter = _ExampleCounter(dict(given or {}), experiment.source)
    for message, cells in experiment.missing_inputs.items():
        plan.notes.append(f"{len(cells)} cells cannot run yet: {message}")
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
        config = experiment.config(members[0])
        _refuse_untrainable(experiment, members[0], config)
        examples = counter.training_examples(experiment, members[0], config)
        steps = _steps(config, examples)
        _refuse_untrainable(experiment, members[0], config, steps, counter.given)
        step_seconds = bench_step_seconds(bench, config, members[0].variant)
        vocab = tokenizer_vocab_size(experiment, config)
        row = SystemPlan(cells[0].task, cells[0].model, label, [c.name for c in members], examples, steps,
                         step_seconds, combine(_product(steps, step_seconds, 1 / 3600), steps, step_seconds),
                         checkpoint_disk(config.model, config.save_total_limit or 1, benchmarks, vocab),
                         device_memory(bench, config, members[0].variant, vocab), members[0].variant,
                         members[0].grid)
        plan.cell_hours.update(dict.fromkeys(row.cells, row.hours_per_cell))
        rows.append(row)
    config = experiment.config(cells[0])
    sentences = counter.sentences(experiment, cells[0], config)
    rate = parse_rate(config.parser, benchmarks.parses, plan.parse_workers)
    if _serves_data_trees(config.parser):  # the data's own trees: nothing is parsed, nothing to measure
        rate = Figure(math.inf, COUNTED, f"{config.parser} reads the data's own trees: nothing to parse")
    seconds = {lang: combine(_product(count, Figure(1 / rate.value, rate.basis, rate.why) if rate.value else rate),
                             count, rate) for lang, count in sentences.items()}
    return TaskPlan(cells[0].task, cells[0].model, config.parser, rows, sentences, seconds)


MAX_STEPS = 2 ** 53  # optimiser steps a cell may plan: beyond, float arithmetic cannot count them one by one


def _refuse_untrainable(experiment: Experiment, cell: Cell, config, steps: Figure | None = None,
                        given: Mapping[str, int] | None = None) -> None:
    """Settings no cell can train with, refused before a plan is made of them: inputs longer than the model's
    positions, or more steps than can be counted (an overflowing `epochs`, or `--examples` beyond reason)."""
    shape = model_shape(config.model)
    positions = (shape or {}).get("max_position_embeddings")
    where = f"{experiment.path}: cell {cell.name}"
    if positions and config.max_length > positions:
        raise ExperimentError(f"{where}: max_length {config.max_length} is beyond the {positions} positions "
                              f"{config.model} has (max_position_embeddings): choose max_length {positions} or less")
    if steps is None or steps.value is None or steps.value < MAX_STEPS:
        return
    planned = f"{significant(steps.value) if math.isfinite(steps.value) else 'infinitely many'} optimiser steps"
    card, n = experiment.cards[cell.task], (given or {}).get(cell.task)
    published = (card.sizes.of("train", config.train_lang) if card.sizes else None) or config.batch_size
    if n and config.epochs * math.ceil(published / config.batch_size) < MAX_STEPS:  # the option, not the epochs
        raise ExperimentError(f"--examples {cell.task}={n}: {planned} ({n:,} examples in {config.batch_size}-example "
                              f"batches, {config.epochs:g} epochs) is more than any run can count or finish; give "
                              f"{cell.task}'s real number of training examples (--examples {cell.task}=N)")
    raise ExperimentError(f"{where}: {planned} (epochs {config.epochs:g} over {config.batch_size}-example batches) "
                          "is more than any run can count or finish; give a smaller epochs or max_steps")


def _serves_data_trees(choice: str) -> bool:
    """Whether the parser a choice names serves the data's own trees (`gold`): it parses nothing."""
    try:
        return bool(getattr(resolve_parser_choice(choice).entry.load(), "data_trees", False))
    except (ParserChoiceError, ImportError):
        return False


def _product(*parts) -> float | None:
    values = [p.value if isinstance(p, Figure) else p for p in parts]
    return None if any(v is None for v in values) else math.prod(values)


def _steps(config, examples: Figure) -> Figure:
    """A cell's optimiser steps (`total_steps`); where its epochs make more than `MAX_STEPS` (an infinite count
    too), that number as a float, for `_refuse_untrainable` to refuse."""
    if config.max_steps:
        return Figure(config.max_steps, GIVEN, f"max_steps {config.max_steps}: each cell stops at that step")
    if examples.value is None:
        return Figure(None, UNKNOWN, examples.why)
    planned = config.epochs * math.ceil(examples.value / config.batch_size)
    if not planned < MAX_STEPS:
        return Figure(planned, examples.basis, examples.why)
    return Figure(total_steps(config, int(examples.value)), examples.basis, examples.why)


class _ExampleCounter:
    """Examples counted in the local data, once per task, language, split and folder; where the data is not
    here, the card's published size of the split (given), else unknown."""

    def __init__(self, given: dict[str, int], source: str = "FILE"):
        self.given = given
        self.source = source
        self.counts: dict[tuple, Figure] = {}
        self.missing: dict[str, dict[str, list[str]]] = {}  # folder -> task -> "split lang" not here
        self.unsized: dict[str, list[str]] = {}  # task -> "split lang" neither here nor published

    def count(self, card, lang: str, split: str, data_dir: str | None) -> Figure:
        key = (card.name, lang, split, data_dir)
        if key not in self.counts:
            try:
                n = len(load_examples(card, lang, split, data_dir, skip_bad_rows=True, allow_hub=False)[0])
                self.counts[key] = Figure(n, COUNTED)
            except XsynError:
                published = card.sizes.of(split, lang) if card.sizes else None
                self.counts[key] = (Figure(None, UNKNOWN) if published is None else
                                    Figure(published, GIVEN, f"{card.name}: published sizes ({card.sizes.source})"))
                folder = str(data_dir or default_data_dir(card))
                self.missing.setdefault(folder, {}).setdefault(card.name, []).append(f"{split} {lang}")
                if published is None:
                    self.unsized.setdefault(card.name, []).append(f"{split} {lang}")
        return self.counts[key]

    @property
    def notes(self) -> list[str]:
        """What was not found here, said once: the tasks, where they were looked for, and how to give them."""
        if not self.missing:
            return []
        folders = sorted(self.missing)
        missing: dict[str, list[str]] = {}
        for by_task in self.missing.values():
            for task, splits in by_task.items():
                missing.setdefault(task, []).extend(splits)
        said = [f"{task} ({', '.join(splits)})" if len(splits) <= 3 else f"{task} ({len(splits)} splits and languages)"
                for task, splits in sorted(missing.items())]
        lines = [f"data not on this machine for {', '.join(said)} (looked in {_folders(folders)}): counted with the "
                 "cards' published sizes where given (g), else unknown"]
        for task, splits in self.unsized.items():
            lines.append(f"{task}: no published size for {', '.join(splits[:6])}"
                         + (f" and {len(splits) - 6} more" if len(splits) > 6 else ""))
        lines.append(f"to count them: `xsyn experiment prepare {self.source}` (fetches the data), --data-dir DIR "
                     "with DIR/<task>, or --examples TASK=N (a task's training examples)")
        return lines

    def training_examples(self, experiment: Experiment, cell: Cell, config) -> Figure:
        card = experiment.cards[cell.task]
        if cell.task in self.given:
            found = Figure(self.given[cell.task], GIVEN, f"--examples {cell.task}={self.given[cell.task]}")
        else:
            found = self.count(card, config.train_lang, "train", config.data_dir)
            if found.value is None:
                found = Figure(None, UNKNOWN, f"{cell.task}: no training data here (--data-dir, or --examples "
                                              f"{cell.task}=N)")
            fraction = config.dev_fraction or card.dev_fraction
            if found.value is not None and "validation" not in card.splits and fraction:
                n = found.value
                found = Figure(n - round(n * fraction), EXTRAPOLATED, "; ".join(filter(None, [
                    found.why, f"{cell.task}: {fraction:g} of train held out as the dev set"])))
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
            if split == "train" and cell.task in self.given:
                n = Figure(self.given[cell.task], GIVEN, f"--examples {cell.task}={self.given[cell.task]}")
            else:
                n = self.count(card, lang, split, config.data_dir)  # the notes name what is missing
            found = n.times(len(card.segments)) if n.value is not None else Figure(None, UNKNOWN)
            before = per_lang.get(lang, Figure(0, COUNTED))
            per_lang[lang] = combine(figure_sum(before, found), before, found)
        return per_lang


def _folders(folders: list[str]) -> str:
    """Data folders, one per task, said as one pattern where they share a parent (`~/.cache/xsyn/data/<task>`)."""
    parents = {str(Path(folder).parent) for folder in folders}
    if len(folders) > 1 and len(parents) == 1:
        return str(Path(parents.pop()) / "<task>")
    return ", ".join(folders)


def bench_step_seconds(bench: StepBench | None, config, variant: str) -> Figure:
    """The bench's step time for the cell's precision (`auto` as it resolves on the bench's device) and variant,
    scaled to its model and tokens per step."""
    if bench is None:
        return Figure(None, UNKNOWN, "unmeasured device")
    dtype = bench_dtype(config.mixed_precision, bench.device)
    basis, why, derived = MEASURED, f"{bench.device} {dtype}", bench.derived.get(dtype, "")
    if derived:  # (the figure's reasons are parted by "; ": the derivation is said once in the notes)
        basis, why = EXTRAPOLATED, derived
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
    if scale < MIN_SCALE:
        return Figure(None, UNKNOWN, f"{config.batch_size} x {config.max_length} tokens on {config.model} is "
                                     f"x{scale:.2g} the matrix work {bench.source.name} measured: a step that "
                                     "small is bound by fixed costs (kernel launches, the optimiser) that the "
                                     "benchmark cannot separate (time it on that device with `xsyn bench model` "
                                     "at this shape)")
    small = " (less work than measured: a lower bound, the fixed costs of a step do not shrink)" if scale < 1 else ""
    scaled = (f"{bench.device} {dtype} at {bench_tokens} tokens a step on mBERT's shape, x{scale:.3g} for "
              f"{config.batch_size} x {config.max_length} tokens on {config.model}{small}")
    return Figure(row["step_seconds"] * scale, EXTRAPOLATED, "; ".join(filter(None, [derived, scaled])))


MIN_SCALE = 0.1  # below a tenth of the measured matrix work, a scaled step time says nothing (fixed costs rule)


def _matrix_cost(shape: Mapping[str, Any], tokens: int) -> float:
    """What a step's matrix products cost, up to a constant: per token and layer, the attention projections
    (4 h^2) and the feed-forward block (2 h x intermediate). Attention's own n^2 term is left out."""
    hidden, inner = shape["hidden_size"], shape.get("intermediate_size", 4 * shape["hidden_size"])
    return shape["num_hidden_layers"] * (4 * hidden * hidden + 2 * hidden * inner) * tokens


# --------------------------------------------------------------------------- showing it

MARKS = {MEASURED: "m", EXTRAPOLATED: "x", COUNTED: "c", GIVEN: "g", UNKNOWN: "?"}


def _shown(figure: Figure, spec: str, scale: float = 1.0, unit: str = "") -> str:
    """The figure (x `scale`) in `spec` (`sig`: three significant digits) with its unit and mark."""
    shown = significant if spec == "sig" else (lambda value: format(value, spec))
    value = "?" if figure.value is None else shown(figure.value * scale)
    return f"{value}{unit} {MARKS[figure.basis]}"


def significant(value: float, digits: int = 3) -> str:
    """`value` to `digits` significant digits, in plain notation with thousands separators (never 1.2e+03)."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    rounded = round(value, digits - 1 - math.floor(math.log10(abs(value))))
    magnitude = math.floor(math.log10(abs(rounded)))  # of the rounded value: 9.996 becomes 10.0, not 10.00
    return f"{rounded:,.{max(0, digits - 1 - magnitude)}f}"


def human_hours(hours: float | None) -> str:
    """A duration given in hours, in the unit a person reads it in: seconds, minutes or hours (3 significant
    digits); `?` for an unknown one."""
    if hours is None:
        return "?"
    seconds = hours * 3600
    if seconds < 90:
        return f"{significant(seconds)} s"
    if seconds < 90 * 60:
        return f"{significant(seconds / 60)} min"
    return f"{significant(hours)} h"


def _time(figure: Figure) -> str:
    return f"{human_hours(figure.value)} {MARKS[figure.basis]}"


def marks_line() -> str:
    """What the marks after each figure mean, in words."""
    return ("Each figure is followed by a mark saying what it rests on: " + ", ".join(
        f"{mark} = {basis}" for basis, mark in MARKS.items()) + " (see the notes).")


def plan_lines(plan: Plan) -> list[str]:
    """The plan as the terminal shows it: a table per task (a row per variant, its grid points summed), the
    totals on one GPU and on `plan.gpus`, and what each figure rests on (each reason once)."""
    bench = plan.step_bench
    lines = [f"Plan: {plan.title} on {plan.device} (" + (f"step times measured on {bench.device}, {bench.date}, "
             f"{bench.source}" if bench else f"{plan.device} is an unmeasured device") +
             f"; parsing with {plan.parse_workers} workers)", marks_line()]
    header = ["system", "cells", "train examples", "steps/cell", "s/step", "time/cell", "time", "disk/cell GB",
              "GPU GB/cell"]
    said = ""  # the grid line is said again only where it differs from the task above
    for task in plan.tasks:
        parses = "; ".join(f"{lang} {_shown(task.sentences[lang], ',.0f')}, {_time(seconds.times(1 / 3600))}"
                           for lang, seconds in task.parse_seconds.items())
        grid = _grid_line(task.systems)
        lines += ["", f"{task.task} · {task.model} · parser {task.parser}",
                  *_table(header, [_folded_row(points) for points in _by_variant(task.systems).values()]),
                  *_wrapped(grid if grid != said else "grid points summed in a row: as above"),
                  *_wrapped(f"parse (sentences, time): {parses}")]
        said = grid
    cells = sum(len(s.cells) for task in plan.tasks for s in task.systems)
    parse_figures = [f.times(1 / 3600) for task in plan.tasks for f in task.parse_seconds.values()]
    lines += ["", f"Total: {cells:,} cells; training {_total(list(plan.cell_hours.values()), 'cells')} one cell at a "
                  f"time, {_time(plan.hours_on_gpus)} on {plan.gpus} GPUs at once (--gpus N; one cell a GPU, the "
                  f"longest first); parsing {_total(parse_figures, 'languages of the tasks')}; checkpoints "
                  f"{_shown(plan.disk, 'sig', 1e-9, ' GB')}."]
    whys = figure_whys(f for f in _figures(plan) if f.basis != MEASURED).split("; ")
    notes = [line for line in dict.fromkeys([*plan.notes, *whys]) if line]
    return lines + (["", "Notes:", *[f"- {line}" for line in notes]] if notes else [])


def _wrapped(text: str) -> list[str]:
    return textwrap.wrap(text, 116, initial_indent="  ", subsequent_indent="    ") if text else []


def _by_variant(systems: list[SystemPlan]) -> dict[str, list[SystemPlan]]:
    found: dict[str, list[SystemPlan]] = {}
    for system in systems:
        found.setdefault(system.variant or system.system, []).append(system)
    return found


def _folded_row(points: list[SystemPlan]) -> list[str]:
    """One variant's row: its grid points' cells together, a figure that differs between them as its range."""
    label = points[0].system if len(points) == 1 else f"{points[0].variant} ({len(points)} grid points)"
    hours = [p.hours for p in points]
    return [label, str(sum(len(p.cells) for p in points)), _span([p.examples for p in points], ",.0f"),
            _span([p.steps for p in points], ",.0f"), _span([p.step_seconds for p in points], ".3g"),
            _span([p.hours_per_cell for p in points], "time"), _time(combine(figure_sum(*hours), *hours)),
            _span([p.disk_per_cell for p in points], ".3g", 1e-9),
            _span([p.memory_per_cell for p in points], ".3g", 1e-9)]


def _span(figures: list[Figure], spec: str, scale: float = 1.0) -> str:
    """Figures of one column as one: the value where they agree, else lowest-highest; the weakest mark."""
    values = [f.value for f in figures]
    if len(set(values)) == 1 or None in values:
        return _time(figures[0]) if spec == "time" else _shown(figures[0] if None not in values else
                                                                next(f for f in figures if f.value is None), spec,
                                                                scale)
    show = (lambda v: human_hours(v)) if spec == "time" else (lambda v: format(v * scale, spec))
    return f"{show(min(values))}–{show(max(values))} {MARKS[combine(0.0, *figures).basis]}"


def _grid_line(systems: list[SystemPlan]) -> str:
    """The settings the folded rows sum over, per variant: `sla: learning_rate 2e-05|3e-05 x epochs 3|5|10`."""
    parts = []
    for variant, points in _by_variant(systems).items():
        values: dict[str, list[Any]] = {}
        for point in points:
            for key, value in point.grid:
                values.setdefault(key, [])
                if value not in values[key]:
                    values[key].append(value)
        if len(points) > 1:
            parts.append(f"{variant}: " + " x ".join(f"{k} {'|'.join(map(str, v))}" for k, v in values.items()))
    return "grid points summed in a row: " + "; ".join(parts) if parts else ""


def _total(figures: list[Figure], what: str) -> str:
    """A sum of figures with its mark; where some are unknown, the sum of the others as a lower bound, saying
    how many are missing (their reasons are in the notes)."""
    known = [f for f in figures if f.value is not None]
    if len(known) == len(figures) or not known:
        return _time(combine(figure_sum(*figures), *figures) if figures else Figure(0.0, MEASURED))
    return (f"at least {_time(combine(figure_sum(*known), *known))} ({len(figures) - len(known)} of {len(figures)} "
            f"{what} unknown)")


def _figures(plan: Plan) -> list[Figure]:
    found = []
    for task in plan.tasks:
        for s in task.systems:
            found += [s.examples, s.steps, s.step_seconds, s.disk_per_cell, s.memory_per_cell]
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
                                    "disk_bytes_per_cell": figure(s.disk_per_cell),
                                    "device_bytes_per_cell": figure(s.memory_per_cell)} for s in t.systems],
                       "sentences": {k: figure(v) for k, v in t.sentences.items()},
                       "parse_seconds": {k: figure(v) for k, v in t.parse_seconds.items()}} for t in plan.tasks],
            "hours": figure(plan.hours), "gpus": plan.gpus, "hours_on_gpus": figure(plan.hours_on_gpus),
            "parse_hours": figure(plan.parse_hours), "disk_bytes": figure(plan.disk),
            "notes": plan.notes}


# --------------------------------------------------------------------------- what a cell's model takes: its shape, its
# parameters, the disk its checkpoints hold and the device memory it trains in (`experiment run --cells-per-gpu`
# packs cells by the last)

OPTIMIZER_MOMENTS = 2  # AdamW keeps two float32 tensors per weight
FLOAT_BYTES = 4


def model_shape(model: str) -> dict[str, Any] | None:
    """A model's config: a published checkpoint xsyn knows, the `tiny` preset, a local folder's config.json,
    or the hub cache's copy; None where none is on this machine."""
    known = {TINY: TINY_SHAPE, **CHECKPOINT_SHAPES}
    if model in known:
        return known[model]
    file: Path | str | None = Path(model) / MODEL_CONFIG
    if not Path(file).is_file():
        from huggingface_hub.file_download import try_to_load_from_cache  # (the hub's download stack)

        file = try_to_load_from_cache(model, MODEL_CONFIG)
    if isinstance(file, (str, Path)) and Path(file).is_file():
        return json.loads(Path(file).read_text(encoding="utf-8"))
    return None


def tokenizer_vocab_size(experiment: Experiment, config) -> int | None:
    """The vocabulary a cell's model gets from its tokenizer, where the model's config gives none (the tiny
    preset): the synthetic benchmark's own vocabulary, or a local vocab.txt's lines; None: mBERT's."""
    tokenizer = config.tokenizer
    if not tokenizer:
        return None
    if tokenizer == str(experiment.runs_dir / SYNTH_VOCAB):
        return len(vocabulary())
    file = Path(tokenizer)
    if file.is_dir():
        file = file / "vocab.txt"
    if file.is_file() and file.suffix == ".txt":
        return sum(1 for line in file.read_text(encoding="utf-8").splitlines() if line.strip())
    return None


def checkpoint_disk(model: str, keep: int, benchmarks: Benchmarks, vocab: int | None = None) -> Figure:
    """Bytes a finished cell holds: `keep` resumable states (weights + AdamW moments) and the best weights."""
    shape = model_shape(model)
    if shape is None:
        return Figure(None, UNKNOWN, f"the shape of {model} is not known here")
    measured = next((benchmarks.sizes[name] for name, known in ENCODER_SHAPES.items()
                     if known.config == shape and name in benchmarks.sizes), None)
    if measured:
        weights = FLOAT_BYTES * measured["parameters"]
        return Figure(keep * (weights + measured["optimizer_state_bytes"]) + weights, MEASURED,
                      f"save_total_limit {keep}")
    weights = FLOAT_BYTES * parameter_count(shape, vocab)
    return Figure(weights * (keep * (1 + OPTIMIZER_MOMENTS) + 1), EXTRAPOLATED,
                  f"save_total_limit {keep}, parameters counted from {model}'s config")


TRAINING_BYTES_PER_PARAMETER = FLOAT_BYTES * (2 + OPTIMIZER_MOMENTS)  # float32 weights, gradients, AdamW moments
CUDA_CONTEXT_BYTES = 512 * 2 ** 20  # a process's CUDA context and allocator slack beside its tensors (assumed)


def device_memory(bench: StepBench | None, config, variant: str, vocab: int | None = None) -> Figure:
    """Device bytes one training cell holds at its peak: weights, gradients and AdamW's moments of its own
    model, the activations the benchmark measured (its peak less its model's own 16 bytes a parameter) scaled
    to the cell's tokens and layer sizes, and a CUDA context. What `--cells-per-gpu` packs by."""
    shape = model_shape(config.model)
    if bench is None or shape is None:
        return Figure(None, UNKNOWN, "unmeasured device" if bench is None else f"the shape of {config.model} is "
                                                                             "not known here")
    dtype = bench_dtype(config.mixed_precision, bench.device)
    dtype = dtype if dtype in bench.rows else next(iter(bench.rows), dtype)
    row = bench.rows.get(dtype, {}).get(variant, {})
    peak = row.get("peak_bytes")
    if not isinstance(peak, (int, float)) or not peak > 0:
        return Figure(None, UNKNOWN, f"{bench.source.name} has no peak memory for {variant} ({dtype})")
    tokens = round(row["tokens_per_second"] * row["step_seconds"])
    activations = max(0.0, peak - TRAINING_BYTES_PER_PARAMETER * parameter_count(bench.shape))
    scale = _activation_cost(shape, config.batch_size * config.max_length) / _activation_cost(bench.shape, tokens)
    held = TRAINING_BYTES_PER_PARAMETER * parameter_count(shape, vocab)
    derived = " (derived: see the note on its step times)" if dtype in bench.derived else ""
    why = (f"device memory: {bench.device} {dtype} peaks{derived}, activations x{scale:.3g} for "
           f"{config.batch_size} x {config.max_length} tokens on {config.model}, "
           f"{CUDA_CONTEXT_BYTES / 2 ** 30:g} GiB CUDA context")
    return Figure(held + activations * scale + CUDA_CONTEXT_BYTES, EXTRAPOLATED, why)


def _activation_cost(shape: Mapping[str, Any], tokens: int) -> float:
    """What a step's saved activations take, up to a constant: per token and layer, the hidden and
    feed-forward widths (attention's n^2 scores left out)."""
    hidden = shape["hidden_size"]
    return shape["num_hidden_layers"] * (hidden + shape.get("intermediate_size", 4 * hidden)) * tokens


def parameter_count(shape: Mapping[str, Any], vocab: int | None = None) -> int:
    """BERT's parameter count from its config (embeddings, layers, pooler); a config without a vocabulary (the
    tiny preset) takes its tokenizer's, `vocab`, by default mBERT's."""
    h = shape["hidden_size"]
    inner = shape.get("intermediate_size", 4 * h)
    vocab = shape.get("vocab_size", vocab or ENCODER_SHAPES["mbert"].config["vocab_size"])
    embeddings = (vocab + shape.get("max_position_embeddings", 512) + shape.get("type_vocab_size", 2)) * h + 2 * h
    layer = 4 * (h * h + h) + 2 * h * inner + inner + h + 4 * h  # attention, feed-forward, two layer norms
    return embeddings + shape["num_hidden_layers"] * layer + h * h + h
