"""`xsyn parse`, `xsyn parser-quality`, and the parser options every command that parses shares.

The options are made from the parser registry (`xsyn.syntax.parsing.registry`): `--parser` with the
registered parsers' help, and one flag per parser option, defined once for every command.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from xsyn.cli.main import main
from xsyn.syntax.parsing.registry import (
    PARSER_OPTIONS,
    ParserChoiceError,
    ParserOption,
    parsers_help,
    resolve_parser_choice,
)


class ParserChoiceType(click.ParamType):
    """A parser choice (`stanza`, `udpipe:MODEL`, ...), checked against the registry."""

    name = "PARSER"

    def convert(self, value, param, ctx):
        try:
            resolve_parser_choice(value)
        except ParserChoiceError as err:
            self.fail(str(err), param, ctx)
        return value


def parser_option(default: str | None = None, purpose: str = "The parser", default_note: str = "") -> Callable:
    """`--parser`, with the registered parsers in its help."""
    shown = f" [default: {default}]" if default else (f" [default: {default_note}]" if default_note else "")
    return click.option("--parser", type=ParserChoiceType(), default=default,
                        help=f"{purpose}: {parsers_help()}.{shown}")


def _flag(option: ParserOption) -> Callable:
    if option.folder:
        kind: Any = click.Path(file_okay=False)
    elif option.choices:
        kind = click.Choice(option.choices)
    elif option.minimum is not None:
        kind = click.IntRange(min=option.minimum)
    else:
        kind = option.type
    shown = f" [default: {option.default}]" if option.default is not None else ""
    return click.option(option.flag, option.setting, type=kind, default=None, help=option.help + shown)


def parser_options(default: str | None = None, purpose: str = "The parser", default_note: str = "") -> Callable:
    """`--parser` and every parser option's flag (unset: None, so a run's saved settings or the
    option's default apply)."""
    def add(command: Callable) -> Callable:
        for decorate in reversed([parser_option(default, purpose, default_note), *map(_flag, PARSER_OPTIONS)]):
            command = decorate(command)
        return command
    return add


def parser_settings(flags: dict[str, Any]) -> dict[str, Any]:
    """The parser options' values, taken out of a command's keyword arguments."""
    return {option.setting: flags.pop(option.setting) for option in PARSER_OPTIONS}


@main.command(name="parse")
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
@click.option("--quiet", is_flag=True, help="No progress (sentences/s and ETA) while parsing.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
def parse_command(input_path: Path, fmt: str, lang: str, output: Path, parser: str, cache_dir: Path | None,
                  import_as: str, skip_invalid: bool, workers: int | None, quiet: bool, as_json: bool,
                  **flags: Any) -> None:
    """Parse (or convert) a file into syntax records and the parse cache, and report what it did."""
    from xsyn.syntax.inputs import parse_file
    from xsyn.syntax.parsing import build_parser

    chosen = build_parser(parser, **parser_settings(flags)) if fmt != "conllu" else None
    parsed = parse_file(input_path, fmt, lang, output, chosen, cache_dir, import_as, skip_invalid, workers,
                        progress=not quiet)
    if as_json:
        click.echo(json.dumps(parsed.as_dict()))
        return
    report, extra = parsed.report, parsed.extra
    click.echo(f"segments:        {report.segments}")
    click.echo(f"unique segments: {report.unique} ({report.duplicates} repeats parsed once)")
    click.echo(f"cache hits:      {report.cache_hits}")
    click.echo(f"parsed:          {report.parsed}")
    click.echo(f"parse time:      {report.seconds:.2f}s"
               + (f" ({report.parsed / report.parse_seconds:,.0f} sentences/s parsed)"
                  if report.parsed and report.parse_seconds else ""))
    if report.corrupt_cache_entries:
        click.echo(f"corrupt cache entries skipped (parsed again): {report.corrupt_cache_entries}")
    for key, value in extra.items():
        if key != "skipped_reasons":
            click.echo(f"{key.replace('_', ' ')}: {value}")
    for reason in extra.get("skipped_reasons", []):
        click.echo(f"  skipped: {reason}")
    click.echo(f"records -> {output}")


@main.command(name="parser-quality")
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
    from xsyn.syntax.parsing import build_parser
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
