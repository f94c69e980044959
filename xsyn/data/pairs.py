"""Generalized cross-lingual examples: each segment of a pair in its own language.

    examples, report = load_pair_examples("pawsx", "test", {"sentence1": "en", "sentence2": "de"})
    examples, report = load_pair_examples("mlqa", "validation", {"question": "de", "context": "en"})

Where the benchmark ships the combination as one file (MLQA's `dev-context-{c}-question-{q}.json`,
a card layout whose path names the segments), that file is read as released. Otherwise the
same-language sets are joined by example id: PAWS-X and XNLI take segment 1 from one language and
segment 2 from the other (rows without ids are numbered `#0`, `#1`, ..., so parallel files join
line by line);
XQuAD takes the question from one language and the context with its answers from the other.

A pair whose languages disagree on the label is dropped and counted, as Ahmad et al. (2021) did;
ids present in only one language are counted too. Nothing else is dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from xsyn.data.cards import CardError, TaskCard
from xsyn.data.example import Example
from xsyn.data.loading import LoadReport, load_examples, load_segments, resolve_card
from xsyn.utils.errors import InputError


def pair_axes(card: TaskCard) -> tuple[str, str]:
    """(row segment, column segment) of the language-pair matrix: the order the benchmark's own
    cross-language files name them (MLQA: context, question), else the segment order."""
    for source in card.local:
        if source.cross_language(card.segments):
            path = source.paths[0]
            named = sorted(card.segments, key=lambda s: path.index("{" + s + "}"))
            return named[0], named[1]
    return card.segments[0], card.segments[1]


@dataclass
class PairReport:
    task: str
    split: str
    langs: dict[str, str]  # segment name -> language
    method: str = ""  # "released file" or "joined by id"
    examples: int = 0
    label_mismatches: int = 0  # pairs dropped because the languages' labels differ
    unmatched: dict[str, int] = field(default_factory=dict)  # language -> ids missing from the others
    loads: list[LoadReport] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {**{f.name: getattr(self, f.name) for f in fields(self)},
                "loads": [load.as_dict() for load in self.loads]}

    def summary(self) -> str:
        langs = ", ".join(f"{name} {lang}" for name, lang in self.langs.items())
        text = f"{self.task} {self.split} ({langs}): {self.examples} examples, {self.method}"
        if self.method == "joined by id":
            text += f"; {self.label_mismatches} dropped for disagreeing labels"
            text += "".join(f"; {n} ids only in {lang}" for lang, n in self.unmatched.items() if n)
        return text


def reads_pair_file(card: TaskCard, langs: Mapping[str, str]) -> bool:
    """Whether a pair is read from files that hold it (the same language, or a benchmark's own
    cross-language files, MLQA's) rather than joined by id from each language's files."""
    return len(set(langs.values())) == 1 or any(s.cross_language(card.segments) for s in card.local)


def load_pair_examples(card: TaskCard | str, split: str, langs: Mapping[str, str],
                       data_dir: str | Path | None = None, skip_bad_rows: bool = False,
                       allow_hub: bool = True, loaded: Mapping[str, list[Example]] | None = None
                       ) -> tuple[list[Example], PairReport]:
    """Examples whose segments are in `langs` (segment name -> language, every segment named).

    `loaded` holds languages already loaded (and parsed) for this split: a join by id uses them
    instead of reading the files again, so a language pair costs what a language costs.
    """
    card = resolve_card(card)
    card.check_split(split)
    if card.task_kind.n_segments < 2:
        raise CardError(f"task {card.name!r} has one segment; generalized pairs need two")
    if set(langs) != set(card.segments):
        raise CardError(f"name a language for each segment of {card.name!r}: {', '.join(card.segments)}")
    for lang in langs.values():
        card.check_lang(lang)
    langs = {name: langs[name] for name in card.segments}
    report = PairReport(card.name, split, dict(langs))
    if reads_pair_file(card, langs):
        examples, load = load_segments(card, split, langs, data_dir, skip_bad_rows, allow_hub)
        report.method, report.loads, report.examples = "released file", [load], len(examples)
        return examples, report
    per_lang: dict[str, list[Example]] = {}
    for lang in dict.fromkeys(langs.values()):
        if loaded is not None and lang in loaded:
            per_lang[lang] = loaded[lang]
            continue
        per_lang[lang], load = load_examples(card, lang, split, data_dir, skip_bad_rows, allow_hub)
        report.loads.append(load)
    examples = join_by_id(card, langs, per_lang, report)
    report.method, report.examples = "joined by id", len(examples)
    return examples, report


def join_by_id(card: TaskCard, langs: Mapping[str, str], per_lang: Mapping[str, list[Example]],
               report: PairReport) -> list[Example]:
    """One example per id found in every language: segment k from the language of segment k.

    Labels must agree (else the pair is dropped and counted); QA answers come with the context.
    """
    indexed = {lang: _by_id(examples, lang) for lang, examples in per_lang.items()}
    shared = set.intersection(*(set(ids) for ids in indexed.values()))
    report.unmatched = {lang: len(ids) - len(shared) for lang, ids in indexed.items()}
    if not shared:
        raise InputError(f"{card.name}: no example id is shared by {', '.join(indexed)}; the files are not "
                         "parallel (or one layout numbers its rows while the other has real ids)")
    first = per_lang[next(iter(per_lang))]
    out = []
    for uid in (e.id for e in first if e.id in shared):
        sources = [indexed[langs[name]][uid] for name in card.segments]
        if "label" in card.task_kind.gold.roles and len({s.label for s in sources}) > 1:
            report.label_mismatches += 1
            continue
        segments = [source.segments[k] for k, source in enumerate(sources)]
        out.append(Example(uid, segments, label=sources[0].label, answers=list(sources[-1].answers)))
    return out


def _by_id(examples: list[Example], lang: str) -> dict[str, Example]:
    index = {e.id: e for e in examples}
    if len(index) != len(examples):
        raise InputError(f"the {lang} examples repeat ids, so they cannot be joined by id")
    return index
