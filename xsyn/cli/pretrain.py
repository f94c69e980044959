"""`xsyn pretrain-<variant>`: pre-train the syntax module of the variant that declares one, and its
probes, on UD treebanks (`xsyn.run.pretrain`). Its name and the variant's own options are the variant's
(`SyntaxVariant.pretraining`), read when a command line is parsed."""

from __future__ import annotations

from pathlib import Path

import click

from xsyn.cli.main import WithVariantOptions, main
from xsyn.cli.run import CHECKPOINTING_STEPS, interrupted
from xsyn.models.defaults import DEFAULT_MODEL, DEFAULT_SEED, TINY
from xsyn.pretraining.recipes import RECIPES, recipes_help
from xsyn.training.folder import RunFolder, is_main_process


def _list(value: str | None) -> list[str] | None:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


class PretrainCommand(WithVariantOptions):
    """Takes the options of the pre-trained variant's settings (`Pretraining.options`), as finetune takes the
    variants' (`SyntaxVariant.options`)."""

    def declared_options(self) -> dict:
        from xsyn.models.variants import pretraining_option_settings

        return pretraining_option_settings()


def command_name() -> str:
    from xsyn.models.variants import pretraining_variant

    variant = pretraining_variant()
    return variant.pretraining.command(variant.name)


@click.command(cls=PretrainCommand)  # named by the variant: main.add_named_later below
@click.option("--treebanks", default=None,
              help="Training treebanks: comma-separated languages or treebank names (en,de,UD_Arabic-PUD).")
@click.option("--treebank-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="A folder of UD treebank folders (a UD release) or one treebank folder.")
@click.option("--eval-treebanks", default=None,
              help="Treebanks to probe after training (default: the training ones; 'all': all 17 languages).")
@click.option("--model", default=None, help=f"BERT checkpoint (hub name or directory) whose word-piece embeddings "
              f"the GAT reads, or '{TINY}' (random, for CPU runs; needs --tokenizer) [default: {DEFAULT_MODEL}].")
@click.option("--tokenizer", default=None, help="vocab.txt or tokenizer directory (default: the model's).")
@click.option("--dropout/--no-dropout", default=None,
              help="Apply the model's dropout in the GAT while pre-training (off: the probes regress exact "
                   "distances, and dropout noise costs UUAS) [default: off].")
@click.option("--objectives", default=None,
              help="Comma-separated: structural (probe distance + depth losses), seprem (distance prediction) "
                   "[default: structural].")
@click.option("--train-split", default=None, help="Split of the training treebanks [default: train].")
@click.option("--max-train-examples", type=click.IntRange(min=1), default=None,
              help="Per training treebank: a seeded sample of N sentences.")
@click.option("--max-eval-examples", type=click.IntRange(min=1), default=None,
              help="Per probed treebank: a seeded sample of N sentences.")
@click.option("--epochs", type=float, default=None, help="Passes over the training sentences [default: 1].")
@click.option("--max-steps", type=int, default=None, help="Stop after this many optimiser steps "
              "(overrides --epochs).")
@click.option("--batch-size", type=int, default=None, help="Sentences per optimiser step, over all processes and "
              "accumulation steps (the global batch) [default: 32].")
@click.option("--grad-accum", type=int, default=None,
              help="Micro-batches per optimiser step (each split over the processes) [default: 1].")
@click.option("--learning-rate", type=float, default=None, help="Peak learning rate: linear warmup over the first "
              "--warmup-steps, then linear decay to 0 [default: the --recipe's, 1e-3 for paper].")
@click.option("--warmup-steps", type=click.IntRange(min=0), default=None,
              help="Steps over which the learning rate warms up from 0 [default: a twentieth of the steps].")
@click.option("--weight-decay", type=float, default=None,
              help="AdamW's weight decay (not on biases and LayerNorm weights) [default: 0.01].")
@click.option("--max-grad-norm", type=float, default=None,
              help="Clip the gradient's global norm to this value [default: 1.0].")
@click.option("--max-length", type=int, default=None,
              help="Word pieces per input; longer sentences are windowed (training) or counted (evaluation) "
                   "[default: 256].")
@click.option("--seed", type=int, default=None, help=f"Seeds the sampling, the initialisation and the batch order "
              f"[default: {DEFAULT_SEED}].")
@click.option("--log-every", type=int, default=None,
              help="Report (and record in the loss curve) the mean losses every N steps [default: 20].")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="A pre-training setting (e.g. --set seprem_max_distance=6) or a further GAT setting "
                   "(XsynBertConfig field), e.g. --set gat_residual=true --set gat_layers=6 (repeatable).")
@click.option("--recipe", type=click.Choice(sorted(RECIPES)), default="paper", show_default=True,
              help=recipes_help())
@click.option("--config", "config_file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="A TOML or JSON file of these settings (e.g. an earlier run's pretrain_config.json); it wins "
                   "over the recipe, and options given here win over it.")
@click.option("--output-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for the GAT checkpoint, probe metrics, train_log.jsonl and the run's settings "
                   "(required, here or in --config).")
@click.option("--checkpointing-steps", type=CHECKPOINTING_STEPS, default=None,
              help="Save a resumable state (state/) every N optimiser steps, or each `epoch` [default: each epoch, "
                   "and at the end].")
@click.option("--save-total-limit", type=click.IntRange(min=1), default=None,
              help="Resumable states kept: state/ and the K-1 before it as checkpoint-<step>/ [default: 1].")
@click.option("--resume", is_flag=True, help="Continue from the run's last saved state (state/).")
@click.option("--overwrite-output-dir", is_flag=True,
              help="Start afresh in an --output-dir that holds files (the run files in it are deleted first).")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def pretrain_command(config_file: Path | None, sets: tuple[str, ...], recipe: str, resume: bool,
                     overwrite_output_dir: bool, quiet: bool, **flags) -> None:
    """Pre-train the GAT on treebanks' gold trees with structural-probe (and SEPREM) losses, then probe it.

    \b
    --recipe strong trains the GAT that reaches UUAS 0.996 on EWT dev (docs/finetune.md), e.g.
      xsyn pretrain-gat --recipe strong --treebanks en --treebank-dir UD_RELEASE --model tiny \\
          --tokenizer vocab.txt --max-steps 3000 --output-dir runs/gat-tiny
    """
    from xsyn.run.pretrain import pretrain_settings, pretrain_syntax, probe_text

    for name in ("treebanks", "eval_treebanks", "objectives"):
        flags[name] = _list(flags[name])
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


main.add_named_later(pretrain_command, command_name)
