"""CoNLL-U in and out: UD treebanks and pre-parsed corpora <-> syntax records.

Reads comments (`# sent_id`, `# text`), multiword-token ranges (their words inherit the surface
token's character span) and empty nodes (skipped: they belong to enhanced dependencies, not to the
basic tree). Every problem is reported as `file:line: problem`. By default a bad sentence stops
the read; with `skip_invalid=True` it is skipped and counted in `ConlluStats`, never silently.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from xsyn.syntax.record import SyntaxRecord, TreeError, validate_heads
from xsyn.utils.io import atomic_write_text


class ConlluError(TreeError):
    pass


class NotUtf8Error(ConlluError):
    """The whole file is unreadable (not UTF-8), not one sentence: skipping sentences cannot help."""


@dataclass
class ConlluStats:
    """What a read saw: sentences kept, and the skipped ones with the reason for each."""

    sentences: int = 0
    skipped: list[str] = field(default_factory=list)
    text_rebuilt: int = 0  # sentences whose `# text` did not contain their tokens in order


_LANG_FROM_NAME = re.compile(r"^([a-z]{2,3})_[a-z0-9]+-ud-")
_WORD_ID = re.compile(r"[0-9]+")  # ASCII digits only: str.isdigit() also takes '٢' and '²'
_HEAD = re.compile(r"-?[0-9]+")
_RANGE = re.compile(r"([0-9]+)-([0-9]+)")


def language_of(path: str | Path) -> str:
    """`en_ewt-ud-dev.conllu` -> `en` (the UD file-name convention); '' when it does not apply."""
    m = _LANG_FROM_NAME.match(Path(path).name)
    return m.group(1) if m else ""


def read_conllu(path: str | Path, lang: str | None = None, skip_invalid: bool = False,
                stats: ConlluStats | None = None) -> Iterator[SyntaxRecord]:
    """Yield one record per sentence of a CoNLL-U file (UTF-8, with or without a byte-order mark)."""
    path = Path(path)
    with path.open(encoding="utf-8-sig") as fh:
        try:
            yield from parse_conllu(fh, source=str(path), lang=language_of(path) if lang is None else lang,
                                    skip_invalid=skip_invalid, stats=stats)
        except UnicodeDecodeError:
            raise not_utf8_error(path) from None


def not_utf8_error(path: str | Path) -> NotUtf8Error:
    """The error for a file that does not decode as UTF-8, naming the line and byte offset of the
    first bad byte (a line-by-line scan: no UTF-8 sequence contains the newline byte)."""
    offset = 0
    with Path(path).open("rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as err:
                return NotUtf8Error(f"{path}:{lineno}: not UTF-8 text (byte {raw[err.start:err.start + 1]!r} at "
                                   f"byte offset {offset + err.start}); convert the file to UTF-8 "
                                   "(e.g. iconv -f latin1 -t utf-8)")
            offset += len(raw)
    return NotUtf8Error(f"{path}: not UTF-8 text; convert the file to UTF-8")


def parse_conllu(lines: Iterable[str] | str, source: str = "<string>", lang: str = "",
                 skip_invalid: bool = False, stats: ConlluStats | None = None) -> Iterator[SyntaxRecord]:
    for record, _ in conllu_sentences(lines, source, lang, skip_invalid, stats):
        yield record


def conllu_sentences(lines: Iterable[str] | str, source: str = "<string>", lang: str = "",
                     skip_invalid: bool = False, stats: ConlluStats | None = None
                     ) -> Iterator[tuple[SyntaxRecord, list[int]]]:
    """Each sentence's record with its lines: the block's first line, then the line of each word."""
    if isinstance(lines, str):
        lines = lines.splitlines()
    stats = stats if stats is not None else ConlluStats()
    block: list[tuple[int, str]] = []
    for lineno, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n")
        if line.strip():
            block.append((lineno, line))
            continue
        if block:
            sentence = _sentence(block, source, lang, skip_invalid, stats)
            if sentence is not None:
                yield sentence
            block = []
    if block:
        sentence = _sentence(block, source, lang, skip_invalid, stats)
        if sentence is not None:
            yield sentence


def _sentence(block: list[tuple[int, str]], source: str, lang: str, skip_invalid: bool,
              stats: ConlluStats) -> tuple[SyntaxRecord, list[int]] | None:
    try:
        sentence = _build(block, source, lang, stats)
    except ConlluError as err:
        if not skip_invalid:
            raise
        stats.skipped.append(str(err))
        return None
    stats.sentences += 1
    return sentence


def _build(block: list[tuple[int, str]], source: str, lang: str, stats: ConlluStats
           ) -> tuple[SyntaxRecord, list[int]]:
    first_line = block[0][0]
    sentence = _Sentence(mwt_line=first_line)
    for lineno, line in block:
        where = f"{source}:{lineno}"
        if line.startswith("#"):
            key, sep, value = line[1:].partition("=")
            if sep:
                sentence.comments[key.strip()] = value.strip()
            continue
        cols = line.split("\t")
        if len(cols) != 10:
            raise ConlluError(f"{where}: expected 10 tab-separated columns, found {len(cols)} "
                              "(CoNLL-U separates columns with single tabs)")
        if "." in cols[0]:  # empty node of the enhanced graph
            continue
        if "-" in cols[0]:
            sentence.multiword(cols, where, lineno)
        else:
            sentence.word(cols, where, lineno)
    sentence.check(source, first_line)
    text, spans = locate_tokens(sentence.comments.get("text"), sentence.surface, len(sentence.words))
    if text != sentence.comments.get("text"):
        stats.text_rebuilt += 1
    record = SyntaxRecord(sentence.words, sentence.heads, sentence.upos, sentence.deprels, spans=spans, text=text,
                          lang=lang, sent_id=sentence.comments.get("sent_id"))
    return record, [first_line, *sentence.word_lines]


@dataclass
class _Sentence:
    """One sentence's lines as `_build` reads them, each checked where it stands."""

    comments: dict[str, str] = field(default_factory=dict)
    words: list[str] = field(default_factory=list)
    heads: list[int] = field(default_factory=list)
    upos: list[str] = field(default_factory=list)
    deprels: list[str] = field(default_factory=list)
    word_lines: list[int] = field(default_factory=list)
    surface: list[tuple[str, int, int, str]] = field(default_factory=list)  # (form, first word, last word, misc)
    mwt_end: int = -1  # the last word of the latest multiword token (1-based), its line and its id
    mwt_line: int = 0
    mwt_id: str = ""

    def multiword(self, cols: list[str], where: str, lineno: int) -> None:
        wid = cols[0]
        m = _RANGE.fullmatch(wid)
        if not m or not 1 <= int(m.group(1)) < int(m.group(2)):
            raise ConlluError(f"{where}: bad multiword-token range {wid!r} (write FIRST-LAST, two or more "
                              "word ids from 1 up, e.g. 2-3)")
        start, end = int(m.group(1)), int(m.group(2))
        if start <= self.mwt_end:
            raise ConlluError(f"{where}: multiword token {wid} overlaps multiword token {self.mwt_id}")
        if start != len(self.words) + 1:
            raise ConlluError(f"{where}: multiword token {wid} must come right before word {start}; here it "
                              f"comes before word {len(self.words) + 1}")
        self.surface.append((cols[1], start - 1, end - 1, cols[9]))
        self.mwt_end, self.mwt_line, self.mwt_id = end, lineno, wid

    def word(self, cols: list[str], where: str, lineno: int) -> None:
        wid, head = cols[0], cols[6]
        if not _WORD_ID.fullmatch(wid) or int(wid) != len(self.words) + 1:
            raise ConlluError(f"{where}: word id {wid!r} out of sequence; expected {len(self.words) + 1}")
        if not _HEAD.fullmatch(head):
            raise ConlluError(f"{where}: head {head!r} of word {wid} is not an integer")
        self.words.append(cols[1])
        self.heads.append(int(head))
        self.upos.append(cols[3])
        self.deprels.append(cols[7])
        self.word_lines.append(lineno)
        if int(wid) > self.mwt_end:  # a word outside multiword tokens is its own surface token
            self.surface.append((cols[1], len(self.words) - 1, len(self.words) - 1, cols[9]))

    def check(self, source: str, first_line: int) -> None:
        """The sentence as a whole: it has words, its last multiword token fits, its heads make a tree."""
        if not self.words:
            raise ConlluError(f"{source}:{first_line}: empty sentence (comments but no word lines)")
        if self.mwt_end > len(self.words):
            raise ConlluError(f"{source}:{self.mwt_line}: multiword token {self.mwt_id} covers words "
                              f"{self.mwt_id.replace('-', '..')} but the sentence has {len(self.words)} words")
        try:
            validate_heads(self.heads)
        except TreeError as err:
            bad = _word_named(str(err))
            line = self.word_lines[bad - 1] if bad and bad <= len(self.word_lines) else first_line
            raise ConlluError(f"{source}:{line}: {err}") from None


def _word_named(message: str) -> int | None:
    m = re.search(r"word[s]? (\d+)", message)
    return int(m.group(1)) if m else None


def locate_tokens(text: str | None, surface: list[tuple[str, int, int, str]], n_words: int
                  ) -> tuple[str, list[tuple[int, int]]]:
    """Character span of every word, from its surface token `(form, first word, last word, misc)`.

    Tokens are found in order in `text`; when that fails (or there is no text) the text is
    rebuilt from the forms and `SpaceAfter=No`. Words of one multiword token share its span.
    """
    if text is not None:
        spans = _find_in(text, surface, n_words)
        if spans is not None:
            return text, spans
    pieces, spans, pos = [], [(0, 0)] * n_words, 0
    for form, first, last, misc in surface:
        for w in range(first, last + 1):
            spans[w] = (pos, pos + len(form))
        pieces.append(form)
        pos += len(form)
        if "SpaceAfter=No" not in misc.split("|"):
            pieces.append(" ")
            pos += 1
    return "".join(pieces).rstrip(" "), spans


def _find_in(text: str, surface: list[tuple[str, int, int, str]], n_words: int
             ) -> list[tuple[int, int]] | None:
    spans, pos = [(0, 0)] * n_words, 0
    for form, first, last, _ in surface:
        at = text.find(form, pos)
        if at < 0 or text[pos:at].strip():
            return None
        for w in range(first, last + 1):
            spans[w] = (at, at + len(form))
        pos = at + len(form)
    return spans


def write_conllu(records: Iterable[SyntaxRecord], path: str | Path) -> int:
    """Write records as CoNLL-U (atomically), one block per sentence; returns the block count.

    Words sharing a span become a multiword token whose form is the surface text.
    """
    out: list[str] = []
    count = 0
    for rec in records:
        bounds = list(rec.sentence_starts) + [len(rec.words)]
        for k, (start, end) in enumerate(zip(bounds, bounds[1:])):
            count += 1
            if rec.sent_id is not None:
                out.append(f"# sent_id = {rec.sent_id}" + (f"-{k + 1}" if len(bounds) > 2 else ""))
            if rec.text is not None and rec.spans is not None:
                out.append(f"# text = {rec.text[rec.spans[start][0]:rec.spans[end - 1][1]]}")
            i = start
            while i < end:
                j = i
                while rec.spans is not None and j + 1 < end and rec.spans[j + 1] == rec.spans[i]:
                    j += 1
                if j > i and rec.text is not None:
                    s, e = rec.spans[i]
                    out.append(f"{i - start + 1}-{j - start + 1}\t{rec.text[s:e]}" + "\t_" * 8)
                for w in range(i, j + 1):
                    head = rec.heads[w] - start if rec.heads[w] else 0
                    out.append("\t".join([str(w - start + 1), rec.words[w], "_", rec.upos[w], "_", "_",
                                          str(head), rec.deprels[w], "_", "_"]))
                i = j + 1
            out.append("")
    atomic_write_text(path, "\n".join(out) + ("\n" if out else ""))
    return count
