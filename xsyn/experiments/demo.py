"""The demo: the whole harness on a benchmark xsyn generates itself, in a few CPU minutes.

The synthetic typology benchmark (`xsyn.data.synth`, task card `synth`) has four artificial languages
with one lexicon and different word orders, and gold UD trees. The demo trains a tiny BERT from
scratch with the plain baseline (`none`) and with the GAT syntax variant (`gat`) on the first
language, evaluates both zero-shot on every language and on every language pair, and writes the
report (tables, deltas with significance, heatmaps). It uses the same code paths as a real run:
task card, parse step (the data's gold trees: `--parser gold`), features, Accelerate training loop, evaluation, report.
"""

from __future__ import annotations

import json
import logging
import shutil
import textwrap
import time
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from xsyn.data.cards import load_card
from xsyn.data.synth import write_vocab
from xsyn.models.names import DEFAULT_SEED, TINY
from xsyn.report import build_report, write_report
from xsyn.run.checks import preflight_output
from xsyn.run.evaluation import evaluate_run
from xsyn.run.settings import resolve
from xsyn.run.train import finetune
from xsyn.training.checkpoint import total_steps
from xsyn.training.folder import RunFolder, eval_results
from xsyn.utils.errors import XsynError
from xsyn.utils.io import atomic_write_json, saved_json_object

DEMO_VARIANTS = ("none", "gat")
# What one demo writes into its folder; `overwrite` removes exactly these, nothing else the folder holds.
DEMO_OUTPUTS = ("demo.json", "vocab.txt", "runs", "cache", "report")
PLAN_FILE = "demo.json"  # the options a demo was started with: a rerun with the same ones continues it
log = logging.getLogger(__name__)


class DemoOutputExistsError(XsynError, FileExistsError):
    """The demo folder holds an earlier demo of other options; training again would mix old and new files."""


def run_demo(output_dir: str | Path = "xsyn-demo", seed: int = DEFAULT_SEED, progress: bool = True,
             max_steps: int | None = None, overwrite: bool = False,
             settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Train `none` and `gat` on the source language, evaluate both on every language and pair, and
    write the report; returns per-language test accuracies, averages and the files written.

    A folder that holds an interrupted demo of the same options is continued as `xsyn finetune --resume`
    continues a run (a finished training is kept, an evaluation keeps what it scored); one of other options
    is refused unless `overwrite` (then the earlier demo's files are removed first, a resumable state said
    so). `settings` override the card's (e.g. {"learning_rate": 2e-4}), as `--set` does on `xsyn finetune`.
    A Ctrl-C reaches the caller with `run_dir` set to the run it stopped.
    """
    out = Path(output_dir)
    plan = {"seed": seed, "max_steps": max_steps, "settings": dict(settings or {})}
    claim_demo_folder(out, plan, overwrite)
    preflight_output(out, "--output-dir")  # before the benchmark is generated; each run checks its own disk
    atomic_write_json(out / PLAN_FILE, plan)
    started = time.perf_counter()
    vocab = write_vocab(out / "vocab.txt")
    evaluations = {variant: _train_and_evaluate(out, variant, vocab, plan, progress) for variant in DEMO_VARIANTS}
    return _report(out, evaluations, seed, started)


def demo_text(summary: dict[str, Any]) -> str:
    """`run_demo`'s summary as `xsyn demo` prints it: each variant's zero-shot test accuracy per language and on
    average, and where the report is."""
    langs = list(summary["per_language"]["none"])
    lines = ["\nzero-shot test accuracy (trained on " + langs[0] + ")",
             "variant  " + "  ".join(f"{lang:>6}" for lang in langs) + "  average"]
    lines += [f"{variant:<8} " + "  ".join(f"{scores[lang]:6.1f}" for lang in langs)
              + f"  {summary['average'][variant]:7.1f}" for variant, scores in summary["per_language"].items()]
    report = f"\nreport: {summary['report']}  ({summary['seconds']:.0f} s)"
    return "\n".join([*lines, *_short_training(summary), report])


def _short_training(summary: dict[str, Any]) -> list[str]:
    """What a demo stopped early (--max-steps) can show: that the pipeline runs, not which variant transfers."""
    steps, scheduled = summary.get("steps"), summary.get("scheduled_steps")
    if not steps or not scheduled or steps >= scheduled:
        return []
    return ["", *textwrap.wrap(
        f"Stopped at {steps} of the {scheduled:,} optimiser steps of its schedule (--max-steps): so little "
        f"training leaves both models near chance ({summary['chance']:.1f} for {summary['labels']} labels; a capped "
        "test is label-balanced), so these scores show that the pipeline runs end to end, not which variant "
        "transfers better. Without --max-steps the demo trains both in full and compares them.", 100)]


def _train_and_evaluate(out: Path, variant: str, vocab: Path, plan: dict[str, Any], progress: bool) -> Path:
    """The variant's run trained (or kept, where finished) and its test evaluated; its evaluation folder."""
    card = load_card("synth")
    run_dir = out / "runs" / f"{variant}-seed{plan['seed']}"
    config = resolve("synth", variant, card, {}, {
        "model": TINY, "tokenizer": str(vocab), "train_lang": card.train_languages[0], "seed": plan["seed"],
        "output_dir": str(run_dir), "cache_dir": str(out / "cache"), "log_every": 20,  # trees: the card's (gold)
        "max_steps": plan["max_steps"], **plan["settings"]})
    folder = RunFolder(run_dir)
    try:
        if not folder.is_finished():  # (a continued demo keeps a finished training)
            log.info(f"[demo] fine-tuning {variant} on {config.train_lang} ...")
            summary = finetune(config, resume=folder.has_progress(), progress=progress)
            log.info(f"[demo] {variant}: best dev accuracy {summary['best_dev_score']:.1f} at step "
                     f"{summary['best_step']}")
        # `--set max_eval_examples=N` caps the test too, as in an experiment (a quick look at the whole demo)
        evaluate_run(run_dir, split="test", generalized=True, progress=progress, max_examples=config.max_eval_examples)
    except KeyboardInterrupt as stop:
        stop.run_dir = run_dir  # type: ignore[attr-defined]  # where it stopped, for the resume advice
        raise
    return folder.eval_dir("test")


def _report(out: Path, evaluations: dict[str, Path], seed: int, started: float) -> dict[str, Any]:
    report = build_report([evaluations["gat"]], [evaluations["none"]])
    written = write_report(report, out / "report")
    results = {v: json.loads(eval_results(p).read_text(encoding="utf-8")) for v, p in evaluations.items()}
    card = load_card("synth")
    return {"output_dir": str(out), "seed": seed, "seconds": time.perf_counter() - started,
            "per_language": {v: r["per_language"] for v, r in results.items()},
            "average": {v: r["average"] for v, r in results.items()},
            "report": str(out / "report" / "report.md"), "files": [str(p) for p in written],
            **_trained_steps(out / "runs"), "chance": 100.0 / len(card.labels), "labels": len(card.labels)}


def _trained_steps(runs: Path) -> dict[str, int]:
    """The fewest optimiser steps the demo's runs trained, and the most their epochs schedule (without max_steps)."""
    steps, scheduled = [], []
    for run in sorted(runs.glob("*-seed*")):
        folder = RunFolder(run)
        summary, config = saved_json_object(folder.train_results) or {}, saved_json_object(folder.config) or {}
        if isinstance(summary.get("train_features"), int) and {"epochs", "batch_size"} <= set(config):
            steps.append(summary.get("steps", 0))
            schedule = SimpleNamespace(max_steps=None, epochs=config["epochs"], batch_size=config["batch_size"])
            scheduled.append(total_steps(schedule, summary["train_features"]))
    return {"steps": min(steps), "scheduled_steps": max(scheduled)} if steps else {}


def claim_demo_folder(out: Path, plan: dict[str, Any], overwrite: bool) -> None:
    """Continue an earlier demo of the same options (said); refuse one of other options, or remove its files
    when `overwrite` (saying which saved training that deletes)."""
    earlier = [name for name in DEMO_OUTPUTS if (out / name).exists()]
    if not earlier:
        return
    progress = _saved_progress(out)
    if not overwrite:
        if saved_json_object(out / PLAN_FILE) == plan:
            log.warning(f"continuing the demo in {out} ({progress or 'nothing trained yet'}); "
                        "--overwrite-output-dir starts it afresh")
            return
        raise DemoOutputExistsError(
            f"{out} already holds a demo of other options ({', '.join(earlier)}); running again would mix its "
            "files with the new ones: give its options again to continue it, pass --overwrite-output-dir to "
            "replace it, or choose another --output-dir")
    if progress:
        log.warning(f"--overwrite-output-dir: deleting the earlier demo in {out} ({progress}), which a rerun "
                    "without it would have continued")
    for name in earlier:
        path = out / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def _saved_progress(out: Path) -> str:
    """What the demo's runs have saved: `none finished, gat saved at step 300`; empty where nothing is."""
    parts = []
    for variant in DEMO_VARIANTS:
        for run in sorted((out / "runs").glob(f"{variant}-seed*")):
            folder = RunFolder(run)
            step = folder.saved_step()
            if folder.is_finished():
                parts.append(f"{variant} trained")
            elif step is not None:
                parts.append(f"{variant} saved at step {step}")
    return ", ".join(parts)
