"""The canonical syntax record: one per text segment, O(n) in the number of words.

A record is what a parser (or a treebank, or a generator of gold trees) says about one segment
of text: its syntactic words, their heads, UPOS tags and base relations, and where each word sits
in the input. Everything else xsyn uses (wordpiece trees, distances, masks) is derived from it.
A segment may hold several sentences (a QA context): each sentence has its own root, and
`sentence_starts` says where each begins.

Where a word sits is either a character span in `text` (raw-text input) or the index of the
gold token it came from (`token_index`, for pre-tokenised tasks such as NER). The words of a
multiword token ("zum" -> "zu dem") share the surface token's span or index. A word may also
cover several gold tokens: a Chinese word over the characters of a character-level task ends at
`token_end` (exclusive; by default each word covers one token).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from xsyn.syntax.vocab import base_deprel
from xsyn.utils.errors import XsynError
from xsyn.utils.io import atomic_write_text


class TreeError(XsynError, ValueError):
    """A malformed tree or record. The message names where (file, line) when known."""


@dataclass
class SyntaxRecord:
    words: list[str]
    heads: list[int]
    upos: list[str]
    deprels: list[str]
    spans: list[tuple[int, int]] | None = None
    token_index: list[int] | None = None
    token_end: list[int] | None = None
    text: str | None = None
    lang: str = ""
    sentence_starts: list[int] = field(default_factory=lambda: [0])
    sent_id: str | None = None

    def __post_init__(self) -> None:
        self.deprels = [base_deprel(rel) for rel in self.deprels]

    def __len__(self) -> int:
        return len(self.words)

    @classmethod
    def from_words(
        cls,
        words: Sequence[str],
        heads: Sequence[int],
        upos: Sequence[str],
        deprels: Sequence[str],
        lang: str = "",
        sent_id: str | None = None,
    ) -> SyntaxRecord:
        """A gold tree handed in by a caller: the text is the words joined by single spaces."""
        spans, pos = [], 0
        for word in words:
            spans.append((pos, pos + len(word)))
            pos += len(word) + 1
        record = cls(list(words), list(heads), list(upos), list(deprels), spans=spans,
                     text=" ".join(words), lang=lang, sent_id=sent_id)
        record.validate()
        return record

    @classmethod
    def concatenate(cls, records: Sequence[SyntaxRecord], text: str | None = None) -> SyntaxRecord:
        """Join sentence records into one multi-sentence segment (each keeps its own root).

        With `text`, the records' spans must already be offsets into `text`; otherwise the
        sentences' texts are joined with single spaces and spans shifted accordingly.
        """
        if not records:
            raise TreeError("cannot concatenate zero sentence records into a segment")
        pretokenized = records[0].token_index is not None
        words, heads, upos, deprels, starts = [], [], [], [], []
        spans: list[tuple[int, int]] = []
        token_index: list[int] = []
        token_end: list[int] = []
        pieces, char_offset, token_offset = [], 0, 0
        for rec in records:
            offset = len(words)
            starts.extend(offset + s for s in rec.sentence_starts)
            words += rec.words
            upos += rec.upos
            deprels += rec.deprels
            heads += [h + offset if h else 0 for h in rec.heads]
            if pretokenized:
                units = rec.units() or []
                token_index += [t + token_offset for t, _ in units]
                token_end += [e + token_offset for _, e in units]
                token_offset += (len(rec.text.split(" ")) if rec.text is not None
                                 else max((e for _, e in units), default=0))
            else:
                shift = 0 if text is not None else char_offset
                spans += [(s + shift, e + shift) for s, e in rec.spans or []]
                if text is None:
                    pieces.append(rec.text or " ".join(rec.words))
                    char_offset += len(pieces[-1]) + 1
        if text is not None:
            joined = text
        elif pretokenized:  # the gold tokens, joined by spaces, where every sentence kept them
            joined = " ".join(r.text for r in records) if all(r.text is not None for r in records) else None
        else:
            joined = " ".join(pieces)
        multi_token = any(rec.token_end is not None for rec in records)
        return cls(words, heads, upos, deprels, spans=None if pretokenized else spans,
                   token_index=token_index if pretokenized else None,
                   token_end=token_end if pretokenized and multi_token else None, text=joined,
                   lang=records[0].lang, sentence_starts=starts)

    def on_word_tokens(self) -> SyntaxRecord:
        """This tree addressed by word index, its words taken as gold tokens (word i is token i): a
        treebank's tree as the gold tree of a segment of its words, or as the reference for a parse of
        them given pre-tokenised."""
        return type(self)(self.words, self.heads, self.upos, self.deprels, token_index=list(range(len(self.words))),
                          text=" ".join(self.words), lang=self.lang, sentence_starts=list(self.sentence_starts),
                          sent_id=self.sent_id)

    # -- validation -------------------------------------------------------------------------------

    def validate(self) -> None:
        """Raise `TreeError` unless every sentence is a single-rooted tree over its own words."""
        n = len(self.words)
        if n == 0:
            raise TreeError("empty sentence: a segment needs at least one word")
        for name in ("heads", "upos", "deprels"):
            if len(getattr(self, name)) != n:
                raise TreeError(f"{name} has {len(getattr(self, name))} entries for {n} words")
        if self.spans is not None and len(self.spans) != n:
            raise TreeError(f"spans has {len(self.spans)} entries for {n} words")
        if self.token_index is not None and len(self.token_index) != n:
            raise TreeError(f"token_index has {len(self.token_index)} entries for {n} words")
        if self.token_end is not None:
            if self.token_index is None or len(self.token_end) != n:
                raise TreeError(f"token_end has {len(self.token_end)} entries for {n} words and needs a "
                                "token_index of the same length")
            empty = next((i for i, (t, e) in enumerate(zip(self.token_index, self.token_end)) if e <= t), None)
            if empty is not None:
                raise TreeError(f"word {empty + 1} ({self.words[empty]!r}) covers no gold token: token_end "
                                f"{self.token_end[empty]} is not after token_index {self.token_index[empty]}")
        bounds = list(self.sentence_starts) + [n]
        for start, end in zip(bounds, bounds[1:]):
            if end <= start:
                raise TreeError(f"sentence starting at word {start + 1} has no words")
            validate_heads(self.heads[start:end], offset=start)

    def units(self) -> list[tuple[int, int]] | None:
        """Where each word sits: its gold tokens [start, end) in a pre-tokenised record, else its
        character span in `text` (None when the record has neither)."""
        if self.token_index is not None:
            ends = self.token_end or [t + 1 for t in self.token_index]
            return list(zip(self.token_index, ends))
        return list(self.spans) if self.spans is not None else None

    # -- JSON Lines -------------------------------------------------------------------------------

    def to_dict(self) -> dict:
        out = {"words": self.words, "heads": self.heads, "upos": self.upos, "deprels": self.deprels}
        if self.spans is not None:
            out["spans"] = [list(s) for s in self.spans]
        if self.token_index is not None:
            out["token_index"] = self.token_index
        if self.token_end is not None:
            out["token_end"] = self.token_end
        if self.text is not None:
            out["text"] = self.text
        if self.lang:
            out["lang"] = self.lang
        if self.sentence_starts != [0]:
            out["sentence_starts"] = self.sentence_starts
        if self.sent_id is not None:
            out["sent_id"] = self.sent_id
        return out

    @classmethod
    def from_dict(cls, data: dict) -> SyntaxRecord:
        spans = data.get("spans")
        return cls(
            words=list(data["words"]), heads=[int(h) for h in data["heads"]],
            upos=list(data["upos"]), deprels=list(data["deprels"]),
            spans=[(int(s), int(e)) for s, e in spans] if spans is not None else None,
            token_index=data.get("token_index"), token_end=data.get("token_end"), text=data.get("text"),
            lang=data.get("lang", ""),
            sentence_starts=list(data.get("sentence_starts", [0])), sent_id=data.get("sent_id"),
        )


def validate_heads(heads: Sequence[int], offset: int = 0) -> None:
    """Check one sentence's heads (1-based within the whole segment, 0 = root) form a tree.

    `offset` is the index of the sentence's first word in its segment, so heads are expected in
    `[offset + 1, offset + len(heads)]`. Errors name the word (1-based, as in CoNLL-U).
    """
    n = len(heads)
    roots = [offset + i + 1 for i, h in enumerate(heads) if h == 0]
    if len(roots) != 1:
        what = "no root" if not roots else f"{len(roots)} roots (words {', '.join(map(str, roots))})"
        raise TreeError(f"sentence has {what}; exactly one word must have head 0")
    for i, h in enumerate(heads):
        if h != 0 and not offset < h <= offset + n:
            raise TreeError(
                f"word {offset + i + 1} has head {h}, outside the sentence's words "
                f"{offset + 1}..{offset + n}")
        if h == offset + i + 1:
            raise TreeError(f"word {offset + i + 1} is its own head")
    state = [0] * n  # 0 unvisited, 1 on the current path, 2 known to reach the root
    for start in range(n):
        path, node = [], start
        while node >= 0 and state[node] == 0:
            state[node] = 1
            path.append(node)
            node = heads[node] - offset - 1
        if node >= 0 and state[node] == 1:
            cycle = path[path.index(node):]
            raise TreeError(
                "cycle among words " + " -> ".join(str(offset + w + 1) for w in cycle + [node]))
        for w in path:
            state[w] = 2


def write_jsonl(records: Iterable[SyntaxRecord], path: str | Path, *, option: str = "--output") -> int:
    """Write records atomically (a temp file renamed into place). Returns how many were written.
    `option` is the flag that chooses `path`, named when the write fails."""
    lines = [json.dumps(r.to_dict(), ensure_ascii=False) for r in records]
    atomic_write_text(path, "".join(line + "\n" for line in lines), option=option)
    return len(lines)


def read_jsonl(path: str | Path) -> Iterator[SyntaxRecord]:
    path = Path(path)
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield SyntaxRecord.from_dict(json.loads(line))
            except (ValueError, KeyError, TypeError) as err:
                raise TreeError(f"{path}:{lineno}: not a syntax record ({err})") from err
