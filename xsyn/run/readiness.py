"""Which languages of a run will run, known before its first GPU hour: per language, its data source (local files
found, a hub dataset, or neither, and where to put the files) and its parser (its models here, fetched at first use,
or none anywhere), with what is missing and the fix.

    needs = finetune_needs(card, "en")                       # what `xsyn finetune` and then `xsyn evaluate` read
    rows = readiness_rows(card, needs, {n.lang: "stanza" for n in needs}, build, data_dir, online=True)
    print(readiness_text("pawsx: ...", rows))

No data is read or parsed and no model loaded: a local layout's files are looked for, a hub source is named (not
asked: offline it cannot be reached, and only a copy an earlier run left in the datasets cache serves it), and each
parser says from its own model index which languages it has models for (`support_of`; Stanza fetches its index,
a small JSON file, where it is missing and downloads are allowed, as the parser check after the table would).
The fine-tune and evaluate preflights log the table (`xsyn.run.resources.log_readiness`), `experiment prepare` prints
one per data unit and writes them into its runs folder (`readiness.md`, and each row in `prepared.json`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from xsyn.data.cards import TaskCard
from xsyn.data.hub import hub_requests
from xsyn.data.loading import default_data_dir, find_local
from xsyn.run.scope import default_split, held_out_split
from xsyn.syntax.parsing.base import LanguageSupport, Parser, Readiness, support_of
from xsyn.utils.errors import XsynError


class DataState(StrEnum):
    """Where a language's split comes from, found without reading it."""

    LOCAL = "local"  # a local layout's files are in the data folder
    HUB = "hub"  # no local files; a hub dataset serves it, downloaded at first use (the datasets cache keeps it)
    OFFLINE = "offline"  # no local files, and the hub cannot be reached: only a copy in the datasets cache serves it
    MISSING = "missing"  # no local files, and no hub source for it


@dataclass(frozen=True)
class SplitSource:
    """One split of one language: where it comes from (`source`: the layout and its files, or the hub request)."""

    split: str
    state: DataState
    label: str  # in a word or two, as the table shows it
    source: str = ""
    fix: str = ""
    expected: str = ""  # where not LOCAL: the files of the card's first layout for it, as looked for

    @property
    def usable(self) -> bool:
        return self.state in (DataState.LOCAL, DataState.HUB)


@dataclass(frozen=True)
class LanguageNeed:
    """A language and the splits a run (and the evaluation after it) reads of it, as the card names them."""

    lang: str
    splits: tuple[str, ...]


@dataclass(frozen=True)
class ReadinessRow:
    """One language: its data per split, its parser (the choice, as written) and how that parser serves it."""

    lang: str
    data: tuple[SplitSource, ...]
    parser: str
    support: LanguageSupport

    @property
    def ready(self) -> bool:
        """Its data and its parser's models are here or are fetched at first use."""
        return self.support.usable and all(source.usable for source in self.data)

    @property
    def fetches(self) -> bool:
        return self.support.readiness is Readiness.FETCHABLE or any(s.state is DataState.HUB for s in self.data)

    def parser_problem(self) -> tuple[str, str] | None:
        """(what keeps its parser from serving it, the fix), or None."""
        if self.support.usable:
            return None
        return f"{self.lang}: parser {self.parser}: {self.support.detail}", self.support.fix

    def as_dict(self) -> dict[str, Any]:
        return {"lang": self.lang, "ready": self.ready, "parser": self.parser,
                "models": {**asdict(self.support), "readiness": self.support.readiness.value},
                "data": [{**asdict(s), "state": s.state.value} for s in self.data]}


# -- what a run reads -------------------------------------------------------------------------------------------

def run_needs(card: TaskCard, train_lang: str, splits: Sequence[str], langs: Sequence[str]) -> list[LanguageNeed]:
    """What a fine-tuning reads (the training language's train and validation splits) and what its evaluation in
    `splits` of `langs` reads after it, the training language first. (A held-out validation split is the training
    language's train split, read already.)"""
    train = ("train",) if "validation" not in card.splits else ("train", "validation")
    return merge_needs([(train_lang, split) for split in train] + [
        (lang, split) for split in splits if not held_out_split(card, split) for lang in langs])


def finetune_needs(card: TaskCard, train_lang: str) -> list[LanguageNeed]:
    """What `xsyn finetune` reads and what `xsyn evaluate` scores after it by default: every language's default
    split (a held-out validation split: the training language's alone)."""
    return run_needs(card, train_lang, [default_split(card)], card.languages)


def evaluation_needs(card: TaskCard, splits: Sequence[str], langs: Sequence[str]) -> list[LanguageNeed]:
    """What an evaluation of `langs` in `splits` reads: a held-out validation split is read from train."""
    return merge_needs([(lang, "train" if held_out_split(card, split) else split) for split in splits
                        for lang in langs])


def merge_needs(pairs: Sequence[tuple[str, str]]) -> list[LanguageNeed]:
    """(language, split) pairs -> one need per language, in first-seen order, each split once."""
    splits: dict[str, dict[str, None]] = {}
    for lang, split in pairs:
        splits.setdefault(lang, {})[split] = None
    return [LanguageNeed(lang, tuple(found)) for lang, found in splits.items()]


# -- the rows ---------------------------------------------------------------------------------------------------

def readiness_rows(card: TaskCard, needs: Sequence[LanguageNeed], parsers: Mapping[str, str],
                   build: Callable[[str], Parser], data_dir: str | Path | None, online: bool) -> list[ReadinessRow]:
    """Each language of `needs`: its splits' sources and how its parser (`parsers`: language -> parser choice, as
    written) serves it. `build` makes a parser of a choice (with the run's parser settings: model folder, download
    policy); each choice is built once and asked about all its languages at once. `online`: the hub and the
    parsers' downloads can be reached. Reads no data and loads no model; the one download is a parser's model index
    where it is missing and downloads are allowed (Stanza's resources.json), as the parser check fetches it anyway."""
    support: dict[str, LanguageSupport] = {}
    for choice in dict.fromkeys(parsers[need.lang] for need in needs):
        langs = [need.lang for need in needs if parsers[need.lang] == choice]
        support.update((s.lang, s) for s in _support(choice, langs, build, online))
    return [ReadinessRow(need.lang, tuple(split_source(card, split, need.lang, data_dir, online)
                                          for split in need.splits), parsers[need.lang], support[need.lang])
            for need in needs]


def _support(choice: str, langs: list[str], build: Callable[[str], Parser], online: bool) -> list[LanguageSupport]:
    try:
        parser = build(choice)
    except XsynError as err:  # (a UDPipe folder that is not there, ...: the preflight raises it next)
        return [LanguageSupport(lang, Readiness.MISSING, " ".join(str(err).split())) for lang in langs]  # (its fix)
    return support_of(parser, langs, online)


def split_source(card: TaskCard, split: str, lang: str, data_dir: str | Path | None, online: bool) -> SplitSource:
    """Where one split of one language comes from: the local layout whose files are there, else the card's first
    hub source (not asked), else nothing; with where to put the files."""
    segment_langs = {segment: lang for segment in card.segments}
    source, files, tried = find_local(card, split, segment_langs, data_dir)
    if source is not None:
        return SplitSource(split, DataState.LOCAL, f"local ({source.layout})",
                           ", ".join(str(f) for f in files) or str(data_dir or default_data_dir(card)))
    expected = " ".join(tried[0].split()) if tried else ""
    put = "put the card's files in place" + (f" (download: {card.download or card.homepage})"
                                             if card.download or card.homepage else "") if tried else ""
    requests = [request for _, request in hub_requests(card, split, segment_langs)]
    if not requests:
        return SplitSource(split, DataState.MISSING, "MISSING", "", put or "the card has no local layout or hub "
                           "source for it: leave the language out", expected)
    first = requests[0]
    label = f"hub {first.dataset}" + (f" {first.config}" if first.config else "")
    more = f" (then {len(requests) - 1} more hub source(s))" if len(requests) > 1 else ""
    if online:
        return SplitSource(split, DataState.HUB, label, first.describe() + more)
    return SplitSource(split, DataState.OFFLINE, f"{label}, offline", first.describe() + more, (
        f"{put + '; or ' if put else ''}run once with network access (`xsyn experiment prepare` on a machine that has "
        "it): the datasets cache keeps what it reads, for the runs offline"), expected)


# -- the table --------------------------------------------------------------------------------------------------

MODELS_WORDS = {Readiness.READY: "ready", Readiness.FETCHABLE: "downloaded at first use",
                Readiness.MISSING: "MISSING", Readiness.UNSUPPORTED: "UNSUPPORTED: no models"}
COLUMNS = ("language", "reads", "data", "parser", "models")


def row_cells(row: ReadinessRow) -> tuple[str, ...]:
    """The row as the table's columns: the splits it reads, its data per split, its parser and its models."""
    by_label: dict[str, list[str]] = {}
    for source in row.data:
        by_label.setdefault(source.label, []).append(source.split)
    data = next(iter(by_label)) if len(by_label) == 1 else "; ".join(
        f"{', '.join(splits)}: {label}" for label, splits in by_label.items())
    models = MODELS_WORDS[row.support.readiness] + (f" ({row.support.models})" if row.support.models else "")
    return row.lang, ", ".join(s.split for s in row.data), data, row.parser, models


DATA_WHY = {DataState.OFFLINE: "no local files, and the hub cannot be reached (HF_HUB_OFFLINE=1, or no network): "
                               "only a copy an earlier run with network left in the datasets cache serves them",
            DataState.MISSING: "no local files, and no hub source serves them"}


def verdict_lines(rows: Sequence[ReadinessRow]) -> list[str]:
    """How many languages will run; then what keeps the others from it, each with its fix: the data, by what is
    wrong (each language with its splits), and the parsers, each language by name, grouped by the fix."""
    ready = [row.lang for row in rows if row.ready]
    fetching = [row.lang for row in rows if row.ready and row.fetches]
    fetch = "all" if len(fetching) == len(rows) > 1 else ", ".join(fetching)
    lines = [f"ready to run: {len(ready)} of {len(rows)} languages" + (f" ({', '.join(ready)})" if ready else "")
             + (f"; {fetch} download their data or parser models at first use" if fetching else "")]
    for (state, fix), sources in _data_problems(rows).items():
        named = ", ".join(f"{lang} ({', '.join(s.split for s in found)})" for lang, found in sources.items())
        example = next((s.expected for found in sources.values() for s in found if s.expected), "")
        lines += [f"  data {state.value}: {named}: {DATA_WHY[state]}" + (f"; looked for first: {example}" if example
                                                                           else ""), f"  fix: {fix}"]
    problems = [problem for row in rows if (problem := row.parser_problem()) is not None]
    for fix in dict.fromkeys(fix for _, fix in problems):
        lines += [f"  {what}" for what, its_fix in problems if its_fix == fix]
        lines += [f"  fix: {fix}"] if fix else []
    return lines


def _data_problems(rows: Sequence[ReadinessRow]) -> dict[tuple[DataState, str], dict[str, list[SplitSource]]]:
    """The splits without usable data, by (what is wrong, its fix), then by language."""
    found: dict[tuple[DataState, str], dict[str, list[SplitSource]]] = {}
    for row in rows:
        for source in row.data:
            if not source.usable:
                found.setdefault((source.state, source.fix), {}).setdefault(row.lang, []).append(source)
    return dict(sorted(found.items(), key=lambda item: list(DATA_WHY).index(item[0][0])))


def readiness_text(title: str, rows: Sequence[ReadinessRow]) -> str:
    """The table as plain text, columns aligned, then the verdict."""
    cells = [COLUMNS, *(row_cells(row) for row in rows)]
    widths = [max(len(cell[k]) for cell in cells) for k in range(len(COLUMNS) - 1)]
    lines = ["  ".join(cell[k].ljust(widths[k]) for k in range(len(widths))) + "  " + cell[-1] for cell in cells]
    return "\n".join([title, *lines, *verdict_lines(rows)])


def readiness_markdown(title: str, rows: Sequence[ReadinessRow]) -> str:
    """The table as markdown (what `experiment prepare` writes beside its manifest)."""
    lines = [f"## {title}", "", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row_cells(row)) + " |" for row in rows]
    verdict = verdict_lines(rows)
    return "\n".join([*lines, "", verdict[0], *(f"- {line.strip()}" for line in verdict[1:])])
