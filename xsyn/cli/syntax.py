"""`xsyn parse` and `xsyn parser-quality` (the parser options every command that parses shares: `cli/options.py`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from xsyn.cli.options import XsynCommand, notes_off, parser_options, parser_settings
from xsyn.syntax.parsing import build_parser
from xsyn.syntax.parsing.registry import resolve_parser_choice


@click.command(name="parse", cls=XsynCommand)
@click.option("--input", "input_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              required=True, help="File to parse or convert.")
@click.option("--format", "fmt", type=click.Choice(["conllu", "text", "tokens"]), required=True,
              help="conllu: convert pre-parsed sentences; text: one raw segment per line; "
                   "tokens: one pre-tokenised segment per line, tokens separated by whitespace.")
@click.option("--lang", required=True, help="Language code of the input (e.g. en, de, zh).")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Where to write the syntax records (JSON Lines).")
@parser_options(default="stanza", purpose="Parser for text/tokens input")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="xsyn's cache folder, the same as finetune's: the parses go to its parses/ "
                   "(default: $XSYN_CACHE or ~/.cache/xsyn).")
@click.option("--import-as", default="conllu", show_default=True,
              help="For --format conllu: the parser name under which the sentences enter the parse cache "
                   "(kept apart from the parses of the parsers; for runs, pass the file itself as "
                   "--parser conllu:PATH).")
@click.option("--skip-invalid", is_flag=True,
              help="Skip (and count) malformed sentences instead of stopping at the first one.")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Processes that parse side by side [default: the cores; 1 for chain and for Stanza on a GPU].")
@click.option("--quiet", is_flag=True,
              help="No progress (sentences/s and ETA) while parsing, no notes (warnings and errors still show).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
def parse_command(input_path: Path, fmt: str, lang: str, output: Path, parser: str, cache_dir: Path | None,
                  import_as: str, skip_invalid: bool, workers: int | None, quiet: bool, as_json: bool,
                  **flags: Any) -> None:
    """Parse (or convert) a file into syntax records and the parse cache, and report what it did."""
    from xsyn.syntax.inputs import parse_file

    if quiet:
        notes_off()
    chosen = build_parser(parser, **parser_settings(flags)) if fmt != "conllu" else None
    parsed = parse_file(input_path, fmt, lang, output, chosen, cache_dir, import_as, skip_invalid, workers,
                        progress=not quiet)
    if as_json:
        click.echo(json.dumps(parsed.as_dict()))
        return
    click.echo(parsed.text())


@click.command(name="parser-quality", cls=XsynCommand)
@parser_options(default="stanza", purpose="The parser to score")
@click.option("--treebanks", required=True,
              help="Comma-separated languages or treebank names (en,de,UD_Arabic-PUD).")
@click.option("--treebank-dir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="A folder of UD treebank folders (a UD release) or one treebank folder.")
@click.option("--split", type=click.Choice(["validation", "test"]), default=None,
              help="Split to parse: the treebank's dev file, or its test file (default: validation, or test "
                   "for test-only treebanks).")
@click.option("--input", "parser_input", type=click.Choice(["text", "words"]), default="text",
              show_default=True,
              help="text: parse each sentence's raw text (the parser tokenises, as for XNLI/PAWS-X); "
                   "words: parse the gold words pre-tokenised (tagging and parsing only).")
@click.option("--max-eval-examples", "limit", type=click.IntRange(min=1), default=None,
              help="Score the first N sentences of each treebank.")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write {lang: {uas, las, words_f1, ...}} here as JSON.")
@click.option("--probe-metrics", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="A probe_metrics.json of `xsyn pretrain-gat`: its UUAS is printed (and plotted) beside "
                   "each language's UAS and LAS.")
@click.option("--plot-output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write a PNG chart of UAS and LAS per language (with --probe-metrics: and probe UUAS).")
def parser_quality_command(parser: str, treebanks: str, treebank_dir: Path, split: str | None, parser_input: str,
                           limit: int | None, output: Path | None, probe_metrics: Path | None,
                           plot_output: Path | None, **flags: Any) -> None:
    """UAS and LAS of a parser against gold UD treebanks: how good the parses are that feed the model."""
    from xsyn.syntax.quality import check_outputs, read_probe_metrics, score_parser, write_scores, write_scores_chart

    check_outputs(output, plot_output)  # before parsing: a folder that cannot be made is named now
    probes = read_probe_metrics(probe_metrics) if probe_metrics is not None else {}
    built = build_parser(parser, **parser_settings(flags))
    results = {}
    for done in score_parser(built, [s.strip() for s in treebanks.split(",") if s.strip()], treebank_dir,
                             split=split, limit=limit, parser_input=parser_input):
        results[done.lang] = done.as_dict()
        click.echo(done.text(probes.get(done.lang, {}).get("uuas")))
    if output is not None:
        write_scores(results, output)
        click.echo(f"scores -> {output}")
    if plot_output is not None:
        write_scores_chart(results, probes, resolve_parser_choice(parser).label, plot_output)
        click.echo(f"chart -> {plot_output}")
