"""NLPTEA CGED's formats: `cged_sgml` (`<DOC><TEXT>..<ERROR ..>` files) and `cged_truth` (the test
release: `(sid=ID)<TAB>text` input plus `ID, start, end, type` lines); character-level BIO over R/M/S/W."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

from xsyn.data.readers.base import DataFormatError, Reader, ReadRequest, Row, read_text

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
