"""`xsyn pretrain-<variant>` (its name: `XsynGroup`): pre-train a variant's syntax module on treebanks."""

from __future__ import annotations

from pathlib import Path

import click

from xsyn.cli.options import CHECKPOINTING_STEPS, COUNT, FOLDER, WithVariantOptions, interrupted, notes_off
from xsyn.models.names import DEFAULT_MODEL, DEFAULT_SEED, TINY
from xsyn.models.variants import pretraining_option_settings
from xsyn.pretraining.recipes import RECIPES, recipes_help
from xsyn.training.folder import RunFolder, is_main_process


@click.command(cls=WithVariantOptions, declared=pretraining_option_settings)  # `XsynGroup` names it
@click.option("--dropout/--no-dropout", default=None,
              help="Apply the model's dropout in the GAT while pre-training (off: the probes regress exact distances, "
                   "and dropout noise costs UUAS) [default: off].")
@click.option("--treebanks",
              help="Training treebanks: comma-separated languages or treebank names (en,de,UD_Arabic-PUD).")
@click.option("--treebank-dir", type=FOLDER,
              help="A folder of UD treebank folders (a UD release) or one treebank folder.")
@click.option("--eval-treebanks",
              help="Treebanks to probe after training (default: the training ones; 'all': all 17 languages).")
@click.option("--model",
              help=f"BERT checkpoint (hub name or directory) whose word-piece embeddings the GAT reads, or '{TINY}' "
                   f"(random, for CPU runs; needs --tokenizer) [default: {DEFAULT_MODEL}].")
@click.option("--tokenizer", help="vocab.txt or tokenizer directory (default: the model's).")
@click.option("--objectives",
              help="Comma-separated: structural (probe distance + depth losses), seprem (distance prediction) "
                   "[default: structural].")
@click.option("--train-split", help="Split of the training treebanks [default: train].")
@click.option("--max-train-examples", type=COUNT, help="Per training treebank: a seeded sample of N sentences.")
@click.option("--max-eval-examples", type=COUNT, help="Per probed treebank: a seeded sample of N sentences.")
@click.option("--epochs", type=float, help="Passes over the training sentences [default: 1].")
@click.option("--max-steps", type=int, help="Stop after this many optimiser steps (overrides --epochs).")
@click.option("--batch-size", type=int,
              help="Sentences per optimiser step, over all processes and accumulation steps (the global batch) "
                   "[default: 32].")
@click.option("--grad-accum", type=int,
              help="Micro-batches per optimiser step (each split over the processes) [default: 1].")
@click.option("--learning-rate", type=float,
              help="Peak learning rate: linear warmup over the first --warmup-steps, then linear decay to 0 [default: "
                   "the --recipe's, 1e-3 for paper].")
@click.option("--warmup-steps", type=click.IntRange(min=0),
              help="Steps over which the learning rate warms up from 0 [default: a twentieth of the steps].")
@click.option("--weight-decay", type=float,
              help="AdamW's weight decay (not on biases and LayerNorm weights) [default: 0.01].")
@click.option("--max-grad-norm", type=float, help="Clip the gradient's global norm to this value [default: 1.0].")
@click.option("--max-length", type=int,
              help="Word pieces per input; longer sentences are windowed (training) or counted (evaluation) [default: "
                   "256].")
@click.option("--seed", type=int,
              help=f"Seeds the sampling, the initialisation and the batch order [default: {DEFAULT_SEED}].")
@click.option("--log-every", type=int,
              help="Report (and record in the loss curve) the mean losses every N steps [default: 20].")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="A pre-training setting (e.g. --set seprem_max_distance=6) or a further GAT setting "
                   "(XsynBertConfig field), e.g. --set gat_residual=true --set gat_layers=6 (repeatable).")
@click.option("--recipe", type=click.Choice(sorted(RECIPES)), default="paper", show_default=True, help=recipes_help())
@click.option("--config", "config_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A TOML or JSON file of these settings (e.g. an earlier run's pretrain_config.json); it wins over "
                   "the recipe, and options given here win over it.")
@click.option("--output-dir", type=FOLDER,
              help="Folder for the GAT checkpoint, probe metrics, train_log.jsonl and the run's settings (required, "
                   "here or in --config).")
@click.option("--checkpointing-steps", type=CHECKPOINTING_STEPS,
              help="Save a resumable state (state/) every N optimiser steps, or each `epoch` [default: each epoch, "
                   "and at the end].")
@click.option("--save-total-limit", type=COUNT,
              help="Resumable states kept: state/ and the K-1 before it as checkpoint-<step>/ [default: 1].")
@click.option("--resume", is_flag=True, help="Continue from the run's last saved state (state/).")
@click.option("--overwrite-output-dir", is_flag=True,
              help="Start afresh in an --output-dir that holds files (the run files in it are deleted first).")
@click.option("--quiet", is_flag=True, help="No progress bar, no notes (warnings and errors still show).")
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
    if quiet:
        notes_off()
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
