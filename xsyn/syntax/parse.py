"""Attach syntax records to text segments: each distinct segment is parsed once, ever.

Segments are deduplicated by content (text or gold tokens, language, parser) before anything is
dispatched (XNLI and PAWS-X repeat sentences across pairs; the repeats are counted), looked up in
the parse cache, and only the misses are parsed, in chunks of one language. `workers` processes
parse the chunks side by side; each builds the parser once from a copy sent over multiprocessing's
pipe (a parser that holds a model loads it once per worker, at its first chunk) and nothing is
written to disk but the cache. Each chunk is appended to the cache as soon as it is back, so a run
killed at any moment re-parses at most the chunks that were in flight. Under Accelerate every rank
parses its own share of the misses (`rank`, `world_size`), writes them to the shared cache, and
after the barrier reads the others' from it.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass

from xsyn.syntax.cache import ParseCache, cache_key
from xsyn.syntax.parsing.base import Parser, ParsesNotFound
from xsyn.syntax.record import SyntaxRecord
from xsyn.syntax.segment import Segment
from xsyn.utils.errors import XsynError
from xsyn.utils.progress import Progress


@dataclass
class ParseReport:
    segments: int = 0  # segments seen
    gold: int = 0  # segments that came with a gold tree
    attached: int = 0  # segments that already held a parse (pair evaluation's segments, parsed per language)
    unique: int = 0  # distinct segments among the rest
    duplicates: int = 0  # segments that repeat an earlier one (parsed once, for the first)
    cache_hits: int = 0  # distinct segments found in the cache
    parsed: int = 0  # distinct segments parsed by this process
    corrupt_cache_entries: int = 0  # unreadable cache entries met, each in one report (their segments parsed again)
    seconds: float = 0.0  # wall time of this call
    parse_seconds: float = 0.0  # of which parsing the misses (cache writes included)

    def as_dict(self) -> dict:
        return asdict(self)

    def __add__(self, other: ParseReport) -> ParseReport:
        """Two reports of one call's parts (each language's parser: `parse_by_language`) as one."""
        return ParseReport(**{name: value + getattr(other, name) for name, value in asdict(self).items()})

    def __str__(self) -> str:
        held = ", ".join(part for n, part in ((self.gold, f"{self.gold} with gold trees"),
                                              (self.attached, f"{self.attached} parsed before")) if n)
        text = (f"{self.segments} segments{f' ({held})' if held else ''}, {self.unique} unique "
                f"({self.duplicates} repeats), {self.cache_hits} cache hits, {self.parsed} parsed in "
                f"{self.seconds:.2f}s")
        if self.parsed:
            text += f" ({self.parsed / max(self.parse_seconds, 1e-9):.0f} sentences/s)"
        if self.corrupt_cache_entries:
            text += f"; {self.corrupt_cache_entries} unreadable cache entries skipped"
        return text


NO_PARSE_ENV = "XSYN_NO_PARSE"  # set (to 1) in a process that must find every parse in the cache (offline cells)
_parsed_here = 0  # segments this process has parsed (`segments_parsed`)


class ParsingNotAllowed(XsynError):
    """A segment is not in the parse cache, and this process may not parse (`NO_PARSE_ENV`)."""


def segments_parsed() -> int:
    """How many segments this process has parsed so far (cache hits and gold trees not counted)."""
    return _parsed_here


def _refuse_parsing(todo: dict[str, Segment], parser: Parser, cache: ParseCache | None) -> None:
    if todo and os.environ.get(NO_PARSE_ENV) == "1" and not parser.preparsed:
        langs = sorted({seg.lang for seg in todo.values()})
        where = cache.directory if cache is not None else "no parse cache"
        raise ParsingNotAllowed(f"{len(todo)} segments ({', '.join(langs)}) are not in the parse cache ({where}), and "
                                f"this process may not parse ({NO_PARSE_ENV}=1: an offline cell); run `xsyn "
                                "experiment prepare` with the cells' options first")


def default_workers() -> int:
    """The cores this process may run on (`--workers`' default)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def parse_segments(segments: Sequence[Segment], parser: Parser, cache: ParseCache | None = None,
                   rank: int = 0, world_size: int = 1, barrier: Callable[[], None] | None = None,
                   batch_size: int = 1024, workers: int = 1, progress: bool = False) -> ParseReport:
    """Fill `segment.record` for every segment that has none. Returns what it did.

    `workers` processes parse (fewer where there are fewer chunks; one for a pre-parsed source or a
    parser that says it runs alone, `max_workers`); `progress` shows sentences/s and an ETA.
    A segment whose data carries a tree keeps it where the parser serves the data's trees (`--parser gold`).
    A pre-parsed source (`parser.preparsed`, e.g. `conllu:PATH`) is keyed by each segment's sent_id
    too, and every process looks up all its segments itself (a lookup is cheap), so a segment without
    a parse stops every rank alike instead of leaving the others waiting at the barrier."""
    start = time.perf_counter()
    report = ParseReport(segments=len(segments))
    groups = _group(segments, parser, report)
    found = _cached(groups, cache, report)
    missing = [k for k in groups if k not in found]
    shared = world_size > 1 and not parser.preparsed  # the ranks divide the work and share it through the cache
    mine = [k for k in missing if not shared or _owner(k, world_size) == rank]
    writes = cache if cache is not None and (shared or rank == 0) else None
    if parser.preparsed or parser.max_workers == 1:
        workers = 1
    parse_start = time.perf_counter()
    _parse(parser, {k: groups[k][0] for k in mine}, found, writes, batch_size, workers, progress)
    report.parsed = len(mine)
    if shared:
        if barrier is not None:
            barrier()
        others = [k for k in missing if k not in found]
        if cache is not None:
            cache.refresh()
            found.update(_cached({k: groups[k] for k in others}, cache))
        late = [k for k in others if k not in found]  # another rank failed to share it: parse here
        _parse(parser, {k: groups[k][0] for k in late}, found, None, batch_size, 1, False)
        report.parsed += len(late)
    report.parse_seconds = time.perf_counter() - parse_start
    for key, segs in groups.items():
        for seg in segs:
            seg.record = found[key]
    report.corrupt_cache_entries = cache.unreported_corrupt() if cache is not None else 0
    report.seconds = time.perf_counter() - start
    return report


def parse_by_language(segments: Sequence[Segment], parser_of: Callable[[str], Parser], cache: ParseCache | None = None,
                      **options) -> ParseReport:
    """`parse_segments` with each language's own parser (`parser_of(lang)`, e.g. a `LanguageParsers`): the
    segments of the languages one parser parses go to it together, and are cached keyed by it; one report for all.
    (Every rank forms the same groups in the same order, so the ranks meet at each group's barrier together.)"""
    start = time.perf_counter()
    groups: dict[int, tuple[Parser, list[Segment]]] = {}
    for seg in segments:
        parser = parser_of(seg.lang)
        groups.setdefault(id(parser), (parser, []))[1].append(seg)
    report = ParseReport()
    for parser, group in groups.values():
        report += parse_segments(group, parser, cache, **options)
    report.seconds = time.perf_counter() - start
    return report


def _group(segments: Sequence[Segment], parser: Parser, report: ParseReport) -> dict[str, list[Segment]]:
    """The segments still to parse, grouped by cache key (one parse each); a segment whose data's tree the
    parser serves (`--parser gold`) counts as gold, one that holds a parse already as parsed before."""
    identity = parser.cache_identity()
    groups: dict[str, list[Segment]] = {}
    for seg in segments:
        if seg.record is None and parser.data_trees and seg.gold_tree is not None:
            seg.record = seg.gold_tree
        if seg.record is not None:
            if seg.record is seg.gold_tree:
                report.gold += 1
            else:  # parsed before, by whatever parser the run uses (chain, stanza, ...): not a gold tree
                report.attached += 1
            continue
        content = seg.text if seg.text is not None else list(seg.tokens or [])
        key = cache_key(content, seg.lang, parser.name, parser.version, identity,
                        sent_id=seg.sent_id if parser.preparsed else None)
        groups.setdefault(key, []).append(seg)
    report.unique = len(groups)
    report.duplicates = report.segments - report.gold - report.attached - report.unique
    return groups


def _cached(groups: dict[str, list[Segment]], cache: ParseCache | None, report: ParseReport | None = None
            ) -> dict[str, SyntaxRecord]:
    """The records the cache holds for these keys (with `report`: counted as its cache hits)."""
    found: dict[str, SyntaxRecord] = {}
    if cache is not None:
        for key in groups:
            record = cache.get(key)
            if record is not None:
                found[key] = record
        if report is not None:
            report.cache_hits = len(found)
    return found


def _owner(key: str, world_size: int) -> int:
    return zlib.crc32(key.encode("ascii")) % world_size


# A chunk: the cache keys of segments of one language and one input kind, and what the parser reads.
Chunk = tuple[list[str], str, bool, list, list[str | None] | None]  # keys, lang, pretokenized, inputs, sent ids

CHUNKS_PER_WORKER = 8  # at least, where there is work enough: a slow chunk then leaves no worker idle long
MIN_CHUNK = 64  # segments: below this, dispatching costs more than it spreads


def _chunks(todo: dict[str, Segment], batch_size: int, workers: int, preparsed: bool) -> list[Chunk]:
    """The segments to parse, by (language, input kind), cut into chunks of at most `batch_size`."""
    size = max(MIN_CHUNK, min(batch_size, math.ceil(len(todo) / (workers * CHUNKS_PER_WORKER))))
    buckets: dict[tuple[str, bool], list[str]] = {}
    for key, seg in todo.items():
        buckets.setdefault((seg.lang, seg.tokens is not None), []).append(key)
    chunks = []
    for (lang, pretokenized), keys in buckets.items():
        for lo in range(0, len(keys), size):
            part = keys[lo:lo + size]
            segs = [todo[k] for k in part]
            inputs = [s.tokens if pretokenized else s.text for s in segs]
            chunks.append((part, lang, pretokenized, inputs, [s.sent_id for s in segs] if preparsed else None))
    return chunks


def _parse(parser: Parser, todo: dict[str, Segment], found: dict[str, SyntaxRecord], cache: ParseCache | None,
           batch_size: int, workers: int, progress: bool) -> None:
    """Parse `todo` (cache key -> segment) into `found`, appending each chunk to `cache` as it comes
    back. A pre-parsed source's segments without a parse
    are gathered over all chunks into one error."""
    global _parsed_here
    _refuse_parsing(todo, parser, cache)
    preparsed = parser.preparsed
    chunks = _chunks(todo, batch_size, workers, preparsed)
    workers = max(1, min(workers, len(chunks)))
    bar = Progress(len(todo), "parsing", "sentences", enabled=progress)
    not_found: list[ParsesNotFound] = []
    try:
        for keys, records in _run_chunks(parser, chunks, workers):
            if isinstance(records, ParsesNotFound):
                not_found.append(records)
                continue
            found.update(zip(keys, records))
            _parsed_here += 0 if preparsed else len(keys)
            if cache is not None:
                cache.put_many(zip(keys, records))
            bar.update(len(keys))
    finally:
        bar.close()
        if cache is not None:
            cache.sync()
    if not_found:
        raise ParsesNotFound.merge(not_found)


def _run_chunks(parser: Parser, chunks: list[Chunk], workers: int
                ) -> Iterator[tuple[list[str], list[SyntaxRecord] | ParsesNotFound]]:
    """Each chunk's keys and records, in this process or, with `workers` > 1, from a pool in the
    order they finish. The pool's processes are spawned, not forked: a fork would copy a parent's
    threads' locks (torch, tokenizers) mid-use and a CUDA context that cannot be shared."""
    if workers == 1:
        for chunk in chunks:
            yield chunk[0], _parse_chunk(parser, chunk)
        return
    context = multiprocessing.get_context("spawn")
    with context.Pool(workers, initializer=_start_worker, initargs=(parser,)) as pool:
        yield from pool.imap_unordered(_worker_chunk, chunks)


_WORKER_PARSER: Parser | None = None  # the parser of this worker process
WATCH_SECONDS = 0.5  # how often a worker checks that its parent still runs


def _start_worker(parser: Parser) -> None:
    global _WORKER_PARSER
    _WORKER_PARSER = parser
    threading.Thread(target=_end_with_parent, args=(os.getppid(),), daemon=True).start()


def _end_with_parent(parent: int) -> None:
    """End this worker once the process that started it is gone (killed with -9, it cannot end its
    pool): a worker blocked on the task queue would otherwise wait forever, holding its model."""
    while os.getppid() == parent:
        time.sleep(WATCH_SECONDS)
    os._exit(1)


def _worker_chunk(chunk: Chunk) -> tuple[list[str], list[SyntaxRecord] | ParsesNotFound]:
    assert _WORKER_PARSER is not None
    return chunk[0], _parse_chunk(_WORKER_PARSER, chunk)


def _parse_chunk(parser: Parser, chunk: Chunk) -> list[SyntaxRecord] | ParsesNotFound:
    """One chunk's records, validated; a pre-parsed source's missing parses are returned, not raised,
    so that every chunk's are gathered into one error."""
    _, lang, pretokenized, inputs, sent_ids = chunk
    ids = {"sent_ids": sent_ids} if sent_ids is not None else {}
    try:
        records = (parser.parse_tokens(inputs, lang, **ids) if pretokenized else
                   parser.parse_texts(inputs, lang, **ids))
    except ParsesNotFound as err:
        return err
    for record in records:
        record.validate()
    return records
