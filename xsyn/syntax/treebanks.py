"""Which UD treebank serves each language, and where its split files are on this machine.

The registry (`treebanks/*.toml`, beside the package; `ud.toml` ships) lists, for the 17
languages of Ahmad et al. (2021), the treebank the paper's pipeline used and accepted alternates.
`locate` finds a treebank's CoNLL-U files under a folder that is either one treebank folder
(`UD_English-EWT/`) or a folder of treebank folders (a UD release, or `../shared/data/ud`).

>>> found = locate("en", "ud-treebanks-v2.5")
>>> found.files                      # {"train": Path(...en_ewt-ud-train.conllu), "dev": ..., "test": ...}
>>> found.evaluation_split()         # "dev" (or "test" for a test-only treebank)
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from xsyn.utils.errors import XsynError
from xsyn.utils.shipped import TREEBANKS, shipped_files

SPLITS = ("train", "dev", "test")


class TreebankError(XsynError, ValueError):
    """An unknown language or treebank, or a treebank folder without split files."""


@dataclass(frozen=True)
class Treebank:
    name: str  # UD_English-EWT
    code: str  # en_ewt, the prefix of its files
    lang: str  # en
    language: str  # English
    splits: tuple[str, ...]  # the splits the treebank releases
    licence: str
    note: str = ""
    paper: bool = False  # the treebank Ahmad et al.'s pipeline used for this language

    def file_name(self, split: str) -> str:
        return f"{self.code}-ud-{split}.conllu"


@dataclass(frozen=True)
class TreebankFiles:
    """A treebank found on disk: its folder and the split files present there."""

    treebank: Treebank
    directory: Path
    files: dict[str, Path]

    def evaluation_split(self, exclude: str | None = None) -> str:
        """dev if present, else test (test-only treebanks such as PUD), never `exclude`."""
        for split in ("dev", "test"):
            if split in self.files and split != exclude:
                return split
        raise TreebankError(f"{self.directory} has no dev or test file other than {exclude!r} to evaluate on "
                            f"(found: {', '.join(self.files) or 'none'})")

    def path(self, split: str) -> Path:
        if split not in self.files:
            raise TreebankError(
                f"{self.treebank.name} has no {split} split in {self.directory}: looked for "
                f"{self.treebank.file_name(split)}; found {', '.join(sorted(self.files)) or 'no split files'}"
            )
        return self.files[split]


@cache
def load_registry() -> dict[str, tuple[Treebank, ...]]:
    """Language code -> its treebanks, the paper's first, then the accepted alternates."""
    registry: dict[str, tuple[Treebank, ...]] = {}
    for path in shipped_files(TREEBANKS):
        registry.update(read_treebank_table(path, registry))
    return registry


def read_treebank_table(path: Path, known: dict[str, tuple[Treebank, ...]]) -> dict[str, tuple[Treebank, ...]]:
    """One treebank table file; a language that another file already defines is an error."""
    registry = {}
    for lang, entry in tomllib.loads(path.read_text("utf-8")).items():
        if lang in known:
            raise TreebankError(f"{TREEBANKS}/{path.name}: language {lang!r} is already defined by another "
                                f"file in {TREEBANKS}/; define each language once")
        registry[lang] = tuple(
            Treebank(name=tb["name"], code=tb["code"], lang=lang, language=entry["language"],
                     splits=tuple(tb["splits"]), licence=tb["licence"], note=tb.get("note", ""), paper=k == 0)
            for k, tb in enumerate(entry["treebanks"]))
    return registry


def languages() -> list[str]:
    return list(load_registry())


def resolve(spec: str) -> tuple[Treebank, ...]:
    """Candidate treebanks for a language code (`ar`), a treebank name (`UD_Arabic-PUD`) or file
    prefix (`ar_pud`), in order of preference."""
    registry = load_registry()
    if spec in registry:
        return registry[spec]
    for treebanks in registry.values():
        for tb in treebanks:
            if spec in (tb.name, tb.code):
                return (tb,)
    names = ", ".join(tb.name for tbs in registry.values() for tb in tbs)
    raise TreebankError(f"unknown language or treebank {spec!r}. Languages: {', '.join(registry)}. "
                        f"Treebanks: {names}")


def split_files(directory: str | Path, code: str | None = None) -> dict[str, Path]:
    """The `<code>-ud-<split>.conllu` files in one treebank folder (any code when `code` is None)."""
    directory = Path(directory)
    files = {}
    for split in SPLITS:
        pattern = f"{code}-ud-{split}.conllu" if code else f"*-ud-{split}.conllu"
        found = sorted(directory.glob(pattern))
        if len(found) > 1:
            names = ", ".join(p.name for p in found)
            raise TreebankError(f"{directory} holds several {split} files ({names}); "
                                "a treebank folder has one file per split")
        if found:
            files[split] = found[0]
    return files


def locate(spec: str, directory: str | Path) -> TreebankFiles:
    """The first candidate treebank of `spec` present under `directory`, with its split files."""
    directory = Path(directory)
    if not directory.is_dir():
        raise TreebankError(f"treebank folder {directory} does not exist; pass --treebank-dir with a folder "
                            "of UD treebank folders (e.g. ud-treebanks-v2.5 or ../shared/data/ud)")
    candidates = resolve(spec)
    for tb in candidates:
        folder = directory if directory.name == tb.name else directory / tb.name
        if folder.is_dir():
            files = split_files(folder, tb.code)
            if not files:
                looked = ", ".join(tb.file_name(s) for s in SPLITS)
                present = ", ".join(sorted(p.name for p in folder.iterdir())) or "nothing"
                raise TreebankError(f"{folder} has no split files: looked for {looked}; found {present}")
            return TreebankFiles(tb, folder, files)
    present = sorted(p.name for p in directory.iterdir() if p.is_dir() and p.name.startswith("UD_"))
    raise TreebankError(
        f"no treebank for {spec!r} under {directory}: looked for {', '.join(tb.name for tb in candidates)}; "
        f"treebank folders there: {', '.join(present) or 'none'}")
