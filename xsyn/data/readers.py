"""One reader per released file format. A card's `[[local]]` layout names its reader in `format`.

A reader turns files into rows: dicts keyed by role (`id`, a segment name, `tokens`, `tags`,
`label`, `question`, `context`, `answers`), each with `where` (file and line) for messages.
`xsyn.data.loading.build_example` turns rows into `Example`s and checks them against the card.

A row a reader cannot parse goes to `BadRows`: an error naming the file and line (default), or,
with `skip_bad_rows=True` (`--skip-bad-rows`), skipped and counted in the load report; test rows are
never skipped. Nothing is dropped silently.

| format        | files                                                                         |
|---------------|-------------------------------------------------------------------------------|
| `tsv`         | tab-separated rows, with a header or positional columns, optionally csv-quoted |
| `conll`       | one token per line with its tag, blank line between sentences                 |
| `squad_json`  | SQuAD v1.1 / 2.0 JSON (SQuAD, MLQA, XQuAD)                                    |
| `mtop`        | MTOP's 8-column TSV; BIO slot tags from character offsets                     |
| `cged_sgml`   | NLPTEA CGED `<DOC><TEXT>..<ERROR ..>` files; character-level BIO over R/M/S/W |
| `cged_truth`  | NLPTEA CGED test release: `(sid=ID)<TAB>text` input plus `ID, start, end, type`|
| `conllu`      | Universal Dependencies CoNLL-U: the syntactic words and their UPOS tags       |
| `race_json`   | RACE: a folder of `{middle,high}/*.txt` JSON files, one article and its questions |
| `synth`       | no files: xsyn's synthetic typology benchmark (`xsyn.data.synth.generate_split`)   |
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import re
import zipfile
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xsyn.data.errors import CardError
from xsyn.data.example import Example
from xsyn.utils import json_fields
from xsyn.utils.errors import XsynError
from xsyn.utils.registry import Registry


class DataFormatError(XsynError, ValueError):
    """A data file cannot be read. The message names the file (and line) and what to do."""


@dataclass
class Row:
    where: str
    values: dict[str, Any]
    number: int | None = None  # place among the file's data rows, unreadable ones included: its default id
    token_lines: Sequence[int] = ()  # token-per-line formats: the line of each token, in `file`
    file: str = ""

    def where_of(self, token: int | None) -> str:
        """Where a problem with one token (0-based; None: with the row) is: the token's own line where known."""
        if token is None or not 0 <= token < len(self.token_lines):
            return self.where
        sentence = self.where.removeprefix(f"{self.file}:")
        return f"{self.file}:{self.token_lines[token]} (token {token + 1} of the sentence at line {sentence})"


@dataclass
class BadRows:
    """Where unreadable rows go: raised (default) or, when skipping, kept with their reason. Test
    rows are always raised: a test set scored without some of its examples is another benchmark."""

    skip: bool = False
    test: bool = False
    skipped: list[str] = field(default_factory=list)

    def __call__(self, where: str, reason: str) -> None:
        if self.test:
            raise DataFormatError(f"{where}: {reason} (test rows are never skipped, so that scores stay comparable; "
                                  "fix the row)")
        if not self.skip:
            raise DataFormatError(f"{where}: {reason} (fix the row, or pass --skip-bad-rows to skip and count "
                                  "such rows in training and dev data)")
        self.skipped.append(f"{where}: {reason}")


@dataclass
class ReadRequest:
    """What a reader is asked to read: resolved files, language, split and the card's options."""

    files: list[Path]
    lang: str
    split: str  # the layout's own name for the split ("dev", "eval", ...)
    options: Mapping[str, Any]
    bad: BadRows
    notes: Counter = field(default_factory=Counter)  # format-specific counts for the load report
    labelled: bool = True  # False where the card says the split has no gold labels


class Reader(ABC):
    """Base class: `OPTIONS` maps each option a card may set to its type and default."""

    OPTIONS: dict[str, tuple[type | tuple[type, ...], Any]] = {}
    needs_files = True
    reads_folders = False  # a layout's path names a folder of files (RACE), not one file

    def check_options(self, options: Mapping[str, Any], where: str) -> None:
        for key, value in options.items():
            if key not in self.OPTIONS:
                raise CardError(f"{where}: format option {key!r} is unknown; options: "
                                f"{', '.join(sorted(self.OPTIONS)) or 'none'}")
            kind = self.OPTIONS[key][0]
            if not isinstance(value, kind):
                raise CardError(f"{where}: format option {key} = {value!r} has the wrong type")

    def option(self, request: ReadRequest, key: str) -> Any:
        return request.options.get(key, self.OPTIONS[key][1])

    @abstractmethod
    def read(self, request: ReadRequest) -> Iterator[Row | Example]:
        """Rows (or, for generated data, finished examples) of the request's files."""


# -- files ----------------------------------------------------------------------------------------


def _zip_split(path: Path) -> tuple[Path, str] | None:
    """`data/x.zip/member.txt` -> (`data/x.zip`, `member.txt`) when `data/x.zip` is a file."""
    parts = path.parts
    for i in range(1, len(parts)):
        head = Path(*parts[:i])
        if head.suffix == ".zip" and head.is_file():
            return head, "/".join(parts[i:])
    return None


def file_exists(path: Path) -> bool:
    """A plain file, or a member of a zip archive named in the path."""
    if path.is_file():
        return True
    inside = _zip_split(path)
    if inside is None:
        return False
    with zipfile.ZipFile(inside[0]) as archive:
        return inside[1] in archive.namelist()


def read_text(path: Path, notes: Counter, fallback: str = "") -> str:
    """A file's text (UTF-8, BOM dropped); `fallback` (e.g. latin-1) for files released in it."""
    inside = _zip_split(path) if not path.is_file() else None
    if inside is None:
        data = path.read_bytes()
    else:
        with zipfile.ZipFile(inside[0]) as archive:
            data = archive.read(inside[1])
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        if not fallback:
            raise DataFormatError(f"{path}:{line}: not UTF-8 ({err.reason} at byte {err.start}); convert "
                                  "the file to UTF-8 or set the layout's options.encoding_fallback") from err
        notes[f"files decoded as {fallback}"] += 1
        return data.decode(fallback)


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


# -- SQuAD JSON -----------------------------------------------------------------------------------


def _preview(value: Any) -> str:
    """A JSON value as a message shows it: its first 60 characters."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


class SquadJsonReader(Reader):
    """SQuAD v1.1 JSON: `data[].paragraphs[].{context, qas[].{id, question, answers[]}}`; SQuAD 2.0 adds
    `is_impossible` to a question (read as its `impossible` role)."""

    def read(self, request: ReadRequest) -> Iterator[Row]:
        for path in request.files:
            try:
                data = json.loads(read_text(path, request.notes))["data"]
            except (json.JSONDecodeError, KeyError, TypeError) as err:
                raise DataFormatError(f"{path}: not SQuAD JSON ({err}); expected {{'data': [articles]}}") from err
            if not isinstance(data, list):
                raise DataFormatError(f"{path}: not SQuAD JSON ('data' is a {type(data).__name__}); expected "
                                      "{'data': [articles]}")
            for a, article in enumerate(data):
                for p, paragraph in enumerate(self._items(article, "paragraphs", f"{path}: data[{a}]", request)):
                    for q, qa in enumerate(self._items(paragraph, "qas", f"{path}: data[{a}].paragraphs[{p}]",
                                                       request)):
                        where = f"{path}: data[{a}].paragraphs[{p}].qas[{q}]"
                        if not isinstance(qa, dict):
                            request.bad(where, f"expected a question object, got {_preview(qa)}")
                            continue
                        try:
                            values = self._question(qa, paragraph)
                        except ValueError as err:
                            request.bad(where, str(err))
                            continue
                        yield Row(where, values)

    @staticmethod
    def _question(qa: Mapping[str, Any], paragraph: Mapping[str, Any]) -> dict[str, Any]:
        """One question's values, each field of the JSON type SQuAD gives it (ids may be numbers)."""
        answers = []
        for i, answer in enumerate(json_fields.field(qa, "answers", list, [])):
            try:
                answers.append((json_fields.field(answer, "text", str),
                                json_fields.field(answer, "answer_start", int)))
            except ValueError as err:
                raise ValueError(f"answers[{i}]: {err}") from None
        uid = qa.get("id")
        if isinstance(uid, bool) or not isinstance(uid, (str, int)):
            raise ValueError(f"id: expected a string, got {json_fields.shown(uid)}" if "id" in qa else "no 'id' field")
        values = {"id": str(uid), "question": json_fields.field(qa, "question", str),
                  "context": json_fields.field(paragraph, "context", str), "answers": answers}
        if "is_impossible" in qa:  # SQuAD 2.0
            values["impossible"] = json_fields.field(qa, "is_impossible", bool)
        return values

    @staticmethod
    def _items(parent: Any, key: str, where: str, request: ReadRequest) -> list[Any]:
        """An article's paragraphs or a paragraph's questions; without that list the article or
        paragraph is one bad row (its questions cannot be read)."""
        items = parent.get(key) if isinstance(parent, dict) else None
        if not isinstance(items, list):
            request.bad(where, f"expected an object with a {key!r} list, got {_preview(parent)}")
            return []
        return items


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
                             f"{_preview(span)}; start and length count characters)") from None
        return offsets[0], offsets[0] + offsets[1]


# -- CGED -----------------------------------------------------------------------------------------

_DOC = re.compile(r"<DOC>(.*?)(</DOC>|(?=<DOC>)|\Z)", re.S)  # group 2 is empty for a <DOC> left open
_TEXT = re.compile(r'<TEXT id="([^"]*)">\s*?\n?(.*?)\n?</TEXT>', re.S)
_ERROR = re.compile(r'<ERROR start_off="(\d+)" end_off="(\d+)" type="([A-Z])"\s*>\s*</ERROR>')
CGED_TYPES = ("R", "M", "S", "W")


def errors_to_bio(text: str, errors: Sequence[tuple[int, int, str]], notes: Counter) -> list[str]:
    """Character-level BIO tags from NLPTEA errors (1-based, inclusive offsets).

    BIO holds one tag per character, so an error overlapping an earlier one keeps the earlier and
    is counted; an `M` (missing) error just past the last character marks the last character.
    """
    tags = ["O"] * len(text)
    for start, end, error_type in errors:
        if error_type not in CGED_TYPES or not 1 <= start <= end:
            raise ValueError(f"error {start}-{end} type {error_type!r} is malformed (types: {', '.join(CGED_TYPES)})")
        if end > len(text):
            if error_type == "M" and start == len(text) + 1:
                start = end = len(text)
                notes["CGED M errors after the last character, marked on it"] += 1
            else:
                raise ValueError(f"error {start}-{end} lies outside the {len(text)}-character text")
        if any(t != "O" for t in tags[start - 1:end]):
            notes["CGED errors overlapping an earlier error (kept out of BIO tags)"] += 1
            continue
        for i in range(start - 1, end):
            tags[i] = ("B-" if i == start - 1 else "I-") + error_type
    return tags


class CgedSgmlReader(Reader):
    """NLPTEA CGED training files: `<DOC><TEXT id=..>text</TEXT><CORRECTION>..</CORRECTION>
    <ERROR start_off end_off type/>..</DOC>`; tokens are the text's characters."""

    def read(self, request: ReadRequest) -> Iterator[Row]:
        for path in request.files:
            text = read_text(path, request.notes)
            line, counted = 1, 0
            for match in _DOC.finditer(text):
                line, counted = line + text.count("\n", counted, match.start()), match.start()
                where = f"{path}:{line}"
                body = match.group(1)
                if not match.group(2):
                    request.bad(where, "a <DOC> without </DOC> (a cut-off file, or a </DOC> missing before the "
                                       "next <DOC>)")
                    continue
                doc = _TEXT.search(body)
                if doc is None:
                    request.bad(where, "a <DOC> without <TEXT id=...>")
                    continue
                errors = [(int(s), int(e), t) for s, e, t in _ERROR.findall(body)]
                if len(errors) != body.count("<ERROR"):
                    request.bad(where, "an <ERROR> element without start_off, end_off and type")
                    continue
                try:
                    tags = errors_to_bio(doc.group(2), errors, request.notes)
                except ValueError as err:
                    request.bad(where, str(err))
                    continue
                yield Row(where, {"id": doc.group(1), "tokens": list(doc.group(2)), "tags": tags,
                                  "errors": errors})


class CgedTruthReader(Reader):
    """NLPTEA CGED test release: an input file (`(sid=ID)<TAB>text` per line) and its truth file
    (`ID, start, end, TYPE` per error, or `ID, correct`); `path` lists input then truth."""

    _INPUT = re.compile(r"^\(sid=([^)]*)\)\s*(.*)$")

    def read(self, request: ReadRequest) -> Iterator[Row]:
        if len(request.files) % 2:
            raise DataFormatError(f"format cged_truth reads input/truth file pairs; got {len(request.files)} files")
        for input_path, truth_path in zip(request.files[::2], request.files[1::2]):
            truth = self._truth(truth_path, request)
            seen: set[str] = set()
            for lineno, line in enumerate(read_text(input_path, request.notes).splitlines(), 1):
                if not line.strip():
                    continue
                where = f"{input_path}:{lineno}"
                match = self._INPUT.match(line)
                if match is None:
                    request.bad(where, "expected (sid=ID) followed by the text")
                    continue
                sid, text = match.groups()
                seen.add(sid)
                if sid not in truth:
                    request.bad(where, f"sentence {sid} has no line in {truth_path}")
                    continue
                errors = [error for _, error in truth[sid] if error is not None]
                correct = [n for n, error in truth[sid] if error is None]
                if correct and errors:
                    error_lines = [str(n) for n, error in truth[sid] if error is not None]
                    request.bad(where, f"sentence {sid} is marked correct ({truth_path}:{correct[0]}) and has errors "
                                       f"(line{'s' * (len(error_lines) > 1)} {', '.join(error_lines)}); keep one "
                                       "or the other")
                    continue
                try:
                    tags = errors_to_bio(text, errors, request.notes)
                except ValueError as err:
                    request.bad(where, str(err))
                    continue
                yield Row(where, {"id": sid, "tokens": list(text), "tags": tags, "errors": errors})
            for sid, lines in truth.items():
                if sid not in seen:
                    request.bad(f"{truth_path}:{lines[0][0]}", f"sentence {sid} is not in {input_path}; are the "
                                                              "input and truth files a pair?")

    @staticmethod
    def _truth(path: Path, request: ReadRequest) -> dict[str, list[tuple[int, tuple[int, int, str] | None]]]:
        """Each sentence's truth lines: (line number, error), or (line number, None) for `ID, correct`."""
        truth: dict[str, list[tuple[int, tuple[int, int, str] | None]]] = {}
        for lineno, line in enumerate(read_text(path, request.notes).splitlines(), 1):
            fields = [f.strip() for f in line.split(",")]
            if fields == [""]:
                continue
            if len(fields) == 2 and fields[1] == "correct":
                truth.setdefault(fields[0], []).append((lineno, None))
            elif len(fields) == 4 and fields[1].isdigit() and fields[2].isdigit():
                truth.setdefault(fields[0], []).append((lineno, (int(fields[1]), int(fields[2]), fields[3])))
            else:
                raise DataFormatError(f"{path}:{lineno}: expected 'ID, start, end, TYPE' or 'ID, correct'")
        return truth


# -- CoNLL-U ---------------------------------------------------------------------------------------


class ConlluReader(Reader):
    """UD treebanks: one row per sentence, its syntactic words (multiword-token ranges and empty nodes
    left out, as XTREME's UD-POS preprocessing does) with their UPOS tags; the id is `# sent_id`. The
    sentence's tree goes along as the row's `tree` (served by `--parser gold`, ignored by the others)."""

    def read(self, request: ReadRequest) -> Iterator[Row]:
        from xsyn.syntax.conllu import ConlluStats, conllu_sentences

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


# -- RACE ------------------------------------------------------------------------------------------


class RaceJsonReader(Reader):
    """RACE (Lai et al. 2017): each path is a split's folder; under it every `middle/*.txt` and `high/*.txt`
    is one JSON article `{"article", "questions": [...], "options": [[4 options], ...], "answers": ["A", ...],
    "id"}`. A row per question, its id `SUBSET/FILE#QUESTION` (so RACE-M and RACE-H can be scored apart)."""

    reads_folders = True

    def read(self, request: ReadRequest) -> Iterator[Row]:
        for folder in request.files:
            files = sorted(p for p in Path(folder).rglob("*.txt") if p.is_file())
            if not files:
                raise DataFormatError(f"{folder}: no RACE .txt files under this folder (expected middle/*.txt and "
                                      "high/*.txt)")
            for path in files:
                yield from self._questions(path, Path(folder), request)

    @staticmethod
    def _questions(path: Path, folder: Path, request: ReadRequest) -> Iterator[Row]:
        try:
            article = json.loads(read_text(path, request.notes))
        except json.JSONDecodeError as err:
            request.bad(str(path), f"not RACE JSON ({err})")
            return
        try:
            fields = {key: json_fields.field(article, key, kind) for key, kind in
                      (("article", str), ("questions", list), ("options", list), ("answers", list))}
        except ValueError as err:
            request.bad(str(path), f"{err} (a RACE file holds article, questions, options and answers)")
            return
        name = path.relative_to(folder).as_posix()
        for q, question in enumerate(fields["questions"]):
            where = f"{path}: questions[{q}]"
            options = fields["options"][q] if q < len(fields["options"]) else None
            answer = fields["answers"][q] if q < len(fields["answers"]) else None
            if not isinstance(options, list) or not options:
                request.bad(where, f"no options[{q}] (each question needs its list of options)")
                continue
            if not isinstance(answer, str):
                request.bad(where, f"no answers[{q}]" if answer is None else
                            f"answers[{q}]: expected a string (A, B, ...), got {json_fields.shown(answer)}")
                continue
            yield Row(where, {"id": f"{name}#{q}", "article": fields["article"], "question": question,
                              "options": options, "label": answer})


# -- synthetic ------------------------------------------------------------------------------------


class SynthReader(Reader):
    """xsyn's synthetic typology benchmark: examples (with gold trees) made by `xsyn.data.synth`."""

    OPTIONS = {"sizes": (dict, {}), "seed": (int, 0)}
    needs_files = False

    def read(self, request: ReadRequest) -> Iterator[Example]:
        from xsyn.data.synth import generate_split

        sizes = self.option(request, "sizes")
        if request.split not in sizes:
            raise DataFormatError(f"the synth layout states no size for split {request.split!r}; "
                                  f"add it to options.sizes")
        yield from generate_split(request.lang, request.split, int(sizes[request.split]),
                                  self.option(request, "seed"))


READERS: Registry[Reader] = Registry("data format", {
    "tsv": TsvReader(), "conll": ConllReader(), "squad_json": SquadJsonReader(), "mtop": MtopReader(),
    "cged_sgml": CgedSgmlReader(), "cged_truth": CgedTruthReader(), "conllu": ConlluReader(),
    "race_json": RaceJsonReader(),
    "synth": SynthReader(),
}, of=Reader)
