"""`xsyn predict`: a fine-tuned model on new text."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from xsyn.cli.options import XsynCommand, notes_off, parser_options, parser_settings
from xsyn.utils.progress import quiet_libraries


@click.command(cls=XsynCommand)
@click.option("--model-dir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="A finetune output folder (or a checkpoint folder inside it).")
@click.option("--input", "input_file", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True,
              help="JSON Lines (one object per line) or TSV with a header, holding the task's segments by name "
              "(sentence1/sentence2, premise/hypothesis, question/context; tagging: text, or tokens as a list); "
              "optional columns: id, lang, <segment>_lang.")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="JSON Lines file for the predictions [default: standard output].")
@click.option("--lang", default=None, help="Language of rows that name none [default: the model's training "
              "language].")
@parser_options(default_note="the one the model was trained with")
@click.option("--tokens", type=click.Choice(["parser", "whitespace"]), default="parser", show_default=True,
              help="Tagging tasks: tokenise raw text with the parser, or at whitespace.")
@click.option("--batch-size", type=click.IntRange(min=1), default=None, help="Examples per batch [default: the run's "
              "eval_batch_size, 64].")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None,
              help="Parse and feature caches (default: $XSYN_CACHE or ~/.cache/xsyn).")
@click.option("--quiet", is_flag=True, help="No progress bar, notes or summary (warnings and errors still show).")
def predict(model_dir, input_file, output, lang, parser, tokens, batch_size, cache_dir, quiet, **flags) -> None:
    """Predict on new text: labels and probabilities, entity spans, answers, or intents and slots.

    Parses the input (through the parse cache), runs the model in length-bucketed batches and
    writes one JSON object per input row, in input order.
    """
    from xsyn.run.checks import preflight_output
    from xsyn.run.predict import predict as run_predict
    from xsyn.run.predict import report_text, write_predictions

    if quiet:
        quiet_libraries()
        notes_off()
    if output is not None:
        preflight_output(output.parent, "--output")  # before parsing and loading the model
    report: dict = {}
    overrides = {**parser_settings(flags), "cache_dir": cache_dir}
    predictions = run_predict(model_dir, input_file, lang=lang, parser=parser, tokens=tokens,
                              batch_size=batch_size, overrides=overrides, progress=not quiet, report=report)
    if output is None:
        for prediction in predictions:
            click.echo(json.dumps(prediction, ensure_ascii=False))
    else:
        write_predictions(predictions, output)
    if not quiet:
        print(report_text(report, output), file=sys.stderr)
