"""`xsyn parse`, `xsyn parser-quality`, and the Stanza options every parsing command shares."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from xsyn.cli.main import main
from xsyn.syntax.parsers import STANZA_BATCH_DOCS, parse_parser_spec
from xsyn.syntax.quality import as_tokens, attachment_scores

_TREEBANK_SPLITS = {"validation": "dev"}  # xsyn's split names -> UD's file names


class ParserChoice(click.ParamType):
    """A parser choice (stanza, chain, conllu:PATH, udpipe:MODEL), checked by `parse_parser_spec`."""

    name = "PARSER"

    def convert(self, value, param, ctx):
        try:
            parse_parser_spec(value)
        except ValueError as err:
            self.fail(str(err), param, ctx)
        return value


PARSER_HELP = ("stanza (Stanza's neural pipeline), chain (a model-free linear-order control tree), "
               "conllu:PATH (the trees of a pre-parsed CoNLL-U file or folder, looked up by each segment's "
               "text) or udpipe:MODEL (UDPipe 1 with a .udpipe model file, or a folder of them, one per language)")


def stanza_options(command):
    """The Stanza settings every parsing command takes: model folder, download policy, device, batch size (`--device`
    is the old name of `--parser-device`)."""
    for option in reversed([
        click.option("--parser-model-dir", type=click.Path(file_okay=False), default=None,
                     help="Folder of Stanza models (default: Stanza's own)."),
        click.option("--download", type=click.Choice(["none", "reuse", "download"]), default="reuse",
                     show_default=True, help="Stanza model download policy."),
        click.option("--parser-device", default=None,
                     help="Device for Stanza (cpu, cuda, cuda:1) [default: a GPU when there is one]."),
        click.option("--parser-batch-size", type=click.IntRange(min=1), default=STANZA_BATCH_DOCS, show_default=True,
                     help="Documents per Stanza call."),
    ]):
        command = option(command)
    return command


def build_parser(spec: str, parser_model_dir: str | None, download: str, device: str | None, batch_size: int):
    """The parser a command was given, with its Stanza settings; bad paths and models are usage errors."""
    from xsyn.syntax.parsers import ParserUnavailable, get_parser

    try:
        return get_parser(spec, model_dir=parser_model_dir, download=download, device=device,
                          batch_docs=batch_size)
    except (ParserUnavailable, OSError) as err:
        raise click.ClickException(str(err)) from None


@main.command(name="parse")
@click.option("--input", "input_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              required=True, help="File to parse or convert.")
@click.option("--format", "fmt", type=click.Choice(["conllu", "text", "tokens"]), required=True,
              help="conllu: convert pre-parsed sentences; text: one raw segment per line; "
                   "tokens: one pre-tokenised segment per line, tokens separated by whitespace.")
@click.option("--lang", required=True, help="Language code of the input (e.g. en, de, zh).")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Where to write the syntax records (JSON Lines).")
@click.option("--parser", "parser_name", type=ParserChoice(), default="stanza", show_default=True,
              help=f"Parser for text/tokens input: {PARSER_HELP}.")
@stanza_options
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
def parse_command(input_path: Path, fmt: str, lang: str, output: Path, parser_name: str,
                  parser_model_dir: str | None, download: str, parser_device: str | None, parser_batch_size: int,
                  cache_dir: Path | None, import_as: str, skip_invalid: bool, workers: int | None, quiet: bool,
                  as_json: bool) -> None:
    """Parse (or convert) a file into syntax records and the parse cache, and report what it did."""
    from xsyn.syntax.cache import ParseCache, cache_key
    from xsyn.syntax.conllu import ConlluError, ConlluStats, NotUtf8Error, not_utf8_error, read_conllu
    from xsyn.syntax.parse import ParseReport, default_workers, parse_segments
    from xsyn.syntax.parsers import ParserUnavailable
    from xsyn.syntax.record import write_jsonl
    from xsyn.syntax.segment import Segment, is_blank
    from xsyn.utils.io import ensure_dir

    ensure_dir(output.parent, option="--output")  # before parsing: a folder that cannot be made is named now
    cache = ParseCache(cache_dir / "parses" if cache_dir is not None else None)
    start = time.perf_counter()
    extra: dict = {}
    if fmt == "conllu":
        stats = ConlluStats()
        try:
            records = list(read_conllu(input_path, lang=lang, skip_invalid=skip_invalid, stats=stats))
        except NotUtf8Error as err:
            raise click.ClickException(str(err)) from None
        except ConlluError as err:
            raise click.ClickException(f"{err}\n(use --skip-invalid to skip and count bad sentences)") from None
        keys = [cache_key(r.text, lang, import_as, "", {}) for r in records]
        new = {k: r for k, r in zip(keys, records) if k not in cache}
        cache.put_many(new.items())
        report = ParseReport(segments=len(records), unique=len(set(keys)), duplicates=len(keys) - len(set(keys)),
                             cache_hits=len(set(keys)) - len(new), parsed=len(new),
                             corrupt_cache_entries=cache.unreported_corrupt())
        extra = {"skipped_invalid": len(stats.skipped), "skipped_reasons": stats.skipped}
    else:
        try:
            lines = input_path.read_text(encoding="utf-8-sig").splitlines()
        except UnicodeDecodeError:
            raise click.ClickException(str(not_utf8_error(input_path))) from None
        blank = sum(1 for line in lines if is_blank(line))
        segments = [Segment(lang, text=line) if fmt == "text" else Segment(lang, tokens=line.split())
                    for line in lines if not is_blank(line)]
        parser = build_parser(parser_name, parser_model_dir, download, parser_device, parser_batch_size)
        try:
            report = parse_segments(segments, parser, cache, workers=workers or default_workers(),
                                    progress=not quiet)
        except (ParserUnavailable, ValueError) as err:
            raise click.ClickException(str(err)) from None
        records = [s.record for s in segments]
        extra = {"blank_lines_skipped": blank}
    report.seconds = time.perf_counter() - start
    write_jsonl(records, output)
    result = {**report.as_dict(), **extra, "out": str(output), "cache_dir": str(cache.directory)}
    if as_json:
        click.echo(json.dumps(result))
        return
    click.echo(f"segments:        {report.segments}")
    click.echo(f"unique segments: {report.unique} ({report.duplicates} repeats parsed once)")
    click.echo(f"cache hits:      {report.cache_hits}")
    click.echo(f"parsed:          {report.parsed}")
    click.echo(f"parse time:      {report.seconds:.2f}s")
    if report.corrupt_cache_entries:
        click.echo(f"corrupt cache entries skipped (parsed again): {report.corrupt_cache_entries}")
    for key, value in extra.items():
        if key != "skipped_reasons":
            click.echo(f"{key.replace('_', ' ')}: {value}")
    for reason in extra.get("skipped_reasons", []):
        click.echo(f"  skipped: {reason}")
    click.echo(f"records -> {output}")


@main.command(name="parser-quality")
@click.option("--parser", "parser_name", type=ParserChoice(), default="stanza", show_default=True,
              help=f"The parser to score: {PARSER_HELP}.")
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
@stanza_options
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write {lang: {uas, las, words_f1, ...}} here as JSON.")
@click.option("--probe-metrics", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="A probe_metrics.json of `xsyn pretrain-gat`: its UUAS is printed (and plotted) beside "
                   "each language's UAS and LAS.")
@click.option("--plot-output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write a PNG chart of UAS and LAS per language (with --probe-metrics: and probe UUAS).")
def parser_quality_command(parser_name: str, treebanks: str, treebank_dir: Path, split: str | None,
                           parser_input: str, limit: int | None, parser_model_dir: str | None, download: str,
                           parser_device: str | None, parser_batch_size: int, output: Path | None,
                           probe_metrics: Path | None, plot_output: Path | None) -> None:
    """UAS and LAS of a parser against gold UD treebanks: how good the parses are that feed the model."""
    from xsyn.syntax.conllu import ConlluError, read_conllu
    from xsyn.syntax.parsers import ParserUnavailable
    from xsyn.syntax.treebanks import TreebankError, locate
    from xsyn.utils.io import atomic_write_bytes, atomic_write_text, ensure_dir

    if output is not None:
        ensure_dir(output.parent, option="--output")  # before parsing: a folder that cannot be made is named now
    if plot_output is not None:
        ensure_dir(plot_output.parent, option="--plot-output")
    probes = read_probe_metrics(probe_metrics) if probe_metrics is not None else {}
    parser = build_parser(parser_name, parser_model_dir, download, parser_device, parser_batch_size)
    results = {}
    for spec in [s.strip() for s in treebanks.split(",") if s.strip()]:
        try:
            found = locate(spec, treebank_dir)
            chosen = _TREEBANK_SPLITS.get(split, split) or found.evaluation_split()
            path = found.path(chosen)
        except TreebankError as err:
            raise click.ClickException(str(err)) from err
        lang = found.treebank.lang
        try:
            gold = list(read_conllu(path, lang=lang))[:limit]
        except ConlluError as err:
            raise click.ClickException(str(err)) from None
        if not gold:
            raise click.ClickException(f"{path}: no sentences to score (the file has no CoNLL-U sentences); "
                                       "pass a treebank file with at least one sentence")
        try:
            if parser_input == "text":
                parsed = parser.parse_texts([g.text for g in gold], lang)
            else:
                parsed = parser.parse_tokens([g.words for g in gold], lang)
                gold = [as_tokens(g) for g in gold]
        except (ParserUnavailable, ValueError) as err:
            raise click.ClickException(str(err)) from None
        scores = attachment_scores(parsed, gold)
        results[lang] = {"treebank": found.treebank.name, "split": chosen, **scores.as_dict()}
        probe = f"  probe UUAS {probes[lang]['uuas']:.3f}" if "uuas" in probes.get(lang, {}) else ""
        click.echo(f"{lang:>3} {found.treebank.name:<24} {chosen:<5} UAS {scores.uas:.3f}  "
                   f"LAS {scores.las:.3f}  words F1 {scores.words_f1:.3f}{probe}  ({scores.sentences} sentences, "
                   f"{scores.mismatched_sentences} tokenised differently)")
        for line in scores.mismatches:
            click.echo(f"      {line}")
    if output is not None:
        atomic_write_text(output, json.dumps(results, indent=2, ensure_ascii=False) + "\n", option="--output")
        click.echo(f"scores -> {output}")
    if plot_output is not None:
        from xsyn.utils.plots import language_bars_png

        series = {name: {lang: r[name.lower()] for lang, r in results.items()} for name in ("UAS", "LAS")}
        if probes:
            series["probe UUAS"] = {lang: m["uuas"] for lang, m in probes.items() if "uuas" in m}
        kind, source = parse_parser_spec(parser_name)
        label = f"{kind}:{Path(source).name}" if source else kind
        title = f"{label} vs gold UD trees" + (" | probe UUAS" if probes else "")
        atomic_write_bytes(plot_output, language_bars_png(series, title=title, value_label="score", limits=(0, 1)),
                           option="--plot-output")
        click.echo(f"chart -> {plot_output}")


def read_probe_metrics(path: Path) -> dict[str, dict[str, float]]:
    """{lang: {uuas, dist_spearman, ...}} from a probe_metrics.json; a bad file is a usage error naming it."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise click.ClickException(f"{path}: not a JSON file ({err}); pass the probe_metrics.json that "
                                   "`xsyn pretrain-gat` wrote") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise click.ClickException(f"{path}: expected {{lang: {{uuas, dist_spearman, ...}}}} as written by "
                                   "`xsyn pretrain-gat`")
    bad = [f"{lang}.{key}" for lang, metrics in data.items() for key, value in metrics.items()
           if not isinstance(value, (int, float))]
    if bad:
        raise click.ClickException(f"{path}: {bad[0]} is not a number; expected probe_metrics.json of "
                                   "`xsyn pretrain-gat`")
    return data
