"""`xsyn finetune` and `xsyn evaluate`: the commands a researcher types."""

from __future__ import annotations

import logging
import shlex
import sys
from pathlib import Path

import click

from xsyn.cli.options import (
    CHECKPOINTING_STEPS,
    RegistryChoice,
    TaskChoice,
    WithVariantOptions,
    XsynCommand,
    data_options,
    interrupted,
    notes_off,
)
from xsyn.models.names import COMPILE_MODES, DEFAULT_MODEL, DEFAULT_SEED, TINY
from xsyn.models.variants import DEFAULT_VARIANT, variant_names
from xsyn.run.evaluation_text import after_scores_lines, nothing_predicted_lines, scores_text, split_lines
from xsyn.run.settings import MIXED_PRECISIONS, TRACKERS
from xsyn.training.folder import RunFolder, is_main_process
from xsyn.utils.progress import on_terminal, quiet_libraries

logger = logging.getLogger("xsyn.cli")


@click.command(cls=WithVariantOptions)
@click.option("--task", type=TaskChoice(), default=None,
              help="A task card name (see `xsyn tasks`) or a card file PATH.toml [default: the --config file's].")
@click.option("--variant", type=RegistryChoice(variant_names), default=None,
              help=f"The model variant (see docs/variants.md) [default: the --config file's, else {DEFAULT_VARIANT}].")
@click.option("--model", default=None, help=f"Hub name, local checkpoint folder, or `{TINY}` "
              f"[default: {DEFAULT_MODEL}].")
@click.option("--tokenizer", default=None, help="vocab.txt or tokenizer folder (default: the model's; "
              f"for {TINY}: {DEFAULT_MODEL}'s).")
@click.option("--train-lang", default=None, help="Source language [default: the card's first training language].")
@click.option("--output-dir", type=click.Path(file_okay=False), default=None,
              help="The run's folder [default: runs/<task>/<variant>-seed<seed>].")
@click.option("--seed", type=int, default=None, help=f"Seeds initialisation, batch order and dropout "
              f"[default: {DEFAULT_SEED}].")
@click.option("--max-steps", type=int, default=None, help="Stop after this many optimiser steps (overrides "
              "--epochs).")
@click.option("--epochs", type=float, default=None, help="Passes over the training data [default: the card's].")
@click.option("--learning-rate", type=float, default=None, help="AdamW's peak learning rate [default: the card's].")
@click.option("--batch-size", type=int, default=None, help="Examples per optimiser step, over all processes and "
              "accumulation steps (the global batch, as the papers give it) [default: the card's].")
@click.option("--grad-accum", type=int, default=None, help="Micro-batches per optimiser step (each split over the "
              "processes); the batch stays --batch-size [default: 1].")
@click.option("--max-length", type=int, default=None, help="Word pieces per input; longer ones are windowed "
              "(tagging, QA) or truncated (classification) [default: the card's, else 128].")
@click.option("--mixed-precision", metavar="[" + "|".join(MIXED_PRECISIONS) + "]", default=None, help="bf16 or fp16 "
              "autocast, or float32 (no) [default: auto: bf16 on a GPU that has it, else float32; recorded as chosen].")
@click.option("--torch-compile", type=click.Choice(COMPILE_MODES), is_flag=False, flag_value="default", default=None,
              metavar="[MODE]", help="Compile the model with torch.compile: default, reduce-overhead (CUDA graphs) "
              "or max-autotune [no value: default; not given: eager]. Give --pad-to-multiple-of too, so that few "
              "batch shapes (and recompiles) arise.")
@click.option("--pad-to-multiple-of", type=click.IntRange(min=1), default=None,
              help="Pad batches (training, evaluation) to a multiple of N [default: auto: 8 on a GPU, 1 (the longest "
              "input) on the CPU; recorded as chosen].")
@click.option("--eval-every", type=int, default=None,
              help="Validation every N steps [default: each epoch].")
@click.option("--max-train-examples", type=int, default=None, help="Use only the first N training examples.")
@click.option("--max-eval-examples", type=int, default=None,
              help="Use only the first N validation examples for the evaluations during training.")
@click.option("--dev-fraction", type=float, default=None,
              help="Tasks without a validation set of their own (cged, msra_ner, matis; see `xsyn tasks`): the "
              "share of the training data held out as one, seeded and recorded in data_report.json [default: the "
              "task card's].")
@click.option("--group-by-length/--random-batches", default=None, help="Batches of similar lengths or the papers'.")
@data_options
@click.option("--pretrained-syntax", "--gat-init", type=click.Path(exists=True, file_okay=False), help="Initialise "
              "the variant's pre-trained syntax module (gat: the GAT) from an `xsyn pretrain-gat` output folder.")
@click.option("--freeze-pretrained", "--freeze-gat", is_flag=True, default=None, help="Keep it fixed in fine-tuning.")
@click.option("--tracker", "trackers", multiple=True, type=click.Choice(TRACKERS),
              help="Also log to an Accelerate tracker.")
@click.option("--config", "config_file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="A TOML or JSON file of settings (e.g. a run's config.json).")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Any setting, e.g. --set warmup_steps=100 --set gat_delta=2 (repeatable).")
@click.option("--resume", "resume_dir", is_flag=False, flag_value="", default=None, metavar="[DIR]",
              help="Continue the run in DIR from its last saved state; its config.json holds the settings (options "
              "given win). Without DIR: the run in --output-dir.")
@click.option("--overwrite-output-dir", is_flag=True,
              help="Start afresh in an --output-dir that holds files (the run files in it are deleted first).")
@click.option("--checkpointing-steps", type=CHECKPOINTING_STEPS, default=None,
              help="Save a resumable state every N optimiser steps, or each `epoch` [default: at every evaluation].")
@click.option("--save-total-limit", type=click.IntRange(min=1), default=None,
              help="Resumable states kept: state/ and the K-1 before it as checkpoint-<step>/ [default: 1].")
@click.option("--eval-langs", default=None, help="After training, evaluate the best checkpoint on these languages "
              "(comma-separated; `all`: every language of the task), as `xsyn evaluate` does.")
@click.option("--do-eval", is_flag=True, help="After training, evaluate on every language of the task "
              "(the same as --eval-langs all).")
@click.option("--push-to-hub", "push_to_hub", metavar="OWNER/NAME", default=None,
              help="Upload the best checkpoint and its model card to this Hugging Face model repository when "
              "training ends (checked before training starts: needs network and a token, `hf auth login`).")
@click.option("--quiet", is_flag=True, help="No progress bar, no notes (warnings and errors still show).")
def finetune(task, variant, config_file, sets, resume_dir, overwrite_output_dir, eval_langs, do_eval, push_to_hub,
             quiet, **flags) -> None:
    """Fine-tune on the source language with the task card's paper hyperparameters.

    Evaluates on the source-language dev set at intervals, keeps the best checkpoint, and writes
    the resolved config, logs and metrics into the output folder. With --eval-langs (or
    --do-eval) it then evaluates the best checkpoint, as `xsyn evaluate` would.
    """
    from xsyn.run.workflow import finetune_evaluate_push, finetune_settings

    if quiet or not on_terminal(sys.stderr):  # off a terminal each redraw of their bars is a line
        quiet_libraries()
    if quiet:
        notes_off()
    config, resume = finetune_settings(task, variant, config_file, sets, resume_dir, **flags)
    folder = RunFolder(config.resolved_output_dir())
    resume_with = f"--resume {shlex.quote(str(folder.path))}"
    try:
        outcome = finetune_evaluate_push(config, resume, overwrite_output_dir, _eval_langs(eval_langs, do_eval),
                                         push_to_hub, not quiet, resume_with, on_trained=lambda s: _trained(s, folder))
    except KeyboardInterrupt as stop:
        interrupted(stop, folder, f"xsyn finetune {resume_with}")
    if not is_main_process():
        return
    if outcome["evaluation"] is not None:
        _echo_scores(outcome["evaluation"], split_chosen=False)
    if outcome["pushed"]:
        click.echo(f"pushed {folder.best} to {outcome['pushed']}", err=True)


def _trained(summary: dict, folder: RunFolder) -> None:
    from xsyn.run.train import trained_lines

    if is_main_process():  # as soon as training ends, before any evaluation
        click.echo("\n".join(trained_lines(summary, folder.path)))


def _eval_langs(eval_langs: str | None, do_eval: bool) -> list[str] | None:
    """The languages to evaluate after training: None (no evaluation), [] (all of the task's) or a list."""
    if eval_langs is None:
        return [] if do_eval else None
    langs = [lang.strip() for lang in eval_langs.split(",") if lang.strip()]
    return [] if langs == ["all"] else langs


def _echo_scores(summary: dict, split_chosen: bool) -> None:
    """Each language's score (`scores_text`), and what the numbers rest on."""
    click.echo("\n".join([*split_lines(summary, split_chosen), scores_text(summary)]))
    for line in nothing_predicted_lines(summary):
        logger.warning(line)  # (as every warning: `xsyn -q` hides it)


@click.command(cls=XsynCommand)
@click.option("--model-dir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="A finetune output folder (or a checkpoint folder inside it).")
@click.option("--task", type=TaskChoice(), default=None,
              help="Evaluate on this task (a name or a card file PATH.toml) [default: the run's own]; another task "
                   "must be of the same kind and labels (a model fine-tuned for MLQA on XQuAD).")
@click.option("--langs", default=None, help="Comma-separated languages [default: all of the task's].")
@click.option("--split", type=click.Choice(["validation", "test"]), default=None,
              help="The split to score [default: test; validation where the task's test split has no labels].")
@click.option("--max-eval-examples", type=click.IntRange(min=1), default=None,
              help="Score at most N examples of each language or pair, as many of each label as N allows (a "
                   "quick look; results.json says so).")
@click.option("--generalized", is_flag=True, help="Also evaluate every ordered language pair.")
@click.option("--output-dir", type=click.Path(file_okay=False), default=None,
              help="Where the results go [default: <model-dir>/eval-<split>].")
@click.option("--skip-missing", is_flag=True, help="Skip languages without data (listed in results.json).")
@click.option("--batch-size", "eval_batch_size", type=int, default=None,
              help="Examples per prediction batch, over all processes [default: the run's eval_batch_size, 64].")
@data_options
@click.option("--quiet", is_flag=True, help="No progress bars, no notes (warnings and errors still show).")
def evaluate(model_dir, task, langs, split, max_eval_examples, generalized, output_dir, skip_missing, quiet,
             **overrides) -> None:
    """Zero-shot results per language; with --generalized, the language-pair matrix too."""
    from xsyn.run.evaluation import evaluate_run

    if quiet or not on_terminal(sys.stderr):  # off a terminal each redraw of their bars is a line
        quiet_libraries()
    if quiet:
        notes_off()
    summary = evaluate_run(model_dir, split=split, langs=langs.split(",") if langs else None,
                           generalized=generalized, output_dir=output_dir, overrides=overrides,
                           skip_missing=skip_missing, max_examples=max_eval_examples, progress=not quiet, task=task)
    if not is_main_process():
        return
    _echo_scores(summary, split_chosen=split is not None)
    click.echo("\n".join(after_scores_lines(summary, summary["output_dir"])))
