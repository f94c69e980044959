"""The demo: the whole harness on a benchmark xsyn generates itself, in a few CPU minutes.

The synthetic typology benchmark (`xsyn.data.synth`, task card `synth`) has four artificial languages
with one lexicon and different word orders, and gold UD trees. The demo trains a tiny BERT from
scratch with the plain baseline (`none`) and with the GAT syntax variant (`gat`) on the first
language, evaluates both zero-shot on every language and on every language pair, and writes the
report (tables, deltas with significance, heatmaps). It uses the same code paths as a real run:
task card, parse step (gold trees), features, Accelerate training loop, evaluation, report.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from xsyn.models.defaults import DEFAULT_SEED
from xsyn.training.folder import RunFolder, eval_results
from xsyn.utils.errors import XsynError

DEMO_VARIANTS = ("none", "gat")
# What one demo writes into its folder; `overwrite` removes exactly these, nothing else the folder holds.
DEMO_OUTPUTS = ("vocab.txt", "runs", "cache", "report")
log = logging.getLogger(__name__)


class DemoOutputExistsError(XsynError, FileExistsError):
    """The demo folder holds an earlier demo; training again would mix old and new files."""


def run_demo(output_dir: str | Path = "xsyn-demo", seed: int = DEFAULT_SEED, progress: bool = True,
             max_steps: int | None = None, overwrite: bool = False,
             settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Train `none` and `gat` on the source language, evaluate both on every language and pair, and
    write the report; returns per-language test accuracies, averages and the files written.

    An `output_dir` that holds an earlier demo is refused unless `overwrite` (then the earlier
    demo's files are removed first). `settings` override the card's (e.g. {"learning_rate": 2e-4}),
    as `--set` does on `xsyn finetune`.
    """
    from xsyn.data.cards import load_card
    from xsyn.data.synth import write_vocab
    from xsyn.models.defaults import TINY
    from xsyn.report import build_report, write_report
    from xsyn.run.evaluation import evaluate_run
    from xsyn.run.preflight import preflight_output
    from xsyn.run.settings import resolve
    from xsyn.run.train import finetune

    out = Path(output_dir)
    _claim(out, overwrite)
    preflight_output(out, "--output-dir")  # before the benchmark is generated; each run checks its own disk
    started = time.perf_counter()
    vocab = write_vocab(out / "vocab.txt")
    card = load_card("synth")
    evaluations: dict[str, Path] = {}
    for variant in DEMO_VARIANTS:
        run_dir = out / "runs" / f"{variant}-seed{seed}"
        config = resolve("synth", variant, card, {}, {
            "model": TINY, "tokenizer": str(vocab), "train_lang": card.train_languages[0], "seed": seed,
            "output_dir": str(run_dir), "cache_dir": str(out / "cache"), "parser": "chain", "log_every": 20,
            "max_steps": max_steps, **(settings or {})})
        log.info(f"[demo] fine-tuning {variant} on {config.train_lang} ...")
        summary = finetune(config, progress=progress)
        log.info(f"[demo] {variant}: best dev accuracy {summary['best_dev_score']:.1f} at step {summary['best_step']}")
        evaluate_run(run_dir, split="test", generalized=True, progress=progress)
        evaluations[variant] = RunFolder(run_dir).eval_dir("test")
    report = build_report([evaluations["gat"]], [evaluations["none"]])
    written = write_report(report, out / "report")
    results = {v: json.loads(eval_results(p).read_text(encoding="utf-8")) for v, p in evaluations.items()}
    return {"output_dir": str(out), "seed": seed, "seconds": time.perf_counter() - started,
            "per_language": {v: r["per_language"] for v, r in results.items()},
            "average": {v: r["average"] for v, r in results.items()},
            "report": str(out / "report" / "report.md"), "files": [str(p) for p in written]}


def _claim(out: Path, overwrite: bool) -> None:
    """Refuse a folder that holds an earlier demo (or remove that demo's files when `overwrite`)."""
    earlier = [name for name in DEMO_OUTPUTS if (out / name).exists()]
    if not earlier:
        return
    if not overwrite:
        raise DemoOutputExistsError(
            f"{out} already holds a demo ({', '.join(earlier)}); running again would mix its files with "
            "the new ones: pass --overwrite-output-dir to replace it, or choose another --output-dir")
    for name in earlier:
        path = out / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
