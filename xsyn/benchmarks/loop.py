"""`xsyn bench loop`: the real training loop on a task's data against the bare step on the same batches.

For each batching scheme (`BATCHINGS`: the run's settings, and the random, unrounded batches xsyn drew
before issue 44) the same model, fresh from the same seed, is trained for `steps` optimiser steps twice:

- the loop: `xsyn.training.driver.train` itself, as `xsyn finetune` runs it (collate, copy, forward,
  backward, clipping, the step's host read, optimizer, logging, progress), with the dev evaluation left
  out. A step's wall (and CPU) time is from its first collate to the next step's, so it holds the
  logging; the loop runs one step more than is timed (the last one ends in the run's final save);
- the bare step: forward, backward and optimizer step on the same batches, collated and copied to the
  device beforehand (the device synchronised after each step, as the loop's host read does).

Per scheme: examples/s (wall, and per CPU second: another process's load takes wall time, not CPU time,
so on a shared CPU the CPU figures compare where the wall ones scatter; run with OMP_NUM_THREADS=1),
loop/bare, step seconds (median, p90), the padded share and distinct (B, T) of the steps run and of a
whole epoch, the distinct shapes of the dev evaluation, and what the first occurrence of a shape costs:
its step's seconds less the median of that shape's later steps (the plan a GPU builds per shape: cuDNN's
attention plans, autotuned kernels; a compiled model's recompile).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import replace
from itertools import accumulate
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed

from xsyn.models.tokenizers import model_tokenizer
from xsyn.models.variants import baseline_name
from xsyn.run.inference import padding, prediction_figures
from xsyn.run.task_data import dev_holdout, load_task_data, make_parsers
from xsyn.run.train import FinetuneTask, build_run_model, with_device_rules
from xsyn.run.workflow import finetune_settings
from xsyn.training.driver import train
from xsyn.training.folder import RunFolder
from xsyn.training.log import read_step_log
from xsyn.training.loop import make_optimizer, planned_batches, to_device
from xsyn.training.precision import run_precision
from xsyn.utils.errors import OptionError
from xsyn.utils.io import work_folder

# name -> the settings it changes; "default": the run's own (defaults, card, --set), "random": as before issue 44
BATCHINGS: dict[str, dict[str, Any]] = {
    "default": {},
    "random": {"group_by_length": False, "pad_to_multiple_of": 1, "max_batch_lengths": None},
}


class _TimedTask(FinetuneTask):
    """Fine-tuning without the dev evaluation, stamping the wall and CPU clocks when each step's first
    micro-batch is collated (the calls that start a step are known from the plan: `step_calls`)."""

    step_calls: set[int]

    def start(self, plan: Sequence[list[int]]) -> None:
        self.calls, self.stamps = 0, []
        sizes = [len(self.micro_batches(batch, 1)) for batch in plan]
        self.step_calls = set(accumulate(sizes[:-1], initial=0))

    def collate(self, indices: list[int]):
        if self.calls in self.step_calls:
            self.stamps.append((time.perf_counter(), time.process_time()))
        self.calls += 1
        return super().collate(indices)

    def evaluate(self) -> None:
        return None


def run_loop_bench(task: str, model: str, *, variant: str | None = None, tokenizer: str | None = None,
                   data_dir: str | None = None, parser: str = "chain", steps: int = 40,
                   batch_size: int | None = None, max_length: int | None = None,
                   batchings: Sequence[str] = ("default", "random"), sets: Sequence[str] = (), seed: int = 1,
                   workdir: str | Path | None = None) -> dict[str, Any]:
    """Time the loop and the bare step of each batching on the task's training rows (see the module docstring);
    `sets` are `--set KEY=VALUE` settings of the run. The runs and caches go to `workdir`, kept; without it to a
    temporary folder, removed at the end."""
    unknown = [name for name in batchings if name not in BATCHINGS]
    if unknown or not batchings:
        raise OptionError(f"--batching {','.join(unknown) or '(none)'}: choose among {', '.join(BATCHINGS)}")
    sets = list(sets)  # `variant=NAME` among them chooses the variant, as `variant` does
    variant = next((s.partition("=")[2] for s in sets if s.startswith("variant=")), variant)
    sets = [s for s in sets if not s.startswith("variant=")]
    with work_folder(workdir, "xsyn-bench-loop-") as work:
        config, _ = finetune_settings(task, variant or baseline_name(), sets=sets, model=model, tokenizer=tokenizer,
                                      data_dir=data_dir, parser=parser, max_steps=steps + 1, eval_every=steps + 1,
                                      seed=seed, batch_size=batch_size, max_length=max_length,
                                      cache_dir=str(work / "cache"))
        config = replace(config, log_every=1)
        data = load_bench_data(config)
        schemes = {name: _scheme(replace(config, **BATCHINGS[name], output_dir=str(work / name)), data)
                   for name in batchings}
    result = {"task": config.card.name, "model": model, "variant": config.variant, "steps": steps,
              "batch_size": config.batch_size, "max_length": config.max_length, "seed": seed,
              "threads": _threads(), "batchings": schemes, **({"workdir": str(workdir)} if workdir else {})}
    if {"default", "random"} <= set(schemes):
        result["default_over_random"] = {clock: schemes["default"]["loop"][clock] / schemes["random"]["loop"][clock]
                                         for clock in ("examples_per_second", "examples_per_cpu_second",
                                                       "real_tokens_per_second", "real_tokens_per_cpu_second")}
    return result


def _threads() -> int:
    return torch.get_num_threads()


def load_bench_data(config) -> dict[str, Any]:
    """The task's training rows (and the dev rows, for the evaluation's shapes), featurised once for every scheme."""
    tokenizer, card, parsers = model_tokenizer(config.model, config.tokenizer), config.card, make_parsers(config)
    langs, holdout = {name: config.train_lang for name in card.segments}, dev_holdout(card, config, None)
    train, names = load_task_data(card, config, tokenizer, "train", langs, parsers=parsers,
                                  limit=config.max_train_examples, holdout=holdout)
    dev, _ = load_task_data(card, config, tokenizer, "validation", langs, names=names, parsers=parsers,
                            limit=config.max_eval_examples, holdout=holdout)
    return {"tokenizer": tokenizer, "names": names, "train": train, "dev": dev}


def _scheme(config, data: dict[str, Any]) -> dict[str, Any]:
    """One batching's loop and bare step, and its batches' figures."""
    task = bench_task(config, data)
    config = task.config  # its `auto` settings resolved on the device
    plan = list(planned_batches(config.max_steps, task.batches_of_epoch))
    loop = _loop(config, task, plan)
    plan = plan[:-1]  # the timed steps (the last one ran untimed)
    bare = _bare(config, bench_task(config, data), plan)
    shapes_of = [(len(batch), record["length"]) for batch, record in zip(plan, loop.pop("records"))]
    loop["first_shape_seconds"] = first_shape_costs(shapes_of, loop["step_seconds"])
    bare["first_shape_seconds"] = first_shape_costs(shapes_of, bare["step_seconds"])
    return {"settings": {k: getattr(config, k) for k in ("group_by_length", "pad_to_multiple_of", "max_batch_lengths")},
            "loop": _summary(loop, plan, task), "bare": _summary(bare, plan, task),
            "loop_over_bare": sum(loop["step_seconds"]) / sum(bare["step_seconds"]),
            "batches": task.batch_figures(plan), "epoch": task.batch_figures(task.batches_of_epoch(0)),
            "evaluation": prediction_figures(data["dev"].rows(), config.eval_batch_size, 1,
                                             **padding(config, task.accelerator.device.type))}


def bench_task(config, data: dict[str, Any], kind: type[FinetuneTask] = _TimedTask) -> FinetuneTask:
    """The fine-tuning task (a `kind`) on a fresh model (the same weights for every scheme: built from the
    run's seed), batching and collating as `xsyn finetune` does with these settings."""
    set_seed(config.seed)
    model = build_run_model(config, config.card, data["tokenizer"], data["names"])
    accelerator = Accelerator(mixed_precision=run_precision(config.mixed_precision))
    config = with_device_rules(config, {}, accelerator.device.type)
    return kind(config, accelerator, RunFolder(config.output_dir), model, data["tokenizer"], data["names"],
                      data["train"], data["dev"])


def _loop(config, task: _TimedTask, plan: list[list[int]]) -> dict[str, Any]:
    """The real loop over `plan`: the wall and CPU seconds of each step but the last, and their log records."""
    folder = RunFolder(config.output_dir)
    task.start(plan)
    train(config, task, task.accelerator, folder, show_progress=False)
    records = [r for r in read_step_log(folder.train_log) if "loss" in r]
    return {"step_seconds": [b[0] - a[0] for a, b in zip(task.stamps, task.stamps[1:])],
            "cpu_seconds": [b[1] - a[1] for a, b in zip(task.stamps, task.stamps[1:])], "records": records[:-1]}


def _bare(config, task: _TimedTask, plan: list[list[int]]) -> dict[str, Any]:
    """Forward, backward and optimizer step over `plan`'s batches, collated and on the device beforehand."""
    accelerator = task.accelerator
    task.model, optimizer = accelerator.prepare(task.model, make_optimizer(task.model, config.learning_rate,
                                                                           config.weight_decay, config.adamw_kernel,
                                                                           accelerator.device))
    task.model.train()
    # the run's own cut of each batch, each micro-batch weighted by its share of the batch's rows, as the loop does
    steps = [[(to_device(FinetuneTask.collate(task, micro), accelerator.device), len(micro) / len(batch))
              for micro in task.micro_batches(batch, 1)] for batch in plan]
    cuda = accelerator.device.type == "cuda"
    wall, cpu = [], []
    for micros in steps:
        started, cpu_started = time.perf_counter(), time.process_time()
        for inputs, share in micros:
            (task.forward(inputs)["loss"] * share).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize()
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - cpu_started)
    return {"step_seconds": wall, "cpu_seconds": cpu}


def _summary(timed: dict[str, Any], plan: list[list[int]], task: FinetuneTask) -> dict[str, Any]:
    """Throughput in examples and in real (unpadded) tokens: a length-grouped run's first steps hold the
    longest rows of their window, so over a part of an epoch its examples are longer than random ones."""
    wall, cpu, rows = timed["step_seconds"], timed["cpu_seconds"], sum(len(batch) for batch in plan)
    tokens = task.batch_figures(plan)["real_tokens"]
    return {"examples_per_second": rows / sum(wall), "examples_per_cpu_second": rows / sum(cpu),
            "real_tokens_per_second": tokens / sum(wall), "real_tokens_per_cpu_second": tokens / sum(cpu),
            "step_seconds_median": statistics.median(wall), "step_seconds_p90": percentile(wall, 0.9),
            "seconds": sum(wall), "first_shape_seconds": timed["first_shape_seconds"], "step_seconds": wall}


def percentile(values: Sequence[float], q: float) -> float:
    """The q-quantile of `values` by linear interpolation between the closest ranks (numpy's default)."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def first_shape_costs(shapes: Sequence[tuple[int, int]], seconds: Sequence[float]) -> dict[str, Any]:
    """What a shape's first step costs beyond its later ones: per shape that recurs, its first step's seconds
    less the median of its later steps; their median and sum, and how many shapes recurred of how many."""
    by_shape: dict[tuple[int, int], list[float]] = {}
    for shape, value in zip(shapes, seconds):
        by_shape.setdefault(shape, []).append(value)
    extra = [times[0] - statistics.median(times[1:]) for times in by_shape.values() if len(times) > 1]
    return {"median": statistics.median(extra) if extra else None, "total": sum(extra),
            "shapes": len(by_shape), "recurring": len(extra)}
