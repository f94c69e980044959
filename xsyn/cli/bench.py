"""`xsyn bench syntax|model|eval`: the benchmarks' commands; the measuring lives in `xsyn.benchmarks`."""

from __future__ import annotations

import json
from pathlib import Path

import click

from xsyn.benchmarks.harness import run_eval_bench
from xsyn.cli.main import bench
from xsyn.cli.syntax import PARSER_HELP, ParserChoice
from xsyn.models.defaults import TINY
from xsyn.models.variants import VARIANTS


def _kernel_note(result: dict) -> str:
    if result["device"] != "cpu":
        return f"torch ops on {result['device_name']}"
    if result["tree_kernel"] == "c":
        return f"C kernel; torch ops alone: {result['tensor_sentences_per_s_torch_ops']:,.0f}"
    return "torch ops: the C kernel was not built, see the README"


def _device(device: str) -> str:
    """`cpu`, `cuda` or `cuda:N`, checked against the machine (a clear error, not a CUDA traceback)."""
    import torch

    backend, _, index = device.partition(":")
    if backend == "cpu" and not index:
        return device
    if backend != "cuda" or (index and not index.isdigit()):
        raise click.BadParameter(f"{device!r}: choose cpu, cuda or cuda:N", param_hint="--device")
    if not torch.cuda.is_available():
        raise click.ClickException(f"--device {device}: torch sees no CUDA device on this machine "
                                   f"(torch {torch.__version__}); use --device cpu")
    if index and int(index) >= torch.cuda.device_count():
        raise click.ClickException(f"--device {device}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return device


@bench.command(name="syntax")
@click.option("--conllu", "conllu_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              required=True, help="Treebank file to run on (the README's figure: UD_English-EWT dev).")
@click.option("--tokenizer", required=True, help="A vocab.txt, a tokenizer folder or a hub name "
                                                 "(the README's figure: mBERT's vocab.txt).")
@click.option("--batch-size", type=int, default=32, show_default=True, help="Sentences per batch.")
@click.option("--repeats", type=int, default=5, show_default=True, help="Timed passes; the best counts.")
@click.option("--device", default="cpu", show_default=True,
              help="Where the tree tensors are built: cpu (the C kernel), cuda or cuda:N (torch ops on the GPU).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def bench_syntax(conllu_path: Path, tokenizer: str, batch_size: int, repeats: int, device: str, as_json: bool) -> None:
    """Speed of the tree tensors and of the whole records -> padded batch path, and bytes per piece."""
    from xsyn.benchmarks.syntax import run_syntax_bench

    result = run_syntax_bench(conllu_path, tokenizer, batch_size, repeats, _device(device))
    if as_json:
        click.echo(json.dumps(result))
        return
    click.echo(f"sentences:                 {result['sentences']} ({result['pieces']} pieces)")
    click.echo(f"tensor step:               {result['tensor_sentences_per_s']:,.0f} sentences/s "
               f"({result['tensor_sentences_per_s_shuffled']:,.0f} in shuffled batches, "
               f"{result['tensor_sentences_per_s_length_bucketed']:,.0f} in length-bucketed ones; "
               f"{_kernel_note(result)})")
    padding = result["padded_pairs_per_pair"]
    click.echo(f"padded pairs per real one: {padding['treebank_order']:.2f} ({padding['shuffled']:.2f} shuffled, "
               f"{padding['length_bucketed']:.2f} length-bucketed)")
    click.echo(f"records -> padded batch:   {result['pipeline_segments_per_s']:,.0f} segments/s")
    click.echo(f"stored per wordpiece:      {result['bytes_per_piece']:.2f} bytes")


@bench.command(name="model")
@click.option("--variants", default=",".join(VARIANTS), show_default=True,
              help="Comma-separated variants to time; `none` is always included as the baseline.")
@click.option("--layers", type=int, default=12, show_default=True, help="Encoder layers of the random model.")
@click.option("--hidden", type=int, default=768, show_default=True, help="Hidden size of the random model.")
@click.option("--heads", type=int, default=12, show_default=True, help="Attention heads of the random model.")
@click.option("--seq-len", type=int, default=128, show_default=True, help="Word pieces per input.")
@click.option("--batch-size", type=int, default=None, help="Inputs per step [default: 32 on a GPU, 2 on CPU].")
@click.option("--vocab-size", type=int, default=2000, show_default=True,
              help="Vocabulary of the random model (small: the embedding table does not change the ratios; "
                   "119547 is mBERT's).")
@click.option("--repeats", type=int, default=None, help="Interleaved timing rounds [default: 20 on a GPU, 5 on CPU].")
@click.option("--seed", type=int, default=0, show_default=True, help="Seeds the random model and batch.")
@click.option("--device", default="cpu", show_default=True, help="cpu, cuda or cuda:N.")
@click.option("--dtype", type=click.Choice(["float32", "bfloat16", "float16"]), default="float32", show_default=True,
              help="Compute type: bfloat16/float16 run the forward pass under autocast (weights stay float32).")
@click.option("--peak-tflops", type=click.FloatRange(min=0, min_open=True), default=None,
              help="The device's peak rate for --dtype, for FLOP utilisation [default: the data sheet's dense "
                   "bf16/fp16 peak for H100/H200/A100; none otherwise].")
@click.option("--skip-plain-bert", is_flag=True, help="Leave out the plain_bert row (transformers' own BERT).")
@click.option("--json", "as_json", is_flag=True,
              help='Print one JSON object {row: {"step_time_ratio": x, "peak_memory_ratio": y, ...}}, '
                   "one row per variant and plain_bert.")
def bench_model(variants: str, layers: int, hidden: int, heads: int, seq_len: int, batch_size: int | None,
                vocab_size: int, repeats: int | None, seed: int, device: str, dtype: str, peak_tflops: float | None,
                skip_plain_bert: bool, as_json: bool) -> None:
    """Time forward + backward of every syntax variant and of plain BERT against `none`; peak memory, tokens
    per second and FLOP utilisation."""
    from xsyn.benchmarks.model import PLAIN_BERT, measure
    from xsyn.benchmarks.model import peak_tflops as known_peak

    chosen = ["none"] + [v for v in dict.fromkeys(variants.split(",")) if v and v != "none"]
    unknown = [v for v in chosen if v not in VARIANTS]
    if unknown:
        raise click.BadParameter(f"unknown variant(s) {', '.join(unknown)}; choose from {', '.join(VARIANTS)}",
                                 param_hint="--variants")
    device = _device(device)
    gpu = device.startswith("cuda")
    batch_size = batch_size or (32 if gpu else 2)
    repeats = repeats or (20 if gpu else 5)
    if repeats < 1 or seq_len < 3 or batch_size < 1:
        raise click.BadParameter("--repeats and --batch-size must be >= 1 and --seq-len >= 3")
    shape = {"num_hidden_layers": layers, "hidden_size": hidden, "num_attention_heads": heads,
             "intermediate_size": 4 * hidden, "vocab_size": vocab_size,
             "max_position_embeddings": max(512, seq_len)}
    peak = peak_tflops or known_peak(device, dtype)
    results = measure(chosen, shape, batch_size, seq_len, repeats, seed, device, dtype, peak,
                      warmup=3 if gpu else 1, plain_bert=not skip_plain_bert)
    if as_json:
        click.echo(json.dumps({v: {"step_time_ratio": round(r["step_time_ratio"], 4),
                                   "peak_memory_ratio": round(r["peak_memory_ratio"], 4),
                                   **{k: x for k, x in r.items() if k not in ("step_time_ratio", "peak_memory_ratio")}}
                               for v, r in results.items()}))
        return
    click.echo(f"forward + backward, {layers} layers, hidden {hidden}, batch {batch_size} x {seq_len} pieces, "
               f"{device} {dtype}, fastest (and median) of {repeats} interleaved rounds; "
               f"{PLAIN_BERT}: transformers' BertForSequenceClassification (sdpa)")
    click.echo(f"{'row':<10} {'ms/step':>9} {'median':>9} {'time x':>7} {'peak MB':>9} {'memory x':>9} "
               f"{'tokens/s':>10} {'TFLOP/s':>8} {'MFU':>6} {'syntax params':>14}")
    for row, r in results.items():
        mfu = f"{r['mfu']:.1%}" if r["mfu"] is not None else "-"
        click.echo(f"{row:<10} {1000 * r['step_seconds']:>9.1f} {1000 * r['median_seconds']:>9.1f} "
                   f"{r['step_time_ratio']:>7.3f} {r['peak_bytes'] / 2**20:>9.1f} {r['peak_memory_ratio']:>9.3f} "
                   f"{r['tokens_per_second']:>10,.0f} {r['flops_per_step'] / r['step_seconds'] / 1e12:>8.2f} "
                   f"{mfu:>6} {r['syntax_parameters']:>14,}")
    if peak is None:
        click.echo("MFU: give --peak-tflops (the device's peak for this dtype) to compute it")
    else:
        click.echo(f"MFU: FLOPs per step / step time / {peak:g} TFLOP/s")


@bench.command(name="eval")
@click.option("--task", default="synth", show_default=True, help="The task card to train and evaluate.")
@click.option("--model", default=TINY, show_default=True, help="The model to fine-tune.")
@click.option("--tokenizer", default=None, help="Needed for tiny on a real task (e.g. mBERT's vocab.txt).")
@click.option("--langs", default=None, help="Comma-separated languages [default: all].")
@click.option("--data-dir", default=None, type=click.Path(file_okay=False), help="Folder with the task's files.")
@click.option("--parser", type=ParserChoice(), default="chain", show_default=True, help=PARSER_HELP + ".")
@click.option("--max-steps", "train_steps", type=int, default=60, show_default=True,
              help="Optimiser steps of the training whose data wait is measured.")
@click.option("--step-ms", type=click.FloatRange(min=0), default=None,
              help="Device time of one training step for the simulated data wait (e.g. a GPU's) [default: the "
                   "step measured here, less its data wait].")
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True,
              help="Worker processes that collate ahead in the worker-process simulation.")
@click.option("--simulated-batches", type=click.IntRange(min=1), default=200, show_default=True,
              help="Training batches the simulation draws (the first of the run's first epoch).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def bench_eval(task, model, tokenizer, langs, data_dir, parser, train_steps, step_ms, workers, simulated_batches,
               as_json) -> None:
    """Per-pair cost of generalized evaluation, and the data-wait share of training (measured, and simulated at a
    given step time with and without prefetching)."""
    result = run_eval_bench(task, model, tokenizer, langs.split(",") if langs else None, data_dir, parser,
                            train_steps, step_seconds=None if step_ms is None else step_ms / 1000, workers=workers,
                            simulated_batches=simulated_batches)
    if as_json:
        click.echo(json.dumps(result))
        return
    click.echo(f"generalized pair cost / language cost: {result['generalized_pair_cost_ratio']:.3f}")
    click.echo(f"training time waiting for data:       {result['data_wait_fraction']:.2%} "
               f"(step {1000 * result['step_seconds_compute']:.1f} ms without it)")
    click.echo(f"collating one training batch:         {1000 * result['collate_seconds_per_batch']:.2f} ms")
    click.echo(f"at a {1000 * result['simulated_step_seconds']:.1f} ms step, waiting for data: "
               f"{result['data_wait_fraction_inline']:.2%} collating in the loop, "
               f"{result['data_wait_fraction_prefetched']:.2%} prefetched by a thread, "
               f"{result['data_wait_fraction_worker_processes']:.2%} by {result['prefetch_workers']} worker processes")
