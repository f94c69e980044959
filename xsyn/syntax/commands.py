"""`xsyn parse`, `xsyn bench syntax`, and the Stanza options every parsing command shares."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from xsyn.cli import bench, main


def stanza_options(command):
    """The Stanza settings every parsing command takes: model folder, download policy, device."""
    command = click.option("--device", default=None, help="Device for Stanza (cpu, cuda, cuda:1).")(command)
    command = click.option("--download", type=click.Choice(["none", "reuse", "download"]), default="reuse",
                           show_default=True, help="Stanza model download policy.")(command)
    return click.option("--parser-model-dir", type=click.Path(file_okay=False), default=None,
                        help="Folder of Stanza models (default: Stanza's own).")(command)


def parser_settings(parser_name: str, parser_model_dir: str | None, download: str, device: str | None
                    ) -> dict[str, str | None]:
    """`get_parser` keyword arguments from `stanza_options` (the chain control takes none)."""
    if parser_name == "chain":
        return {}
    return {"model_dir": parser_model_dir, "download": download, "device": device}


@main.command(name="parse")
@click.option("--input", "input_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              required=True, help="File to parse or convert.")
@click.option("--format", "fmt", type=click.Choice(["conllu", "text", "tokens"]), required=True,
              help="conllu: convert pre-parsed sentences; text: one raw segment per line; "
                   "tokens: one pre-tokenised segment per line, tokens separated by whitespace.")
@click.option("--lang", required=True, help="Language code of the input (e.g. en, de, zh).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Where to write the syntax records (JSON Lines).")
@click.option("--parser", "parser_name", type=click.Choice(["stanza", "chain"]), default="stanza",
              show_default=True, help="Parser for text/tokens input.")
@stanza_options
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Parse cache folder (default: $XSYN_CACHE/parses or ~/.cache/xsyn/parses).")
@click.option("--import-as", default="conllu", show_default=True,
              help="For --format conllu: the parser name under which the sentences enter the parse cache "
                   "(kept apart from the parses of stanza and chain; runs do not read them yet).")
@click.option("--skip-invalid", is_flag=True,
              help="Skip (and count) malformed sentences instead of stopping at the first one.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
def parse_command(input_path: Path, fmt: str, lang: str, out: Path, parser_name: str,
                  parser_model_dir: str | None, download: str, device: str | None, cache_dir: Path | None,
                  import_as: str, skip_invalid: bool, as_json: bool) -> None:
    """Parse (or convert) a file into syntax records and the parse cache, and report what it did."""
    from xsyn.data.example import Segment
    from xsyn.syntax.cache import ParseCache, cache_key
    from xsyn.syntax.conllu import ConlluError, ConlluStats, NotUtf8Error, not_utf8_error, read_conllu
    from xsyn.syntax.parse import ParseReport, parse_segments
    from xsyn.syntax.parsers import ParserUnavailable, get_parser
    from xsyn.syntax.record import write_jsonl

    cache = ParseCache(cache_dir)
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
        report = ParseReport(segments=len(records), unique=len(set(keys)),
                             cache_hits=len(set(keys)) - len(new), parsed=len(new))
        extra = {"skipped_invalid": len(stats.skipped), "skipped_reasons": stats.skipped}
    else:
        try:
            lines = input_path.read_text(encoding="utf-8-sig").splitlines()
        except UnicodeDecodeError:
            raise click.ClickException(str(not_utf8_error(input_path))) from None
        blank = sum(1 for line in lines if not line.strip())
        segments = [Segment(lang, text=line) if fmt == "text" else Segment(lang, tokens=line.split())
                    for line in lines if line.strip()]
        options = parser_settings(parser_name, parser_model_dir, download, device)
        try:
            report = parse_segments(segments, get_parser(parser_name, **options), cache)
        except ParserUnavailable as err:
            raise click.ClickException(str(err)) from None
        records = [s.record for s in segments]
        extra = {"blank_lines_skipped": blank}
    report.seconds = time.perf_counter() - start
    write_jsonl(records, out)
    result = {**report.as_dict(), **extra, "out": str(out), "cache_dir": str(cache.directory)}
    if as_json:
        click.echo(json.dumps(result))
        return
    click.echo(f"segments:        {report.segments}")
    click.echo(f"unique segments: {report.unique}")
    click.echo(f"cache hits:      {report.cache_hits}")
    click.echo(f"parsed:          {report.parsed}")
    click.echo(f"parse time:      {report.seconds:.2f}s")
    for key, value in extra.items():
        if key != "skipped_reasons":
            click.echo(f"{key.replace('_', ' ')}: {value}")
    for reason in extra.get("skipped_reasons", []):
        click.echo(f"  skipped: {reason}")
    click.echo(f"records -> {out}")


def _kernel_note(result: dict) -> str:
    if result["tree_kernel"] == "c":
        return f"C kernel; torch ops alone: {result['tensor_sentences_per_s_torch_ops']:,.0f}"
    return "torch ops: the C kernel was not built, see the README"


@bench.command(name="syntax")
@click.option("--conllu", "conllu_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              required=True, help="Treebank file to run on (the issue's figure: UD_English-EWT dev).")
@click.option("--tokenizer", required=True, help="A vocab.txt, a tokenizer folder or a hub name "
                                                 "(the issue's figure: mBERT's vocab.txt).")
@click.option("--batch-size", type=int, default=32, show_default=True)
@click.option("--repeats", type=int, default=5, show_default=True, help="Timed passes; the best counts.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def bench_syntax(conllu_path: Path, tokenizer: str, batch_size: int, repeats: int, as_json: bool) -> None:
    """Speed of the tree tensors and of the whole records -> padded batch path, and bytes per piece."""
    from xsyn.syntax.benchmark import run_syntax_bench

    result = run_syntax_bench(conllu_path, tokenizer, batch_size, repeats)
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
