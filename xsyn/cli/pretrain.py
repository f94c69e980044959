"""`xsyn pretrain-<variant>` (its name: `XsynGroup`): pre-train a variant's syntax module on treebanks."""

from __future__ import annotations

from pathlib import Path

import click

from xsyn.cli.main import COUNT, FOLDER, WithVariantOptions, table_options
from xsyn.cli.run import CHECKPOINTING_STEPS, interrupted
from xsyn.models.names import DEFAULT_MODEL, DEFAULT_SEED, TINY
from xsyn.models.variants import pretraining_option_settings
from xsyn.pretraining.recipes import RECIPES, recipes_help
from xsyn.training.folder import RunFolder, is_main_process


@click.command(cls=WithVariantOptions, declared=pretraining_option_settings)  # `main` names it
@click.option("--dropout/--no-dropout", default=None,
              help="Apply the model's dropout in the GAT while pre-training (off: the probes regress exact "
                   "distances, and dropout noise costs UUAS) [default: off].")
@table_options(
    ("--treebanks", None, None, None, "Training treebanks: comma-separated languages or treebank names "
     "(en,de,UD_Arabic-PUD)."),
    ("--treebank-dir", None, FOLDER, None, "A folder of UD treebank folders (a UD release) or one treebank folder."),
    ("--eval-treebanks", None, None, None, "Treebanks to probe after training (default: the training ones; 'all': "
     "all 17 languages)."),
    ("--model", None, None, None, f"BERT checkpoint (hub name or directory) whose word-piece embeddings the GAT "
     f"reads, or '{TINY}' (random, for CPU runs; needs --tokenizer) [default: {DEFAULT_MODEL}]."),
    ("--tokenizer", None, None, None, "vocab.txt or tokenizer directory (default: the model's)."),
    ("--objectives", None, None, None, "Comma-separated: structural (probe distance + depth losses), seprem "
     "(distance prediction) [default: structural]."),
    ("--train-split", None, None, None, "Split of the training treebanks [default: train]."),
    ("--max-train-examples", None, COUNT, None, "Per training treebank: a seeded sample of N sentences."),
    ("--max-eval-examples", None, COUNT, None, "Per probed treebank: a seeded sample of N sentences."),
    ("--epochs", None, float, None, "Passes over the training sentences [default: 1]."),
    ("--max-steps", None, int, None, "Stop after this many optimiser steps (overrides --epochs)."),
    ("--batch-size", None, int, None, "Sentences per optimiser step, over all processes and accumulation steps (the "
     "global batch) [default: 32]."),
    ("--grad-accum", None, int, None, "Micro-batches per optimiser step (each split over the processes) [default: 1]."),
    ("--learning-rate", None, float, None, "Peak learning rate: linear warmup over the first --warmup-steps, then "
     "linear decay to 0 [default: the --recipe's, 1e-3 for paper]."),
    ("--warmup-steps", None, click.IntRange(min=0), None, "Steps over which the learning rate warms up from 0 "
     "[default: a twentieth of the steps]."),
    ("--weight-decay", None, float, None, "AdamW's weight decay (not on biases and LayerNorm weights) "
     "[default: 0.01]."),
    ("--max-grad-norm", None, float, None, "Clip the gradient's global norm to this value [default: 1.0]."),
    ("--max-length", None, int, None, "Word pieces per input; longer sentences are windowed (training) or counted "
     "(evaluation) [default: 256]."),
    ("--seed", None, int, None, f"Seeds the sampling, the initialisation and the batch order "
     f"[default: {DEFAULT_SEED}]."),
    ("--log-every", None, int, None, "Report (and record in the loss curve) the mean losses every N steps "
     "[default: 20]."),
    ("--set", "sets", [None], "KEY=VALUE", "A pre-training setting (e.g. --set seprem_max_distance=6) or a further "
     "GAT setting (XsynBertConfig field), e.g. --set gat_residual=true --set gat_layers=6 (repeatable)."),
    ("--recipe", None, click.Choice(sorted(RECIPES)), "paper", recipes_help()),
    ("--config", "config_file", click.Path(exists=True, dir_okay=False, path_type=Path), None, "A TOML or JSON "
     "file of these settings (e.g. an earlier run's pretrain_config.json); it wins over the recipe, and options "
     "given here win over it."),
    ("--output-dir", None, FOLDER, None, "Folder for the GAT checkpoint, probe metrics, train_log.jsonl and the "
     "run's settings (required, here or in --config)."),
    ("--checkpointing-steps", None, CHECKPOINTING_STEPS, None, "Save a resumable state (state/) every N optimiser "
     "steps, or each `epoch` [default: each epoch, and at the end]."),
    ("--save-total-limit", None, COUNT, None, "Resumable states kept: state/ and the K-1 before it as "
     "checkpoint-<step>/ [default: 1]."),
    ("--resume", None, bool, None, "Continue from the run's last saved state (state/)."),
    ("--overwrite-output-dir", None, bool, None, "Start afresh in an --output-dir that holds files (the run files "
     "in it are deleted first)."),
    ("--quiet", None, bool, None, "No progress bar."))
def pretrain_command(config_file, sets, recipe, resume, overwrite_output_dir, quiet, **flags) -> None:
    """Pre-train the GAT on treebanks' gold trees with structural-probe (and SEPREM) losses, then probe it.

    \b
    --recipe strong trains the GAT that reaches UUAS 0.996 on EWT dev (docs/finetune.md), e.g.
      xsyn pretrain-gat --recipe strong --treebanks en --treebank-dir UD_RELEASE --model tiny \\
          --tokenizer vocab.txt --max-steps 3000 --output-dir runs/gat-tiny
    """
    from xsyn.run.pretrain import pretrain_settings, pretrain_syntax, probe_text

    for name in ("treebanks", "eval_treebanks", "objectives"):  # comma-separated
        flags[name] = [v.strip() for v in flags[name].split(",") if v.strip()] if flags[name] else None
    settings = pretrain_settings(recipe, config_file, sets, **flags)
    folder = RunFolder(settings.output_dir)
    try:
        summary = pretrain_syntax(settings, resume, overwrite_output_dir, progress=not quiet, continue_with="--resume")
    except KeyboardInterrupt as stop:
        interrupted(stop, folder, "the same command with --resume" if not resume else "the same command")
    if not is_main_process():
        return
    click.echo(probe_text(summary))
    click.echo(f"GAT checkpoint and {folder.probe_metrics.name} -> {folder.path}")
