"""`xsyn finetune` and `xsyn evaluate`: the commands a researcher types."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import NoReturn

import click

from xsyn.cli.main import RegistryChoice, main
from xsyn.cli.syntax import parser_options
from xsyn.data.cards import list_tasks
from xsyn.models.defaults import COMPILE_MODES, DEFAULT_MODEL, DEFAULT_SEED, GAT_ATTENTIONS, TINY
from xsyn.models.variants import variant_names
from xsyn.run.settings import MIXED_PRECISIONS, MODEL_SETTINGS, TRACKERS
from xsyn.training.folder import RunFolder
from xsyn.utils.progress import on_terminal


def quiet_libraries() -> None:
    """No progress bars from datasets and transformers (xsyn's own are switched off separately)."""
    import datasets
    from transformers.utils import logging

    datasets.disable_progress_bars()
    logging.disable_progress_bar()


def is_main_process() -> bool:
    """Whether this is the process that prints, writes and uploads under a distributed launch:
    global rank 0 (torchrun and `accelerate launch` set RANK), and always in a single process.
    Read from the environment: a `PartialState()` made here, before the run's Accelerator, would
    fix Accelerate's state without ACCELERATE_USE_CPU's cpu flag and split a CPU launch into
    independent single processes."""
    return int(os.environ.get("RANK", "0")) == 0


class TaskChoice(click.ParamType):
    """A shipped task card's name (see `xsyn tasks`) or a card file of one's own (`PATH.toml`)."""

    name = "TASK|PATH.toml"

    def convert(self, value, param, ctx):
        if str(value).endswith(".toml") or value in list_tasks():
            return value
        self.fail(f"{value!r} is neither a task ({', '.join(list_tasks())}) nor a card file (PATH.toml)", param, ctx)

    def shell_complete(self, ctx, param, incomplete):
        return [click.shell_completion.CompletionItem(name) for name in list_tasks() if name.startswith(incomplete)]


class _CheckpointingSteps(click.ParamType):
    """`N` (optimiser steps, >= 1) or `epoch`."""

    name = "N|epoch"

    def convert(self, value, param, ctx):
        if isinstance(value, int) or value == "epoch":
            return value
        try:
            steps = int(value)
        except ValueError:
            steps = 0
        if steps < 1:
            self.fail(f"{value!r}: give a number of optimiser steps (>= 1) or 'epoch'", param, ctx)
        return steps


CHECKPOINTING_STEPS = _CheckpointingSteps()


def data_options(fn):
    for option in reversed([
        click.option("--data-dir", type=click.Path(file_okay=False), help="Folder with the task's files "
                     "(default: $XSYN_DATA_DIR/<task> or ~/.cache/xsyn/data/<task>; else the hub)."),
        click.option("--parse-workers", type=click.IntRange(min=1), help="Processes that parse side by side "
                     "[default: the cores; 1 for chain and for Stanza on a GPU]."),
        click.option("--cache-dir", type=click.Path(file_okay=False), help="xsyn's cache folder: parses/ and "
                     "features/ (default: $XSYN_CACHE or ~/.cache/xsyn)."),
        click.option("--num-proc", type=int, help="Processes for feature preparation (datasets.map)."),
        click.option("--skip-bad-rows", is_flag=True, default=None,
                     help="Skip (and count) unreadable training and validation rows instead of stopping at the first "
                     "(test rows are never skipped)."),
        parser_options(default_note="finetune: stanza; evaluate: the run's parser"),
    ]):
        fn = option(fn)
    return fn


@main.command()
@click.option("--task", type=TaskChoice(), default=None,
              help="A task card name (see `xsyn tasks`) or a card file PATH.toml [default: the --config file's].")
@click.option("--variant", type=RegistryChoice(variant_names), default=None,
              help="The model variant (see the README) [default: the --config file's, else gat].")
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
@click.option("--mixed-precision", type=click.Choice(MIXED_PRECISIONS), default=None,
              help="Train in bf16 or fp16 autocast [default: no].")
@click.option("--torch-compile", type=click.Choice(COMPILE_MODES), is_flag=False, flag_value="default", default=None,
              metavar="[MODE]", help="Compile the model with torch.compile: default, reduce-overhead (CUDA graphs) "
              "or max-autotune [no value: default; not given: eager]. Give --pad-to-multiple-of too, so that few "
              "batch shapes (and recompiles) arise.")
@click.option("--pad-to-multiple-of", type=click.IntRange(min=1), default=None,
              help="Pad each batch's length up to a multiple of N (e.g. 16 or 64) [default: the longest input].")
@click.option("--eval-every", type=int, default=None,
              help="Validation every N steps [default: each epoch].")
@click.option("--max-train-examples", type=int, default=None, help="Use only the first N training examples.")
@click.option("--max-eval-examples", type=int, default=None,
              help="Use only the first N validation examples for the evaluations during training.")
@click.option("--dev-fraction", type=float, default=None,
              help="Tasks without a validation set of their own (cged, msra_ner, matis; see `xsyn tasks`): the "
              "share of the training data held out as one, seeded and recorded in data_report.json [default: the "
              "task card's].")
@click.option("--gat-delta", type=int, default=None, help="GAT attention reaches tree distance <= delta "
              "(as pretrain-gat's; the same as --set gat_delta) [default: the card's].")
@click.option("--gat-attention", type=click.Choice(GAT_ATTENTIONS), default=None,
              help="dot: the paper's eq. 2; additive: the released code's (the same as --set gat_attention).")
@click.option("--group-by-length", is_flag=True, default=None,
              help="Training batches of similar lengths: less padding, faster (off in the papers).")
@data_options
@click.option("--gat-init", type=click.Path(exists=True, file_okay=False), default=None,
              help="Initialise the GAT from an `xsyn pretrain-gat` output folder.")
@click.option("--freeze-gat", is_flag=True, default=None, help="Keep the GAT fixed while fine-tuning.")
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
@click.option("--quiet", is_flag=True, help="No progress bar.")
def finetune(task, variant, config_file, sets, resume_dir, overwrite_output_dir, eval_langs, do_eval, push_to_hub,
             quiet, **flags) -> None:
    """Fine-tune on the source language with the task card's paper hyperparameters.

    Evaluates on the source-language dev set at intervals, keeps the best checkpoint, and writes
    the resolved config, logs and metrics into the output folder. With --eval-langs (or
    --do-eval) it then evaluates the best checkpoint, as `xsyn evaluate` would.
    """
    from xsyn.data.cards import load_card
    from xsyn.run.evaluation import evaluate_run, locate_checkpoint
    from xsyn.run.publish import check_hub_push, push_checkpoint
    from xsyn.run.settings import parse_overrides, read_config_file, resolve
    from xsyn.run.train import finetune as run_finetune

    if quiet or not on_terminal(sys.stderr):  # off a terminal each redraw of their bars is a line
        quiet_libraries()
    resume = resume_dir is not None
    if resume_dir:  # the folder alone: its saved settings, unless a --config file is given too
        if flags.get("output_dir") and Path(flags["output_dir"]) != Path(resume_dir):
            raise click.UsageError(f"--resume {resume_dir} and --output-dir {flags['output_dir']} name different "
                                   "folders; give one")
        flags["output_dir"] = resume_dir
        saved = RunFolder(resume_dir).config
        if config_file is None:
            if not saved.is_file():
                raise click.UsageError(f"--resume {resume_dir}: {saved} does not exist, so there is no run there "
                                       "to continue (a run writes it when it starts)")
            config_file = str(saved)
    file_values = read_config_file(config_file) if config_file else {}
    task = task or file_values.get("task_card") or file_values.get("task")
    if task is None:
        raise click.UsageError("Missing option '--task' (or a --config file that names it).")
    card = load_card(task)
    if resume_dir and config_file == str(saved) and file_values.get("task", card.name) != card.name:
        raise click.UsageError(f"--resume {resume_dir} is a run of task {file_values['task']!r} (its {saved.name}), "
                               f"but --task names {card.name!r}: leave out --task to continue that run, or give "
                               "--resume the folder of a run of this task")
    flags["trackers"] = list(flags.pop("trackers")) or None
    model_flags = {name: flags.pop(name) for name in ("gat_delta", "gat_attention")}
    overrides = parse_overrides(sets)
    overrides[MODEL_SETTINGS] = {**{k: v for k, v in model_flags.items() if v is not None},
                                 **overrides.get(MODEL_SETTINGS, {})}
    flags = {**{k: v for k, v in flags.items() if v is not None}, **overrides}
    config = resolve(task, variant, card, file_values, flags)
    folder = RunFolder(config.resolved_output_dir())
    if not resume:
        _claim_output_dir(folder, overwrite_output_dir)
    langs = _eval_langs(eval_langs, do_eval)
    token = check_hub_push(push_to_hub) if push_to_hub else None
    try:
        summary = run_finetune(config, resume=resume, progress=not quiet)
    except KeyboardInterrupt as stop:
        interrupted(stop, folder, f"xsyn finetune --resume {shlex.quote(str(folder.path))}")
    if is_main_process():
        click.echo(json.dumps(summary, indent=2))
    if langs is not None:
        evaluation = evaluate_run(locate_checkpoint(folder.path), langs=langs or None, progress=not quiet)
        if is_main_process():
            _echo_scores(evaluation, split_chosen=False)
    if push_to_hub and is_main_process():
        url = push_checkpoint(folder.best, push_to_hub, token)
        click.echo(f"pushed {folder.best} to {url}", err=True)


def _claim_output_dir(folder: RunFolder, overwrite: bool) -> None:
    """A fresh run's folder must be empty: what is there would be mixed with the new run's files, or lost.
    Judged under the folder's writer lock: a run that another process is writing is named, never deleted."""
    if not folder.entries():
        return  # (a folder not made yet is made by the preflight, which names a path that cannot be one)
    with folder.writing():
        present = folder.entries()
        if not present:
            return
        if not overwrite:
            what = (f"a run that saved progress ({folder.state.name}/ or {folder.train_results.name})"
                    if folder.has_progress() else
                    f"{len(present)} entries ({', '.join(present[:4])}{', ...' if len(present) > 4 else ''})")
            raise click.ClickException(f"{folder.path} already holds {what}: continue it with --resume "
                                       f"{shlex.quote(str(folder.path))}, start afresh with --overwrite-output-dir, "
                                       "or choose another --output-dir (or --seed)")
        folder.clear()


def _eval_langs(eval_langs: str | None, do_eval: bool) -> list[str] | None:
    """The languages to evaluate after training: None (no evaluation), [] (all of the task's) or a list."""
    if eval_langs is None:
        return [] if do_eval else None
    langs = [lang.strip() for lang in eval_langs.split(",") if lang.strip()]
    return [] if langs == ["all"] else langs


def interrupted(stop: KeyboardInterrupt, folder: RunFolder, command: str) -> NoReturn:
    """Ctrl-C: say where the run stands and the command that continues it, then exit 130 (as a shell does)."""
    saved = getattr(stop, "saved_step", None)
    if saved is None:
        saved = folder.saved_step()
    where = f"the state of step {saved} is saved in {folder.state}" if saved else "no training state was saved yet"
    click.echo(f"\ninterrupted: {where}. Continue with:\n  {command}", err=True)
    raise SystemExit(130)


def _echo_scores(summary: dict, split_chosen: bool) -> None:
    """Each language's score with the metric's name and its bootstrap sd; what the numbers rest on."""
    if not split_chosen and summary["split"] != "test":
        click.echo(f"note: scoring the {summary['split']} split: {summary['task']}'s test split is missing or has "
                   "no labels (pass --split to choose)")
    spread = summary.get("bootstrap_sd") or {}
    click.echo(f"{summary['task']} {summary['split']}: {summary['primary']} (± sd over bootstrap resamples of the "
               "examples)")
    for lang, value in summary["per_language"].items():
        sd = spread.get(lang)
        click.echo(f"{lang}\t{summary['primary']} {value:.2f}" + (f" ± {sd:.2f}" if sd is not None else ""))
    if summary["average"] is not None:
        click.echo(f"average\t{summary['primary']} {summary['average']:.2f}")
    for key, what in (summary.get("predicted_nothing") or {}).items():
        click.echo(f"warning: {key}: the model predicted {what}; scores that count correct silence or the "
                   "majority label can be high for that reason alone", err=True)


@main.command()
@click.option("--model-dir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="A finetune output folder (or a checkpoint folder inside it).")
@click.option("--task", type=TaskChoice(), default=None,
              help="Evaluate on this task (a name or a card file PATH.toml) [default: the run's own]; another task "
                   "must be of the same kind and labels (a model fine-tuned for MLQA on XQuAD).")
@click.option("--langs", default=None, help="Comma-separated languages [default: all of the task's].")
@click.option("--split", type=click.Choice(["validation", "test"]), default=None,
              help="The split to score [default: test; validation where the task's test split has no labels].")
@click.option("--max-eval-examples", type=click.IntRange(min=1), default=None,
              help="Score only the first N examples of each language (a quick look; results.json says so).")
@click.option("--generalized", is_flag=True, help="Also evaluate every ordered language pair.")
@click.option("--output-dir", type=click.Path(file_okay=False), default=None,
              help="Where the results go [default: <model-dir>/eval-<split>].")
@click.option("--skip-missing", is_flag=True, help="Skip languages without data (listed in results.json).")
@click.option("--batch-size", "eval_batch_size", type=int, default=None,
              help="Examples per prediction batch, over all processes [default: the run's eval_batch_size, 64].")
@data_options
@click.option("--quiet", is_flag=True, help="No progress bars.")
def evaluate(model_dir, task, langs, split, max_eval_examples, generalized, output_dir, skip_missing, quiet,
             **overrides) -> None:
    """Zero-shot results per language; with --generalized, the language-pair matrix too."""
    from xsyn.run.evaluation import dropped_lines, evaluate_run, locate_checkpoint

    if quiet or not on_terminal(sys.stderr):  # off a terminal each redraw of their bars is a line
        quiet_libraries()
    checkpoint = locate_checkpoint(model_dir)
    summary = evaluate_run(checkpoint, split=split, langs=langs.split(",") if langs else None,
                           generalized=generalized, output_dir=output_dir, overrides=overrides,
                           skip_missing=skip_missing, max_examples=max_eval_examples, progress=not quiet, task=task)
    if not is_main_process():
        return
    _echo_scores(summary, split_chosen=split is not None)
    if summary.get("pairs"):
        click.echo(f"language pairs: {sum(map(len, summary['pairs'].values()))} (the matrix: pairs.csv in the "
                   "output folder)")
    for line in dropped_lines(summary):
        click.echo(line)
    if summary["missing_languages"]:
        click.echo(f"skipped (no data): {', '.join(summary['missing_languages'])}")
