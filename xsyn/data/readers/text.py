"""Line-based text formats: `tsv` (tab-separated rows), `conll` (a token and its tag a line), `mtop`
(MTOP's 8-column TSV) and `conllu` (Universal Dependencies)."""

from __future__ import annotations

import csv
import io
import itertools
import json
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from xsyn.data.errors import CardError
from xsyn.data.readers.base import DataFormatError, Reader, ReadRequest, Row, preview, read_text
from xsyn.syntax.conllu import ConlluStats, conllu_sentences
from xsyn.utils import json_fields

# -- tsv ------------------------------------------------------------------------------------------


class TsvReader(Reader):
    """Tab-separated rows. `columns` maps roles to header names (`header = true`) or 0-based indices.

    `quoting = "csv"` reads csv-quoted fields (XTREME's and pandas' exports); `"none"` keeps quotes
    as text (the original releases). `filter` keeps rows whose column equals a pattern (XNLI-1.0's
    `language` column). A row has the header's number of fields (without a header: up to the last
    column the layout names); a row with more that are not blank is a bad row, as its text would
    otherwise be lost (a tab inside a field, or a shifted column). `token_columns` are roles split on
    whitespace (mATIS++'s utterance, slots).
    """

    OPTIONS = {
        "header": (bool, True), "quoting": (str, "none"), "columns": (dict, {}), "filter": (dict, {}),
        "token_columns": (list, []), "encoding_fallback": (str, ""),
    }
    OPTIONAL_ROLES = ("id",)

    def check_options(self, options: Mapping[str, Any], where: str) -> None:
        super().check_options(options, where)
        if not options.get("columns"):
            raise CardError(f"{where}: format 'tsv' needs options.columns (role -> column)")
        if options.get("quoting", "none") not in ("none", "csv"):
            raise CardError(f"{where}: options.quoting must be 'none' or 'csv'")
        header = options.get("header", True)
        for role, col in options["columns"].items():
            if header and not isinstance(col, str):
                raise CardError(f"{where}: options.columns {role} = {col!r}: with header = true columns are "
                                "header names (strings); set header = false to pick columns by index")
            if not header and (isinstance(col, bool) or not isinstance(col, int) or col < 0):
                raise CardError(f"{where}: options.columns {role} = {col!r}: with header = false columns are "
                                f"0-based indices ({role} = 0, 1, ...); set header = true to name header columns")
        if options.get("filter") and not header:
            raise CardError(f"{where}: options.filter names header columns, but header = false; set header = "
                            "true or drop the filter")
        unknown = [role for role in options.get("token_columns", []) if role not in options["columns"]]
        if unknown:
            raise CardError(f"{where}: options.token_columns {', '.join(map(str, unknown))} not in options.columns "
                            f"({', '.join(options['columns'])})")

    def read(self, request: ReadRequest) -> Iterator[Row]:
        quoting = csv.QUOTE_MINIMAL if self.option(request, "quoting") == "csv" else csv.QUOTE_NONE
        columns: Mapping[str, str | int] = self.option(request, "columns")
        split_roles = set(self.option(request, "token_columns"))
        number = -1  # data rows so far, bad ones included: a skipped row shifts no later row's id
        for path in request.files:
            text = read_text(path, request.notes, self.option(request, "encoding_fallback"))
            index: dict[str, int | None] = {}
            filters: dict[int, str] = {}
            width = 0  # fields a row has: the header's, else up to the last column named
            if not self.option(request, "header"):
                index = {role: int(col) for role, col in columns.items()}
                width = max(index.values()) + 1
            for start, fields in self._rows(text, quoting, path, request):
                if fields is None:  # unreadable, already reported
                    number += bool(index)
                    continue
                if not any(f.strip() for f in fields):
                    continue
                if self.option(request, "header") and not index:
                    index, width = self._header(fields, columns, path, request), len(fields)
                    filters = {self._column(fields, col, path): pattern.format(lang=request.lang)
                               for col, pattern in self.option(request, "filter").items()}
                    continue
                if any(fields[c] != value for c, value in filters.items() if c < len(fields)):
                    continue
                number += 1
                needed = max((c for c in index.values() if c is not None), default=0)
                if len(fields) <= needed:
                    request.bad(f"{path}:{start}", f"row has {len(fields)} tab-separated fields; the layout "
                                                   f"needs at least {needed + 1}")
                    continue
                extra = [f.strip() for f in fields[width:] if f.strip()]
                if extra:
                    request.bad(f"{path}:{start}", f"row has {len(fields)} tab-separated fields, but the "
                                f"{'header has' if self.option(request, 'header') else 'layout reads'} {width}; "
                                f"the extra text {extra[0][:40]!r} would be lost (a tab inside a field, or a "
                                "shifted column?)")
                    continue
                values = {role: None if c is None else fields[c] for role, c in index.items()}
                for role in split_roles & set(values):
                    values[role] = values[role].split()
                yield Row(f"{path}:{start}", values, number)

    @staticmethod
    def _rows(text: str, quoting: int, path: Path, request: ReadRequest
              ) -> Iterator[tuple[int, list[str] | None]]:
        """(first line, fields) of each row. A row is one line: a quote left open would swallow the
        lines after it into one field, so that row is bad (fields None) and reading goes on at its next line."""
        lines = io.StringIO(text, newline="").readlines()
        first = 0  # 0-based index of the line the reader starts at
        while first < len(lines):
            reader = csv.reader(itertools.islice(lines, first, None), delimiter="\t", quoting=quoting)
            end = first
            for fields in reader:
                start, end = end + 1, first + reader.line_num
                if end > start:
                    request.bad(f"{path}:{start}", f"unclosed quote starting at line {start} (the field runs over "
                                                   f"lines {start}-{end}); close it on its line, or set "
                                                   'options.quoting = "none" to read quotes as text')
                    yield start, None
                    first = start
                    break
                yield start, fields
            else:
                return

    def _header(self, header: list[str], columns: Mapping[str, str | int], path: Path,
                request: ReadRequest) -> dict[str, int | None]:
        index: dict[str, int | None] = {}
        for role, name in columns.items():
            if name in header:
                index[role] = header.index(name)
            elif role in self.OPTIONAL_ROLES or (role == "label" and not request.labelled):
                index[role] = None
            else:
                raise DataFormatError(f"{path}:1: the header has no column {name!r} (for {role}); its columns "
                                      f"are: {', '.join(header)}")
        return index

    @staticmethod
    def _column(header: list[str], name: str, path: Path) -> int:
        if name not in header:
            raise DataFormatError(f"{path}:1: the header has no column {name!r} to filter on")
        return header.index(name)


# -- conll ----------------------------------------------------------------------------------------


def iob1_to_iob2(tags: Sequence[str]) -> tuple[list[str], int]:
    """CoNLL-2003's IOB1 (I- opens a chunk unless it follows one of the same type) -> IOB2.

    Returns the converted tags and how many were changed.
    """
    out, changed, previous = [], 0, "O"
    for tag in tags:
        if tag.startswith("I-") and (previous == "O" or previous[2:] != tag[2:]):
            tag, changed = "B-" + tag[2:], changed + 1
        out.append(tag)
        previous = tag
    return out, changed


class ConllReader(Reader):
    """Token-per-line files: PAN-X/WikiANN (`token<TAB>tag`, or `lang:token` in the original release),
    MSRA NER (one character per line), CoNLL-2002/2003 (`token ... tag`, `-DOCSTART-` lines)."""

    OPTIONS = {
        "separator": (str, ""), "token_column": (int, 0), "tag_column": (int, -1), "docstart": (bool, False),
        "token_prefix": (str, ""), "tag_scheme": (str, "iob2"), "encoding_fallback": (str, ""),
    }

    def read(self, request: ReadRequest) -> Iterator[Row]:
        sep = self.option(request, "separator") or None
        prefix = self.option(request, "token_prefix").format(lang=request.lang)
        for path in request.files:
            text = read_text(path, request.notes, self.option(request, "encoding_fallback"))
            block: list[tuple[int, str]] = []
            width: list[tuple[int, int]] = []  # (fields, line) of the file's first token line
            for lineno, line in enumerate(text.splitlines(), 1):
                if self.option(request, "docstart") and line.startswith("-DOCSTART-"):
                    line = ""
                if line.strip():
                    block.append((lineno, line))
                    continue
                if block:
                    yield from self._sentence(block, path, sep, prefix, request, width)
                    block = []
            if block:
                yield from self._sentence(block, path, sep, prefix, request, width)

    def _sentence(self, block: list[tuple[int, str]], path: Path, sep: str | None, prefix: str,
                  request: ReadRequest, width: list[tuple[int, int]]) -> Iterator[Row]:
        """One sentence; every line must have as many fields as the file's first (a token with a
        space or tab in it would otherwise lose its second half silently)."""
        tokens, tags = [], []
        tok_col, tag_col = self.option(request, "token_column"), self.option(request, "tag_column")
        for lineno, line in block:
            fields = line.split(sep)
            problem = ""
            if len(fields) < 2:
                problem = f"expected a token and a tag, got {line!r}"
            elif not (-len(fields) <= min(tok_col, tag_col) and max(tok_col, tag_col) < len(fields)):
                problem = (f"{len(fields)} fields, but the card reads token column {tok_col} and tag column "
                           f"{tag_col}")
            elif width and len(fields) != width[0][0]:
                problem = f"{len(fields)} fields, but line {width[0][1]} has {width[0][0]}: {line!r}"
            if problem:
                request.bad(f"{path}:{lineno}", f"{problem}; the whole sentence starting at line {block[0][0]} "
                                                "is unreadable")
                return
            if not width:
                width.append((len(fields), lineno))
            token = fields[tok_col]
            if prefix:
                if token.startswith(prefix):
                    token = token[len(prefix):]
                else:
                    request.notes[f"tokens without the {prefix!r} prefix"] += 1
            tokens.append(token)
            tags.append(fields[tag_col])
        if self.option(request, "tag_scheme") == "iob1":
            tags, changed = iob1_to_iob2(tags)
            request.notes["IOB1 tags rewritten as IOB2 B- tags"] += changed
        yield Row(f"{path}:{block[0][0]}", {"tokens": tokens, "tags": tags},
                  token_lines=[lineno for lineno, _ in block], file=str(path))


# -- MTOP -----------------------------------------------------------------------------------------


def spans_to_bio(token_spans: Sequence[tuple[int, int]], labelled: Sequence[tuple[int, int, str]]
                 ) -> tuple[list[str], int]:
    """BIO tags for tokens from labelled character spans [start, end).

    A token belongs to a span when they overlap. Returns the tags and how many span boundaries fall
    inside a token. Raises ValueError for a span that covers no token or overlaps another span.
    """
    tags = ["O"] * len(token_spans)
    inside = 0
    for start, end, name in labelled:
        covered = [i for i, (s, e) in enumerate(token_spans) if s < end and start < e]
        if not covered:
            raise ValueError(f"span {start}:{end} ({name}) covers no token")
        if any(tags[i] != "O" for i in covered):
            raise ValueError(f"span {start}:{end} ({name}) overlaps another span")
        inside += (token_spans[covered[0]][0] != start) + (token_spans[covered[-1]][1] != end)
        for n, i in enumerate(covered):
            tags[i] = ("B-" if n == 0 else "I-") + name
    return tags, inside


class MtopReader(Reader):
    """MTOP `{lang}/{train,eval,test}.txt`: 8 tab-separated columns (id, intent, slots as
    `start:end:SL:NAME` character offsets joined by commas, utterance, domain, locale, decoupled
    form, tokens JSON `{"tokens": [...], "tokenSpans": [{"start", "length"}]}`)."""

    def read(self, request: ReadRequest) -> Iterator[Row]:
        for path in request.files:
            for lineno, line in enumerate(read_text(path, request.notes).splitlines(), 1):
                if not line.strip():
                    continue
                where = f"{path}:{lineno}"
                try:
                    yield Row(where, self._parse(line, request.notes))
                except ValueError as err:
                    request.bad(where, str(err))

    @staticmethod
    def _parse(line: str, notes: Counter) -> dict[str, Any]:
        fields = line.split("\t")
        if len(fields) != 8:
            raise ValueError(f"expected 8 tab-separated columns, got {len(fields)}")
        uid, intent, slot_string, utterance = fields[:4]
        try:
            token_json = json.loads(fields[7])
            tokens = list(token_json["tokens"])
            spans = [MtopReader._span(span, i) for i, span in enumerate(token_json["tokenSpans"])]
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise ValueError(f"column 8 is not the tokens JSON ({err!r})") from err
        if len(spans) != len(tokens):
            raise ValueError(f"{len(tokens)} tokens but {len(spans)} tokenSpans")
        for i, (token, (s, e)) in enumerate(zip(tokens, spans)):
            if utterance[s:e] != token:
                raise ValueError(f"token {i} {token!r} is not at characters {s}:{e} of the utterance "
                                 f"({utterance[s:e]!r} is)")
        slots = []
        for item in filter(None, slot_string.split(",")):
            parts = item.split(":", 3)
            if len(parts) != 4 or parts[2] != "SL" or not (parts[0].isdigit() and parts[1].isdigit()):
                raise ValueError(f"slot {item!r} is not start:end:SL:NAME")
            slots.append((int(parts[0]), int(parts[1]), parts[3]))
        tags, inside = spans_to_bio(spans, sorted(slots))
        notes["slot boundaries inside a token (the token joins the slot)"] += inside
        return {"id": uid, "label": intent, "tokens": tokens, "tags": tags}

    @staticmethod
    def _span(span: Any, i: int) -> tuple[int, int]:
        """tokenSpans[i] of the tokens JSON as character offsets [start, end)."""
        try:
            offsets = [json_fields.field(span, key, int) for key in ("start", "length")]
        except ValueError as err:
            raise ValueError(f"column 8 (tokens JSON): tokenSpans[{i}]: {err} (tokenSpans[{i}] = "
                             f"{preview(span)}; start and length count characters)") from None
        return offsets[0], offsets[0] + offsets[1]


# -- CoNLL-U ---------------------------------------------------------------------------------------


class ConlluReader(Reader):
    """UD treebanks: one row per sentence, its syntactic words (multiword-token ranges and empty nodes
    left out, as XTREME's UD-POS preprocessing does) with their UPOS tags; the id is `# sent_id`. The
    sentence's tree goes along as the row's `tree` (served by `--parser gold`, ignored by the others)."""

    def read(self, request: ReadRequest) -> Iterator[Row]:
        for path in request.files:
            stats = ConlluStats()
            text = read_text(path, request.notes)
            for record, lines in conllu_sentences(text, source=str(path), lang=request.lang, skip_invalid=True,
                                                  stats=stats):
                named = f", sentence {record.sent_id}" if record.sent_id is not None else ""
                yield Row(f"{path}:{lines[0]}{named}", {"id": record.sent_id, "tokens": list(record.words),
                                                       "tags": list(record.upos), "tree": record.on_word_tokens()},
                          token_lines=lines[1:], file=str(path))
            for problem in stats.skipped:  # each names its file and line
                where, _, reason = problem.partition(": ")
                request.bad(where, reason)
