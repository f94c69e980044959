"""The files `xsyn parse` reads: lines of text or tokens to parse, and CoNLL-U trees to import as parses.

    segments, blank = read_segments(path, "text", "en")          # then parse_segments(segments, parser, cache)
    imported = import_conllu(path, "en", cache, import_as="conllu")
    parsed = parse_file("in.txt", "text", "en", "out.jsonl", build_parser("stanza"), cache_dir=None)  # both

`parse_file` is what `xsyn parse` does, callable from Python.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from xsyn.syntax.cache import ParseCache, cache_key
from xsyn.syntax.conllu import ConlluError, ConlluStats, NotUtf8Error, not_utf8_error, read_conllu
from xsyn.syntax.parse import ParseReport, default_workers, parse_segments
from xsyn.syntax.parsing.base import require_languages
from xsyn.syntax.record import SyntaxRecord, write_jsonl
from xsyn.syntax.segment import Segment, is_blank
from xsyn.utils.io import check_writable

LINE_FORMATS = ("text", "tokens")  # one raw segment per line; one pre-tokenised segment per line


def read_segments(path: Path, fmt: str, lang: str) -> tuple[list[Segment], int]:
    """The segments of a file of one segment per line (`fmt` text or tokens), and how many blank
    lines were skipped (a blank line has nothing to parse)."""
    if fmt not in LINE_FORMATS:
        raise ValueError(f"format {fmt!r}: one of {LINE_FORMATS}")
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except UnicodeDecodeError:
        raise not_utf8_error(path) from None
    segments = [Segment(lang, text=line) if fmt == "text" else Segment(lang, tokens=line.split())
                for line in lines if not is_blank(line)]
    return segments, len(lines) - len(segments)


@dataclass
class ConlluImport:
    records: list[SyntaxRecord]
    report: ParseReport  # `parsed`: sentences newly written to the cache; `cache_hits`: already there
    skipped: list[str] = field(default_factory=list)  # malformed sentences skipped (skip_invalid), with why


class InvalidSentence(ConlluError):
    """A malformed sentence met while importing without `skip_invalid`."""


def import_conllu(path: Path, lang: str, cache: ParseCache, import_as: str = "conllu",
                  skip_invalid: bool = False) -> ConlluImport:
    """Enter a CoNLL-U file's trees into the parse cache as parser `import_as`'s parses of their texts.

    The name keeps them apart from the parses of the parsers. Malformed sentences stop the import,
    or with `skip_invalid` are skipped and listed."""
    start = time.perf_counter()
    stats = ConlluStats()
    try:
        records = list(read_conllu(path, lang=lang, skip_invalid=skip_invalid, stats=stats))
    except NotUtf8Error:
        raise
    except ConlluError as err:
        raise InvalidSentence(f"{err} (use --skip-invalid to skip and count bad sentences)") from None
    keys = [cache_key(r.text, lang, import_as, "", {}) for r in records]
    new = {k: r for k, r in zip(keys, records) if k not in cache}
    cache.put_many(new.items())
    cache.sync()
    report = ParseReport(segments=len(records), unique=len(set(keys)), duplicates=len(keys) - len(set(keys)),
                         cache_hits=len(set(keys)) - len(new),
                         parsed=len(new), corrupt_cache_entries=cache.unreported_corrupt(),
                         seconds=time.perf_counter() - start)
    return ConlluImport(records, report, stats.skipped)


@dataclass
class ParsedFile:
    """What `parse_file` did: the parse report, what the format adds to it (skipped sentences or blank lines),
    and where the records and the parses went."""

    report: ParseReport
    extra: dict
    output: Path
    cache_dir: Path | None

    def as_dict(self) -> dict:
        return {**self.report.as_dict(), **self.extra, "out": str(self.output), "cache_dir": str(self.cache_dir)}

    def text(self) -> str:
        """What `xsyn parse` prints: the segments, repeats, cache hits and parses, the parse time and rate, what was
        skipped and why, and where the records went."""
        report = self.report
        lines = [f"segments:        {report.segments}",
                 f"unique segments: {report.unique} ({report.duplicates} repeats parsed once)",
                 f"cache hits:      {report.cache_hits}",
                 f"parsed:          {report.parsed}",
                 f"parse time:      {report.seconds:.2f}s"
                 + (f" ({report.parsed / report.parse_seconds:,.0f} sentences/s parsed)"
                    if report.parsed and report.parse_seconds else "")]
        if report.corrupt_cache_entries:
            lines.append(f"corrupt cache entries skipped (parsed again): {report.corrupt_cache_entries}")
        lines += [f"{key.replace('_', ' ')}: {value}" for key, value in self.extra.items() if key != "skipped_reasons"]
        lines += [f"  skipped: {reason}" for reason in self.extra.get("skipped_reasons", [])]
        return "\n".join([*lines, f"records -> {self.output}"])


def parse_file(input_path: str | Path, fmt: str, lang: str, output: str | Path, parser=None,
               cache_dir: str | Path | None = None, import_as: str = "conllu", skip_invalid: bool = False,
               workers: int | None = None, progress: bool = False) -> ParsedFile:
    """Parse a file of lines (`fmt` text or tokens, with `parser`) or import a CoNLL-U file (`fmt` conllu)
    into syntax records at `output` (JSON Lines) and the parse cache under `cache_dir` (`parses/`;
    default: xsyn's cache). The folders are checked writable before any parsing."""
    output = Path(output)
    check_writable(output.parent, "--output")  # before parsing: a folder that cannot be written is named now
    if cache_dir is not None:
        check_writable(cache_dir, "--cache-dir")
    cache = ParseCache(Path(cache_dir) / "parses" if cache_dir is not None else None)
    if fmt == "conllu":
        imported = import_conllu(Path(input_path), lang, cache, import_as=import_as, skip_invalid=skip_invalid)
        records, report = imported.records, imported.report
        extra: dict = {"skipped_invalid": len(imported.skipped), "skipped_reasons": imported.skipped}
    else:
        require_languages(parser, [lang])  # before reading: a language the parser has no models for is named now
        segments, blank = read_segments(Path(input_path), fmt, lang)
        report = parse_segments(segments, parser, cache, workers=workers or default_workers(), progress=progress)
        records, extra = [s.record for s in segments], {"blank_lines_skipped": blank}
    write_jsonl(records, output)
    return ParsedFile(report, extra, output, cache.directory)
