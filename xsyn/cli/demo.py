"""`xsyn demo`: the whole harness on a benchmark xsyn generates itself, in a few CPU minutes.

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
import time
from pathlib import Path
from typing import Any

import click

from xsyn.cli.main import main
from xsyn.models.defaults import DEFAULT_SEED
from xsyn.training.folder import RunFolder, eval_results

DEMO_VARIANTS = ("none", "gat")
log = logging.getLogger(__name__)


def run_demo(output_dir: str | Path = "xsyn-demo", seed: int = DEFAULT_SEED, progress: bool = True,
             max_steps: int | None = None) -> dict[str, Any]:
    from xsyn.data.cards import load_card
    from xsyn.data.synth import write_vocab
    from xsyn.models.defaults import TINY
    from xsyn.report import build_report, write_report
    from xsyn.run.evaluation import evaluate_run
    from xsyn.run.settings import resolve
    from xsyn.run.train import finetune

    out = Path(output_dir)
    started = time.perf_counter()
    vocab = write_vocab(out / "vocab.txt")
    card = load_card("synth")
    evaluations: dict[str, Path] = {}
    for variant in DEMO_VARIANTS:
        run_dir = out / "runs" / f"{variant}-seed{seed}"
        config = resolve("synth", variant, card, {}, {
            "model": TINY, "tokenizer": str(vocab), "train_lang": card.train_languages[0], "seed": seed,
            "output_dir": str(run_dir), "cache_dir": str(out / "cache"), "parser": "chain", "log_every": 20,
            "max_steps": max_steps})
        log.info(f"[demo] fine-tuning {variant} on {config.train_lang} ...")
        summary = finetune(config, progress=progress)
        log.info(f"[demo] {variant}: best dev accuracy {summary['best_dev_score']:.1f} at step {summary['best_step']}")
        evaluate_run(run_dir, split="test", generalized=True)
        evaluations[variant] = RunFolder(run_dir).eval_dir("test")
    report = build_report([evaluations["gat"]], [evaluations["none"]])
    written = write_report(report, out / "report")
    results = {v: json.loads(eval_results(p).read_text(encoding="utf-8")) for v, p in evaluations.items()}
    summary = {"output_dir": str(out), "seconds": time.perf_counter() - started,
               "per_language": {v: r["per_language"] for v, r in results.items()},
               "average": {v: r["average"] for v, r in results.items()},
               "report": str(out / "report" / "report.md"), "files": [str(p) for p in written]}
    return summary


@main.command()
@click.option("--output-dir", type=click.Path(file_okay=False), default="xsyn-demo", show_default=True,
              help="Where the benchmark, the two runs and the report go.")
@click.option("--seed", type=int, default=DEFAULT_SEED, show_default=True, help="Seeds both runs.")
@click.option("--max-steps", type=int, default=None, help="Stop each training early (a quick look; the "
              "card's full schedule is about 1000 steps).")
@click.option("--quiet", is_flag=True, help="No progress bars.")
def demo(output_dir: str, seed: int, max_steps: int | None, quiet: bool) -> None:
    """Generate the synthetic typology benchmark, train none and gat, evaluate, report."""
    if quiet:
        from xsyn.cli.run import quiet_libraries

        quiet_libraries()
    summary = run_demo(output_dir, seed, progress=not quiet, max_steps=max_steps)
    langs = list(summary["per_language"]["none"])
    click.echo("\nzero-shot test accuracy (trained on " + langs[0] + ")")
    click.echo("variant  " + "  ".join(f"{lang:>6}" for lang in langs) + "  average")
    for variant, scores in summary["per_language"].items():
        click.echo(f"{variant:<8} " + "  ".join(f"{scores[lang]:6.1f}" for lang in langs)
                   + f"  {summary['average'][variant]:7.1f}")
    click.echo(f"\nreport: {summary['report']}  ({summary['seconds']:.0f} s)")
