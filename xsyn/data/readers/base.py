"""What every reader shares: the row, the request, bad-row accounting, the `Reader` base, and reading
a file (plain or inside a zip archive) whatever its encoding."""

from __future__ import annotations

import json
import zipfile
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xsyn.data.errors import CardError
from xsyn.data.example import Example
from xsyn.utils.errors import XsynError


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


def preview(value: Any) -> str:
    """A JSON value as a message shows it: its first 60 characters."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."
