"""Attach syntax records to text segments: each distinct segment is parsed once, ever.

Segments are deduplicated by content (text or gold tokens, language, parser), looked up in the
parse cache, and only the misses are parsed, in batches per language. Under Accelerate every
rank parses its own share of the misses (`rank`, `world_size`), writes them to the shared cache,
and after the barrier reads the others' from it.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from xsyn.syntax.cache import ParseCache, cache_key
from xsyn.syntax.parsing.base import Parser
from xsyn.syntax.parsing.preparsed import ParsesNotFound
from xsyn.syntax.record import SyntaxRecord
from xsyn.syntax.segment import Segment


@dataclass
class ParseReport:
    segments: int = 0  # segments seen
    gold: int = 0  # segments that came with a gold tree
    unique: int = 0  # distinct segments among the rest
    cache_hits: int = 0  # distinct segments found in the cache
    parsed: int = 0  # distinct segments parsed by this process
    corrupt_cache_entries: int = 0  # unreadable cache entries met, each in one report (their segments parsed again)
    seconds: float = 0.0  # wall time of this call

    def as_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        text = (f"{self.segments} segments ({self.gold} with gold trees), {self.unique} unique, "
                f"{self.cache_hits} cache hits, {self.parsed} parsed in {self.seconds:.2f}s")
        if self.corrupt_cache_entries:
            text += f"; {self.corrupt_cache_entries} unreadable cache entries skipped"
        return text


def parse_segments(segments: Sequence[Segment], parser: Parser, cache: ParseCache | None = None,
                   rank: int = 0, world_size: int = 1, barrier: Callable[[], None] | None = None,
                   batch_size: int = 1024) -> ParseReport:
    """Fill `segment.record` for every segment that has none. Returns what it did.

    A segment whose data carries a tree keeps it where the parser serves the data's trees (`--parser gold`).
    A pre-parsed source (`parser.preparsed`, e.g. `conllu:PATH`) is keyed by each segment's sent_id
    too, and every process looks up all its segments itself (a lookup is cheap), so a segment without
    a parse stops every rank alike instead of leaving the others waiting at the barrier."""
    start = time.perf_counter()
    report = ParseReport(segments=len(segments))
    identity = parser.cache_identity()
    preparsed = parser.preparsed
    groups: dict[str, list[Segment]] = {}
    for seg in segments:
        if seg.record is None and parser.data_trees and seg.gold_tree is not None:
            seg.record = seg.gold_tree
        if seg.record is not None:
            report.gold += 1
            continue
        content = seg.text if seg.text is not None else list(seg.tokens or [])
        key = cache_key(content, seg.lang, parser.name, parser.version, identity,
                        sent_id=seg.sent_id if preparsed else None)
        groups.setdefault(key, []).append(seg)
    report.unique = len(groups)
    found: dict[str, SyntaxRecord] = {}
    if cache is not None:
        for key in groups:
            record = cache.get(key)
            if record is not None:
                found[key] = record
        report.cache_hits = len(found)
    missing = [k for k in groups if k not in found]
    shared = world_size > 1 and not preparsed  # the ranks divide the work and share it through the cache
    mine = [k for k in missing if not shared or _owner(k, world_size) == rank]
    parsed = _parse(parser, [groups[k][0] for k in mine], batch_size)
    found.update(zip(mine, parsed))
    report.parsed = len(parsed)
    if cache is not None and parsed and (shared or rank == 0):
        cache.put_many(zip(mine, parsed))
    if shared:
        if barrier is not None:
            barrier()
        if cache is not None:
            cache.refresh()
        others = [k for k in missing if k not in found]
        for key in others:
            record = cache.get(key) if cache is not None else None
            if record is not None:
                found[key] = record
        late = [k for k in others if k not in found]  # another rank failed to share it: parse here
        found.update(zip(late, _parse(parser, [groups[k][0] for k in late], batch_size)))
        report.parsed += len(late)
    for key, segs in groups.items():
        for seg in segs:
            seg.record = found[key]
    report.corrupt_cache_entries = cache.unreported_corrupt() if cache is not None else 0
    report.seconds = time.perf_counter() - start
    return report


def _owner(key: str, world_size: int) -> int:
    return zlib.crc32(key.encode("ascii")) % world_size


def _parse(parser: Parser, segments: list[Segment], batch_size: int) -> list[SyntaxRecord]:
    """Parse segments in batches of one language and one input kind, keeping their order.

    A pre-parsed source is given the segments' ids; the segments it has no parse for are gathered
    over all batches into one error."""
    out: list[SyntaxRecord | None] = [None] * len(segments)
    buckets: dict[tuple[str, bool], list[int]] = {}
    for i, seg in enumerate(segments):
        buckets.setdefault((seg.lang, seg.tokens is not None), []).append(i)
    preparsed = parser.preparsed
    not_found: list[ParsesNotFound] = []
    for (lang, pretokenized), idx in buckets.items():
        for lo in range(0, len(idx), batch_size):
            chunk = idx[lo:lo + batch_size]
            ids = {"sent_ids": [segments[i].sent_id for i in chunk]} if preparsed else {}
            try:
                if pretokenized:
                    records = parser.parse_tokens([segments[i].tokens for i in chunk], lang, **ids)
                else:
                    records = parser.parse_texts([segments[i].text for i in chunk], lang, **ids)
            except ParsesNotFound as err:
                not_found.append(err)
                continue
            for i, record in zip(chunk, records):
                record.validate()
                out[i] = record
    if not_found:
        raise ParsesNotFound.merge(not_found)
    return out  # type: ignore[return-value]
