"""`xsyn bench eval`: what generalized evaluation costs per pair, and how long training waits for data.

- `generalized_pair_cost_ratio`: seconds to evaluate one language pair over seconds to evaluate one
  language of the same size, both with parses cached and features built from scratch (the median
  over all pairs and over all languages);
- `data_wait_fraction`: the share of training step time spent fetching and collating batches, in
  the run's own loop on this machine's device;
- what that share would be on a faster device: `collate_seconds_per_batch` (collating one training
  batch on the host), and, for a step of `simulated_step_seconds` (given, or the step measured
  here without its data wait), `data_wait_fraction_inline` (the loop collates each batch itself, as
  training does). The step is simulated by the host waiting that long, as it waits on a GPU step;
  the simulated batches are the first of the run's own first epoch.

Both are measured in this process on the synthetic benchmark with the tiny model (the worst case
for the data fraction, since its steps are the shortest), or on a task given with --task.
"""

from __future__ import annotations

import shutil
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from xsyn.benchmarks.loop import bench_task, load_bench_data
from xsyn.data.cards import load_card
from xsyn.data.synth import write_vocab
from xsyn.models.names import TINY
from xsyn.models.variants import DEFAULT_VARIANT
from xsyn.run.evaluation import evaluate_run
from xsyn.run.settings import resolve
from xsyn.run.train import FinetuneTask, finetune
from xsyn.utils.errors import OptionError
from xsyn.utils.io import work_folder
from xsyn.utils.schema import did_you_mean


def simulated_data_wait(plan: Sequence[Sequence[int]], collate: Callable, step_seconds: float) -> float:
    """The share of loop time spent collating batches when each step takes `step_seconds` of device time
    (the host sleeps that long, as it waits on a GPU step) and the loop collates each batch (its row
    indices) itself."""
    start, wait = time.perf_counter(), 0.0
    for indices in plan:
        fetched = time.perf_counter()
        collate(indices)
        wait += time.perf_counter() - fetched
        time.sleep(step_seconds)
    return wait / (time.perf_counter() - start)


def run_eval_bench(task: str = "synth", model: str = TINY, tokenizer: str | None = None,
                   langs: list[str] | None = None, data_dir: str | None = None, parser: str = "chain",
                   train_steps: int = 60, workdir: str | Path | None = None, step_seconds: float | None = None,
                   simulated_batches: int = 200) -> dict[str, Any]:
    card = load_card(task)
    unknown = [lang for lang in langs or () if lang not in card.languages]
    if unknown:  # found now, not after the training it would follow
        raise OptionError(f"--langs: task {card.name!r} has no language {', '.join(unknown)} (it has "
                          f"{', '.join(card.languages)}){did_you_mean(unknown[0], card.languages)}")
    with work_folder(workdir, "xsyn-bench-eval-") as work:  # without a workdir: removed at the end
        if task == "synth" and tokenizer is None:
            tokenizer = str(write_vocab(work / "vocab.txt"))
        train_lang = card.train_languages[0]
        config = resolve(task, DEFAULT_VARIANT, card, {}, {
            "model": model, "tokenizer": tokenizer, "train_lang": train_lang, "output_dir": str(work / "run"),
            "cache_dir": str(work / "cache"), "data_dir": data_dir, "parser": parser, "max_steps": train_steps,
            "eval_every": train_steps, "seed": 1})
        summary = finetune(config, progress=False)
        waits = _data_wait_at(config, summary, step_seconds, simulated_batches)
        langs = langs or list(card.languages)
        evaluate_run(work / "run", split="test", langs=langs, output_dir=work / "warm", progress=False)
        shutil.rmtree(work / "cache" / "features")  # keep the parses, rebuild every feature
        result = evaluate_run(work / "run", split="test", langs=langs, generalized=True,
                              output_dir=work / "measured", progress=False)
    seconds = {key: (spent, result["n_examples"][key]) for key, spent in result["seconds"].items()}
    lang_cost = statistics.median(s / n for k, (s, n) in seconds.items() if "-" not in k)
    pair_cost = statistics.median(s / n for k, (s, n) in seconds.items() if "-" in k)
    return {"task": task, "model": model, "languages": langs, "pairs": len(seconds) - len(langs),
            "examples_per_language": {k: n for k, (_, n) in seconds.items() if "-" not in k},
            "seconds_per_example_language": lang_cost, "seconds_per_example_pair": pair_cost,
            "generalized_pair_cost_ratio": pair_cost / lang_cost,
            "data_wait_fraction": summary["data_wait_fraction"], "train_steps": summary["steps"],
            "average": result["average"], **({"workdir": str(workdir)} if workdir else {}), **waits}


def _data_wait_at(config, summary: dict[str, Any], step_seconds: float | None,
                  simulated_batches: int) -> dict[str, Any]:
    """Collation per batch, and the data-wait share at a given (or the measured) step: the run's own batches
    (its first epoch's, cut into micro-batches), collated as its loop collates them (its padding, its
    variant's tree fields only)."""
    # features and parses come from the run's caches
    task = bench_task(config, load_bench_data(config), FinetuneTask)
    plan = [micro for batch in task.batches_of_epoch(0) for micro in task.micro_batches(batch, 1)][:simulated_batches]
    collate_seconds = []
    for indices in plan:
        started = time.perf_counter()
        task.collate(indices)
        collate_seconds.append(time.perf_counter() - started)
    compute = summary["train_seconds"] * (1 - summary["data_wait_fraction"]) / max(summary["steps"], 1)
    step = compute if step_seconds is None else step_seconds
    return {"collate_seconds_per_batch": statistics.median(collate_seconds), "step_seconds_compute": compute,
            "simulated_step_seconds": step, "simulated_batches": len(plan),
            "data_wait_fraction_inline": simulated_data_wait(plan, task.collate, step)}
