"""Loading a task's examples: local files when present, else the Hugging Face hub.

>>> examples, report = load_examples("pawsx", "de", "validation", data_dir="data/pawsx")
>>> print(report.summary())
pawsx de validation: 2000 examples from data/pawsx/dev-de.tsv (xtreme layout); 0 rows skipped

`data_dir` is the task's own folder (default `$XSYN_DATA_DIR/<task>`, or `~/.cache/xsyn/data/<task>`).
The card's `[[local]]` layouts are tried in order; the first whose files all exist is read. If none
exists, the card's `[[hub]]` sources are requested in order, each that fails (offline, a transport error,
a script repository, ...) moving on to the next; if all fail, `DataNotFoundError` says which files to put
where, and which hub sources were tried and why each failed.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from xsyn.data.cards import FROM_TRAIN, LocalSource, TaskCard, load_card
from xsyn.data.example import Example, has_gold
from xsyn.data.hub import HubUnavailableError, hub_requests, load_hub_rows, probe_hub
from xsyn.data.readers import READERS, BadRows, DataFormatError, ReadRequest, Row, file_exists
from xsyn.data.rows import GoldRow, RowError
from xsyn.utils.errors import XsynError


class DataNotFoundError(XsynError, FileNotFoundError):
    """No local file and no reachable hub source for a task's language and split."""


@dataclass
class LoadReport:
    """Where examples came from and everything that did not become an example."""

    task: str
    langs: dict[str, str]  # segment name -> language
    split: str
    origin: str = ""  # "local" or "hub"
    sources: list[str] = field(default_factory=list)  # files read, or the hub request
    examples: int = 0
    unlabelled: int = 0  # examples without gold (splits released without labels)
    skipped: list[str] = field(default_factory=list)  # "where: reason" for each skipped row
    notes: Counter = field(default_factory=Counter)  # format-specific counts (IOB1 rewrites, ...)
    seconds: float = 0.0

    @property
    def lang(self) -> str:
        langs = list(dict.fromkeys(self.langs.values()))
        return langs[0] if len(langs) == 1 else "-".join(f"{k}:{v}" for k, v in self.langs.items())

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready. (`dataclasses.asdict` would rebuild `notes` from its (note, count) items, so a
        Counter would count the pairs.)"""
        return {**{f.name: getattr(self, f.name) for f in fields(self)}, "notes": dict(self.notes)}

    def summary(self) -> str:
        text = (f"{self.task} {self.lang} {self.split}: {self.examples} examples from {', '.join(self.sources)}; "
                f"{len(self.skipped)} rows skipped")
        if self.unlabelled:
            text += f"; {self.unlabelled} without gold labels"
        for note, count in sorted(self.notes.items()):
            text += f"; {note}: {count}"
        return text


def default_data_dir(card: TaskCard) -> Path:
    root = os.environ.get("XSYN_DATA_DIR") or Path.home() / ".cache" / "xsyn" / "data"
    return Path(root) / card.name


def resolve_card(card: TaskCard | str) -> TaskCard:
    return load_card(card) if isinstance(card, str) else card


def load_examples(card: TaskCard | str, lang: str, split: str, data_dir: str | Path | None = None,
                  skip_bad_rows: bool = False, allow_hub: bool = True) -> tuple[list[Example], LoadReport]:
    """Every example of one language and split (all segments in `lang`), with a report."""
    card = resolve_card(card)
    card.check_lang(lang)
    card.check_split(split)
    return load_segments(card, split, {name: lang for name in card.segments}, data_dir, skip_bad_rows, allow_hub)


def load_segments(card: TaskCard, split: str, segment_langs: Mapping[str, str],
                  data_dir: str | Path | None = None, skip_bad_rows: bool = False,
                  allow_hub: bool = True) -> tuple[list[Example], LoadReport]:
    """Examples whose segments are in the given languages, from files (or hub configs) that hold
    exactly that combination: the same-language files, or MLQA's native context x question files."""
    root = Path(data_dir) if data_dir is not None else default_data_dir(card)
    report = LoadReport(card.name, dict(segment_langs), split)
    start = time.perf_counter()
    langs = list(segment_langs.values())
    source, files, tried = _local_files(card, split, segment_langs, root)
    if source is not None:
        report.origin, report.sources = "local", [f"{f} ({source.layout} layout)" for f in files] or [source.layout]
        request = ReadRequest(files, langs[0], source.splits[split], source.options,
                              BadRows(skip_bad_rows, test=split == "test"),
                              labelled=split not in card.unlabelled_splits)
        examples = _examples(card, READERS[source.format].read(request), request, langs)
        return examples, _finish(report, examples, request, start)
    hub_errors: list[HubUnavailableError] = []  # each source the card lists, in order, until one serves it
    for hub_source, hub_request in hub_requests(card, split, segment_langs) if allow_hub else []:
        request = ReadRequest([], langs[0], split, {}, BadRows(skip_bad_rows, test=split == "test"),
                              labelled=split not in card.unlabelled_splits)
        try:
            examples = _examples(card, load_hub_rows(hub_source, hub_request), request, langs)
        except HubUnavailableError as err:
            hub_errors.append(err)
            continue
        note = f" ({hub_source.note})" if hub_source.note else ""
        report.origin, report.sources = "hub", [hub_request.describe() + note]
        return examples, _finish(report, examples, request, start)
    raise DataNotFoundError(_not_found(card, split, segment_langs, root, tried, hub_errors, allow_hub))


def _local_files(card: TaskCard, split: str, segment_langs: Mapping[str, str], root: Path
                 ) -> tuple[LocalSource | None, list[Path], list[str]]:
    """The first of the card's local layouts whose files all exist under `root` (with its files), and
    the layouts tried before it, as `_not_found` lists them."""
    langs = list(segment_langs.values())
    cross = len(set(langs)) > 1
    tried: list[str] = []
    for source in card.local:
        if not all(source.serves(lg, split) for lg in langs) or (cross and not source.cross_language(card.segments)):
            continue
        files = [root / p for p in source.resolve(langs[0], split, segment_langs)]
        reader = READERS[source.format]
        if reader.needs_files and not all(file_exists(f) or (reader.reads_folders and f.is_dir()) for f in files):
            tried.append(f"  {', '.join(str(f) for f in files)}   ({source.layout} layout)")
            continue
        return source, files, tried
    return None, [], tried


def find_local(card: TaskCard, split: str, segment_langs: Mapping[str, str], data_dir: str | Path | None = None
               ) -> tuple[LocalSource | None, list[Path], list[str]]:
    """The local layout `load_segments` would read (None: none has its files here) and its files, and each
    layout looked for before it, as "  FILES   (LAYOUT layout)"; only files' existence is looked at."""
    return _local_files(card, split, segment_langs, Path(data_dir) if data_dir is not None else default_data_dir(card))


def check_available(card: TaskCard, split: str, segment_langs: Mapping[str, str],
                    data_dir: str | Path | None = None, allow_hub: bool = True) -> None:
    """Raise the `DataNotFoundError` that `load_segments` would, without reading any data: no local
    layout's files exist and no hub source is reachable (the hub's dataset metadata is asked, not its rows).
    What a command's preflight calls, so that a missing file is found in seconds, not after the others' work."""
    root = Path(data_dir) if data_dir is not None else default_data_dir(card)
    source, _, tried = find_local(card, split, segment_langs, root)
    if source is not None:
        return
    hub_errors: list[HubUnavailableError] = []
    for _, hub_request in hub_requests(card, split, segment_langs) if allow_hub else []:
        try:
            probe_hub(hub_request)
            return
        except HubUnavailableError as err:
            hub_errors.append(err)
    raise DataNotFoundError(_not_found(card, split, segment_langs, root, tried, hub_errors, allow_hub))


def _examples(card: TaskCard, items, request: ReadRequest, langs: list[str]) -> list[Example]:
    examples: list[Example] = []
    for n, item in enumerate(items):
        if isinstance(item, Example):
            examples.append(item)
            continue
        row: Row = item
        try:
            number = n if row.number is None else row.number
            examples.append(build_example(card, row.values, langs, default_id=f"#{number}",
                                          labelled=request.labelled))
        except RowError as err:
            request.bad(row.where_of(err.token), str(err))
    return examples


def build_example(card: TaskCard, values: Mapping[str, Any], segment_langs: Sequence[str],
                  default_id: str, labelled: bool = True) -> Example:
    """One `Example` from a row, built by the card's kind (its gold form); `segment_langs` gives each
    segment's language, in card order."""
    uid = values.get("id")
    uid = default_id if uid is None or str(uid).strip() == "" else str(uid)
    return card.task_kind.gold.build(GoldRow(values, uid, card.segments, segment_langs, card.labels, card.tags,
                                             card.label_map, card.score_range, labelled))


def _finish(report: LoadReport, examples: list[Example], request: ReadRequest, start: float) -> LoadReport:
    if not examples:
        skipped = f" ({len(request.bad.skipped)} unreadable rows skipped)" if request.bad.skipped else ""
        raise DataFormatError(f"{'; '.join(report.sources)}: no {report.lang} {report.split} examples{skipped}; "
                              "is the file empty, or its language filter or layout wrong for it?")
    report.examples = len(examples)
    report.unlabelled = sum(1 for e in examples if not has_gold(e))
    report.skipped = request.bad.skipped
    report.notes = request.notes
    duplicates = _unique_ids(examples)
    if duplicates:
        report.notes["examples sharing an id with an earlier one (renamed ID#2, ID#3, ...)"] += duplicates
    report.seconds = time.perf_counter() - start
    return report


def _unique_ids(examples: list[Example]) -> int:
    """Give the second, third, ... example of an id the id `ID#2`, `ID#3`, ...: every example is kept,
    and results, language pairs and the report's pairing of runs are keyed by id. Returns how many."""
    taken = {e.id for e in examples}
    seen: set[str] = set()
    renamed = 0
    for example in examples:
        if example.id in seen:
            n = 2
            while f"{example.id}#{n}" in taken:
                n += 1
            example.id = f"{example.id}#{n}"
            taken.add(example.id)
            renamed += 1
        seen.add(example.id)
    return renamed


def _not_found(card: TaskCard, split: str, segment_langs: Mapping[str, str], root: Path, tried: list[str],
               hub_errors: list[HubUnavailableError], allow_hub: bool) -> str:
    what = ", ".join(f"{name} {lang}" for name, lang in segment_langs.items())
    lines = [f"no data for task {card.name!r} ({what}), split {split!r}."]
    if tried:
        # a mistyped --data-dir is said as such, not only as files missing under it
        where = f"No local file under {root}" if root.is_dir() else f"The folder {root} does not exist (a mistyped " \
            "--data-dir?)"
        lines += [f"{where}; any one of these layouts is read:", *tried]
    else:
        lines.append(f"The card has no local layout for this combination ({_layouts(card.local)}).")
    if hub_errors:
        tried = "its source" if len(hub_errors) == 1 else f"any of its {len(hub_errors)} sources, tried in order"
        lines += [f"The Hugging Face hub could not serve {tried}:", *(f"  {err}" for err in hub_errors)]
        lines.append("Run once with network access (the datasets cache keeps it), or put the files above in place."
                     if any(err.unreachable for err in hub_errors) else "Put the files above in place.")
    elif not allow_hub:
        lines.append("The hub was not tried (allow_hub=False).")
    else:
        lines.append("No hub dataset serves this combination.")
    if card.download or card.homepage:
        lines.append(f"Download: {card.download or card.homepage}")
    return "\n".join(lines)


def _layouts(sources: tuple[LocalSource, ...]) -> str:
    return "; ".join(f"{s.layout}: {', '.join(s.paths)}" for s in sources) or "none"


def label_names(card: TaskCard, examples: list[Example] | None = None) -> list[str]:
    """The card's class labels (intents), or, for `labels = "from-train"`, those in `examples`."""
    return _vocabulary(card.labels, [e.label for e in examples or [] if e.label is not None], "labels", card)


def tag_names(card: TaskCard, examples: list[Example] | None = None) -> list[str]:
    """The card's tag set, or, for `tags = "from-train"`, `O` then the tags in `examples`, sorted."""
    seen = [t for e in examples or [] for t in e.tags or []]
    names = _vocabulary(card.tags, seen, "tags", card)
    return names if card.tags != FROM_TRAIN else ["O"] + [t for t in names if t != "O"]


def _vocabulary(declared, seen: list[str], key: str, card: TaskCard) -> list[str]:
    if declared is None:
        raise ValueError(f"task {card.name!r} ({card.kind}) has no {key}")
    if declared != FROM_TRAIN:
        return list(declared)
    if not seen:
        raise ValueError(f"task {card.name!r} reads its {key} from the training examples; pass them")
    return sorted(set(seen))
