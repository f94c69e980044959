"""`xsyn bench peer`: xsyn against the peer a user would pick instead, transformers' `Trainer`, on the same rows
and settings.

The rows are the first `rows` of a PAWS-X file in XTREME's layout (`dev-en.tsv`: the English dev pairs); a seeded
`held_out` of them is kept apart for the accuracy, the others are the training data. The settings are xsyn's own,
resolved as `xsyn finetune` resolves them for the plain model (`none`) with the batch, length and epochs given; the
Trainer is given the same learning rate, schedule, weight decay, clipping, batch, epochs and seed.

Every measurement is its own process with one thread (`OMP_NUM_THREADS=1`), run one at a time, and the arms are
interleaved (each repeat runs every arm once, in a rotated order), so a load that comes and goes on a shared
machine spreads over all of them; the table gives medians and the ratios of medians. Measured:

- training: `xsyn finetune` (the default batching, and `--random-batches`) and the Trainer (its default random
  batches, and `group_by_length`), each for the given epochs with a new seed per repeat: examples per second and
  CPU seconds per example of the training loop (xsyn: its steps, `train_results.json`; the Trainer: on_train_begin
  to on_train_end), the padded share of the tokens its batches computed (xsyn: its recorded batches; the Trainer:
  counted in its collator), and the accuracy on the held-out rows at the end;
- scoring: `xsyn evaluate` of the first xsyn run on all the rows (a fresh feature cache each time) against
  `Trainer.predict` of the first Trainer run on the same rows: the command's seconds and the scoring's own;
- one step: the whole `xsyn finetune --max-steps 1` command against the Trainer script doing the same (1 step, the
  held-out accuracy, the model saved).
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from xsyn import provenance
from xsyn.models.variants import baseline_name
from xsyn.run.workflow import finetune_settings
from xsyn.training.folder import RunFolder, eval_results
from xsyn.utils.errors import OptionError
from xsyn.utils.io import atomic_write_json, work_folder

ROWS_FILE = "dev-en.tsv"  # XTREME's English PAWS-X dev pairs: sentence1, sentence2, label
TRAINING_ARMS = ("xsyn default", "xsyn --random-batches", "Trainer default", "Trainer group_by_length")
SCORING_ARMS = ("xsyn evaluate", "Trainer.predict")
STEP_ARMS = ("xsyn finetune --max-steps 1", "Trainer script, 1 step")
THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
              "HF_HUB_OFFLINE": "1", "ACCELERATE_USE_CPU": "true"}


def split_rows(data_dir: Path, work: Path, rows: int, held_out: int, seed: int = 0) -> dict[str, Path]:
    """The first `rows` lines of `data_dir/dev-en.tsv`, copied as they are (csv quoting kept): a seeded `held_out`
    of them as the held-out file, the others as the training file (both in the card's XTREME names), and all of
    them as the scoring file."""
    source = data_dir / ROWS_FILE
    if not source.is_file():
        raise OptionError(f"--data-dir {data_dir}: no {ROWS_FILE} there (XTREME's PAWS-X English dev pairs)")
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)[:rows]
    if len(lines) < rows or not 0 < held_out < rows:
        raise OptionError(f"--rows {rows} --held-out {held_out}: {source} has {len(lines)} rows; give --rows at most "
                          f"that and --held-out between 1 and --rows - 1")
    kept = sorted(random.Random(seed).sample(range(rows), held_out))
    apart = set(kept)
    files = {"train": work / "data" / "train-en.tsv", "held_out": work / "data" / "dev-en.tsv",
             "score": work / "score" / ROWS_FILE}
    for path, chosen in ((files["train"], [i for i in range(rows) if i not in apart]), (files["held_out"], kept),
                         (files["score"], range(rows))):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(lines[i] if lines[i].endswith("\n") else lines[i] + "\n" for i in chosen),
                        encoding="utf-8")
    return files


def timed(command: list[str], cwd: Path) -> float:
    """Run `command` with one thread; its wall seconds. A failure is an error naming the command and its output."""
    started = time.perf_counter()
    proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env={**os.environ, **THREAD_ENV})
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:4])} ... failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return seconds


class PeerBench:
    """The runs of one benchmark, in `work`; each `*_run` method runs one arm once and returns its figures."""

    def __init__(self, model: str, files: dict[str, Path], work: Path, config, python: str = sys.executable):
        self.model, self.files, self.work, self.config, self.python = model, files, work, config, python
        self.first: dict[str, Path] = {}  # each arm's first run folder (what scoring scores)

    def xsyn_finetune(self, name: str, seed: int, *extra: str) -> tuple[float, dict[str, Any], Path]:
        out = self.work / "runs" / f"{name.replace(' ', '_').replace('-', '')}-{seed}"
        config = self.config
        command = [self.python, "-m", "xsyn", "finetune", "--task", "pawsx", "--variant", config.variant,
                   "--model", self.model, "--data-dir", str(self.files["train"].parent), "--parser", "chain",
                   "--batch-size", str(config.batch_size), "--max-length", str(config.max_length),
                   "--epochs", str(config.epochs), "--seed", str(seed), "--cache-dir", str(self.work / "cache"),
                   "--output-dir", str(out), "--quiet", *extra]
        seconds = timed(command, self.work)
        return seconds, json.loads(RunFolder(out).train_results.read_text(encoding="utf-8")), out

    def trainer_script(self, name: str, spec: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        spec_file, result_file = self.work / f"{name}.spec.json", self.work / f"{name}.result.json"
        atomic_write_json(spec_file, spec)
        seconds = timed([self.python, "-m", "xsyn.benchmarks.trainer_peer", str(spec_file), str(result_file)],
                        self.work)
        return seconds, json.loads(result_file.read_text(encoding="utf-8"))

    def trainer_spec(self, mode: str, out: Path, seed: int, **extra: Any) -> dict[str, Any]:
        config = self.config
        return {"mode": mode, "model": self.model, "train": str(self.files["train"]),
                "dev": str(self.files["held_out"]), "out": str(out), "batch_size": config.batch_size,
                "eval_batch_size": config.eval_batch_size, "epochs": config.epochs, "seed": seed,
                "learning_rate": config.learning_rate, "weight_decay": config.weight_decay,
                "warmup_steps": config.warmup_steps or 0, "max_grad_norm": config.max_grad_norm,
                "max_length": config.max_length, "threads": 1, **extra}

    # -- the arms --------------------------------------------------------------------------------------
    def training_run(self, arm: str, seed: int) -> dict[str, Any]:
        if arm.startswith("xsyn"):
            seconds, summary, out = self.xsyn_finetune(arm, seed, *(["--random-batches"] if "random" in arm else []))
            self.first.setdefault(arm, out)
            examples = epochs_examples(summary["steps"], summary["train_features"], self.config.batch_size)
            return {"examples": examples, "train_seconds": summary["train_seconds"],
                    "train_cpu_seconds": summary["train_cpu_seconds"],
                    "padded_share": summary["batches"]["padded_share"], "accuracy": summary["best_dev_score"],
                    "command_seconds": seconds, "settings": {k: summary.get(k) for k in (
                        "adamw_kernel", "pad_to_multiple_of", "max_batch_lengths", "micro_batch_split",
                        "mixed_precision")}}
        out = self.work / "runs" / f"trainer{'_grouped' if 'group' in arm else ''}-{seed}"
        seconds, result = self.trainer_script(out.name, self.trainer_spec(
            "train", out, seed, group_by_length="group" in arm, save=arm not in self.first))
        self.first.setdefault(arm, out)
        return {**result, "command_seconds": seconds}

    def scoring_run(self, arm: str, repeat: int) -> dict[str, Any]:
        if arm.startswith("xsyn"):
            out = self.work / f"scored-{repeat}"
            command = [self.python, "-m", "xsyn", "evaluate", "--model-dir", str(self.first["xsyn default"]),
                       "--split", "validation", "--langs", "en", "--data-dir", str(self.files["score"].parent),
                       "--parser", "chain", "--cache-dir", str(self.work / f"score-cache-{repeat}"),
                       "--output-dir", str(out), "--quiet"]
            seconds = timed(command, self.work)
            results = json.loads(eval_results(out).read_text(encoding="utf-8"))
            return {"command_seconds": seconds, "scoring_seconds": results["seconds"]["en"],
                    "examples": results["n_examples"]["en"], "accuracy": results["per_language"]["en"],
                    "padded_share": results["batches"]["en"]["padded_share"]}
        spec = {**self.trainer_spec("predict", self.work / f"predict-{repeat}", 0),
                "model": str(self.first["Trainer default"]), "rows": str(self.files["score"])}
        seconds, result = self.trainer_script(f"predict-{repeat}", spec)
        return {"command_seconds": seconds, "scoring_seconds": result["data_seconds"] + result["forward_seconds"],
                **result}

    def step_run(self, arm: str, repeat: int) -> dict[str, Any]:
        seed = self.config.seed + repeat
        if arm.startswith("xsyn"):
            seconds, summary, _ = self.xsyn_finetune(f"onestep-{repeat}", seed, "--max-steps", "1")
            return {"command_seconds": seconds, "steps": summary["steps"]}
        out = self.work / "runs" / f"trainer-onestep-{repeat}"
        seconds, result = self.trainer_script(out.name, self.trainer_spec("train", out, seed, max_steps=1, save=True))
        return {"command_seconds": seconds, "steps": result["steps"]}


def epochs_examples(steps: int, rows: int, batch_size: int) -> int:
    """The examples `steps` optimiser steps took, epoch after epoch over `rows` in batches of `batch_size`."""
    per_epoch = -(-rows // batch_size)
    full, part = divmod(steps, per_epoch)
    return full * rows + min(part * batch_size, rows)


def interleaved(arms: tuple[str, ...], repeats: int, run: Callable[[str, int], dict[str, Any]]
                ) -> dict[str, list[dict[str, Any]]]:
    """Each arm `repeats` times, one after the other: repeat r runs every arm once, the order rotated by r."""
    runs: dict[str, list[dict[str, Any]]] = {arm: [] for arm in arms}
    for repeat in range(repeats):
        for arm in arms[repeat % len(arms):] + arms[:repeat % len(arms)]:
            runs[arm].append(run(arm, repeat))
    return runs


def run_peer_bench(model: str, data_dir: str | Path, rows: int = 2000, held_out: int = 400, repeats: int = 3,
                   seed: int = 1, batch_size: int = 32, max_length: int = 128, epochs: float = 1.0,
                   workdir: str | Path | None = None) -> dict[str, Any]:
    """The benchmark (see the module docstring); its figures, per run and summarised (`summarise`)."""
    config, _ = finetune_settings("pawsx", baseline_name(), model=model, batch_size=batch_size, max_length=max_length,
                                  epochs=epochs, seed=seed, parser="chain", warmup_steps=None)
    load = [round(x, 2) for x in os.getloadavg()]
    with work_folder(workdir, "xsyn-bench-peer-") as work:
        files = split_rows(Path(data_dir), work, rows, held_out)
        bench = PeerBench(model, files, work, config)
        training = interleaved(TRAINING_ARMS, repeats, lambda arm, r: bench.training_run(arm, seed + r))
        scoring = interleaved(SCORING_ARMS, repeats, bench.scoring_run)
        step = interleaved(STEP_ARMS, repeats, bench.step_run)
    settings = {"rows": rows, "held_out": held_out, "train_rows": rows - held_out, "repeats": repeats, "seed": seed,
                "batch_size": config.batch_size, "max_length": config.max_length, "epochs": config.epochs,
                "learning_rate": config.learning_rate, "weight_decay": config.weight_decay,
                "warmup_steps": config.warmup_steps, "max_grad_norm": config.max_grad_norm, "threads": 1}
    return {"model": model, "settings": settings, "load_before": load, "load_after": [round(x, 2) for x in
                                                                                      os.getloadavg()],
            "runs": {"training": training, "scoring": scoring, "one_step": step},
            "summary": summarise(training, scoring, step), **provenance()}


def _median(runs: list[dict[str, Any]], figure: Callable[[dict[str, Any]], float]) -> float:
    return statistics.median(figure(run) for run in runs)


def _range(runs: list[dict[str, Any]], figure: Callable[[dict[str, Any]], float]) -> list[float]:
    """The lowest and highest of a figure over the repeats: how far one machine's runs of the same work spread."""
    values = [figure(run) for run in runs]
    return [min(values), max(values)]


def _spread(values: list[float]) -> dict[str, float]:
    return {"mean": statistics.fmean(values), "sd": statistics.stdev(values) if len(values) > 1 else 0.0}


def summarise(training: dict[str, list[dict[str, Any]]], scoring: dict[str, list[dict[str, Any]]],
              step: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per arm the medians over its runs, and the ratios the targets are about (ratios of medians)."""
    rows = {arm: {"examples_per_second": _median(runs, lambda r: r["examples"] / r["train_seconds"]),
                  "examples_per_second_range": _range(runs, lambda r: r["examples"] / r["train_seconds"]),
                  "cpu_seconds_per_example": _median(runs, lambda r: r["train_cpu_seconds"] / r["examples"]),
                  "padded_share": _median(runs, lambda r: r["padded_share"]),
                  "accuracy": _spread([r["accuracy"] for r in runs])} for arm, runs in training.items()}
    score = {arm: {"command_seconds": _median(runs, lambda r: r["command_seconds"]),
                   "scoring_seconds": _median(runs, lambda r: r["scoring_seconds"]),
                   "padded_share": _median(runs, lambda r: r["padded_share"])} for arm, runs in scoring.items()}
    steps = {arm: _median(runs, lambda r: r["command_seconds"]) for arm, runs in step.items()}
    step_ranges = {arm: _range(runs, lambda r: r["command_seconds"]) for arm, runs in step.items()}
    xsyn, xsyn_random, trainer, grouped = (rows[arm] for arm in TRAINING_ARMS)
    ratios = {"xsyn default / Trainer group_by_length, examples/s":
              xsyn["examples_per_second"] / grouped["examples_per_second"],
              "xsyn --random-batches / Trainer default, examples/s":
              xsyn_random["examples_per_second"] / trainer["examples_per_second"],
              "xsyn default / Trainer group_by_length, padded share":
              xsyn["padded_share"] / grouped["padded_share"] if grouped["padded_share"] else float("inf"),
              "xsyn evaluate / Trainer.predict, command seconds":
              score["xsyn evaluate"]["command_seconds"] / score["Trainer.predict"]["command_seconds"],
              "xsyn evaluate / Trainer.predict, scoring seconds":
              score["xsyn evaluate"]["scoring_seconds"] / score["Trainer.predict"]["scoring_seconds"],
              "one-step xsyn finetune / Trainer script, command seconds": steps[STEP_ARMS[0]] / steps[STEP_ARMS[1]]}
    return {"training": rows, "scoring": score, "one_step": steps, "one_step_range": step_ranges, "ratios": ratios}
