"""The files `xsyn parse` reads: lines of text or tokens to parse, and CoNLL-U trees to import as parses.

    segments, blank = read_segments(path, "text", "en")          # then parse_segments(segments, parser, cache)
    imported = import_conllu(path, "en", cache, import_as="conllu")
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from xsyn.syntax.cache import ParseCache, cache_key
from xsyn.syntax.conllu import ConlluError, ConlluStats, NotUtf8Error, not_utf8_error, read_conllu
from xsyn.syntax.parse import ParseReport
from xsyn.syntax.record import SyntaxRecord
from xsyn.syntax.segment import Segment, is_blank

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
