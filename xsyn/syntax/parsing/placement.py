"""Placing parsed sentences on a segment: its own raw text (character spans) or its gold tokens.

Parsers whose sentences come from elsewhere (a CoNLL-U file, UDPipe's output) find the segment's
text in them by its characters other than whitespace, and place each word back on the segment.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from xsyn.syntax.record import SyntaxRecord, TreeError


def without_whitespace(text: str) -> str:
    return "".join(text.split())


def _visible_offsets(text: str) -> list[int]:
    """`offsets[i]` = how many non-whitespace characters precede position i of `text` (i = 0..len)."""
    offsets, count = [0], 0
    for char in text:
        count += not char.isspace()
        offsets.append(count)
    return offsets


@dataclass
class Sentence:
    """A parsed sentence keyed by its text without whitespace, for lookup and placement."""

    key: str  # the text without whitespace
    record: SyntaxRecord
    spans: list[tuple[int, int]]  # each word's span in `key`


def sentence_of(record: SyntaxRecord) -> Sentence:
    text = record.text or " ".join(record.words)
    offsets = _visible_offsets(text)
    spans = [(offsets[s], offsets[e]) for s, e in record.spans] if record.spans is not None else None
    if spans is None:  # a record without spans: its words in order, one after the other
        spans, at = [], 0
        for word in record.words:
            width = len(without_whitespace(word))
            spans.append((at, at + width))
            at += width
    return Sentence(without_whitespace(text), record, spans)


def place_sentences(sentences: Sequence[SyntaxRecord], target: str | Sequence[str], lang: str,
                    sent_id: str | None = None) -> SyntaxRecord:
    """One segment's record from the sentence records that parse it, placed on the segment's own
    raw text (`target` a string: character spans) or gold tokens (a list: token indices).

    The sentences' texts without whitespace must spell the target without whitespace.
    """
    parts = [sentence_of(record) for record in sentences]
    words, heads, upos, deprels, starts, spans = [], [], [], [], [], []
    at = 0
    for part in parts:
        base = len(words)
        starts.append(base)
        words += part.record.words
        heads += [h + base if h else 0 for h in part.record.heads]
        upos += part.record.upos
        deprels += part.record.deprels
        spans += [(s + at, e + at) for s, e in part.spans]
        at += len(part.key)
    joined = "".join(part.key for part in parts)
    pretokenized = not isinstance(target, str)
    text = " ".join(target) if pretokenized else target
    if without_whitespace(text) != joined:
        raise TreeError(f"the parse spells {joined[:60]!r}, not the segment {without_whitespace(text)[:60]!r}")
    if pretokenized:
        token_starts = list(_token_starts(target))
        index = [bisect.bisect_right(token_starts, s) - 1 for s, _ in spans]
        end = [max(bisect.bisect_left(token_starts, e), i + 1) for (_, e), i in zip(spans, index)]
        multi = any(e - i > 1 for i, e in zip(index, end))
        return SyntaxRecord(words, heads, upos, deprels, token_index=index, token_end=end if multi else None,
                            text=text, lang=lang, sentence_starts=starts, sent_id=sent_id)
    where = [i for i, char in enumerate(text) if not char.isspace()] + [len(text)]
    char_spans = [(where[s], where[e - 1] + 1) if e > s else (where[s], where[s]) for s, e in spans]
    return SyntaxRecord(words, heads, upos, deprels, spans=char_spans, text=text, lang=lang,
                        sentence_starts=starts, sent_id=sent_id)


def _token_starts(tokens: Sequence[str]) -> list[int]:
    """Where each gold token starts among the non-whitespace characters of the tokens joined."""
    starts, at = [], 0
    for token in tokens:
        starts.append(at)
        at += len(without_whitespace(token))
    return starts


def source_checksum(files: Sequence[Path], root: Path) -> str:
    """sha256 over every file's path (relative to the source) and bytes: any change re-parses."""
    digest = hashlib.sha256()
    for file in files:
        name = file.name if file == root else str(file.relative_to(root))
        digest.update(name.encode("utf-8") + b"\0")
        with file.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        digest.update(b"\0")
    return digest.hexdigest()
