"""Rows -> `Example`s: the checks every gold form is made of.

A row is a dict keyed by role: one per segment name (`premise`, `question`, `context`, ...) or
`tokens`, plus the gold roles of its task kind (`label`, `tags`, `answers`, `impossible`, ...; each
kind lists its own in `TaskKind.gold.roles`) and an optional `id` (rows without one are numbered
`#0`, `#1`, ... in file order, so parallel files pair up line by line and never with files that
carry real ids), and where the format carries trees (UD CoNLL-U) a tagging row's `tree`: its
segment's gold tree, served by `--parser gold`. A kind's gold form (`xsyn.data.kinds`) builds the
example from a `GoldRow` with the helpers here: labels go through the card's `label_map` and must
be in its label set; tags must be one per token; answers must sit at their offsets in the context.
Every problem is a `RowError` (the loader adds the file and line).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from xsyn.data.errors import RowError
from xsyn.data.example import Answer
from xsyn.syntax.segment import Segment, is_blank

__all__ = ["FROM_TRAIN", "GoldRow", "RowError"]

FROM_TRAIN = "from-train"  # a label set read off the training split (MTOP, mATIS++ intents and slots)


@dataclass(frozen=True)
class GoldRow:
    """One row, and what its card says about rows: segment names, label sets, the label map."""

    values: Mapping[str, Any]
    uid: str
    segments: tuple[str, ...]  # the card's segment names, in order
    segment_langs: Sequence[str]  # each segment's language, in that order
    labels: tuple[str, ...] | str | None = None
    tags: tuple[str, ...] | str | None = None
    label_map: Mapping[str, str] = field(default_factory=dict)
    score_range: tuple[float, float] | None = None
    labelled: bool = True  # False where the card says the split has no gold


def text_segments(row: GoldRow) -> list[Segment]:
    """The raw-text segments, named for a pre-parsed source by the example id (`ID.NAME` in pairs)."""
    single = len(row.segments) == 1
    return [_text_segment(row.values, name, lang, row.uid if single else f"{row.uid}.{name}")
            for name, lang in zip(row.segments, row.segment_langs)]


def _text_segment(values: Mapping[str, Any], name: str, lang: str, sent_id: str) -> Segment:
    text = values.get(name)
    if not isinstance(text, str) or not text.strip():
        raise RowError(f"{name} is empty")
    if is_blank(text):
        raise RowError(f"{name} is empty: it holds only invisible characters "
                       f"({' '.join(f'U+{ord(ch):04X}' for ch in dict.fromkeys(text) if not ch.isspace())})")
    return Segment(lang, text=text, sent_id=sent_id)


def token_segment(row: GoldRow) -> Segment:
    """The gold tokens of a tagged row, as its one pre-tokenised segment."""
    tokens = row.values.get("tokens")
    if not tokens:
        raise RowError("a sentence without tokens")
    empty = next((k for k, t in enumerate(tokens) if not isinstance(t, str) or t == ""), None)
    if empty is not None:
        raise RowError("an empty token", token=empty)
    if is_blank(tokens):
        raise RowError("a sentence whose tokens hold only invisible characters")
    return Segment(row.segment_langs[0], tokens=list(tokens), sent_id=row.uid, gold_tree=row.values.get("tree"))


def class_label(row: GoldRow) -> str | None:
    """The row's class (or intent) through the card's label map; None for an unlabelled split."""
    raw = row.values.get("label")
    if raw is None or str(raw).strip() == "":
        if row.labelled:
            raise RowError("no label (the card does not list this split in unlabelled_splits)")
        return None
    label = str(raw).strip()
    label = row.label_map.get(label, label)
    if row.labels != FROM_TRAIN and label not in (row.labels or ()):
        raise RowError(f"label {label!r} is not one of {', '.join(row.labels or ())}; fix the file or the "
                       "card's labels / label_map")
    return label


def tags_per_token(row: GoldRow, n_tokens: int) -> list[str] | None:
    """One tag per token, each in the card's tag set; None for an unlabelled split."""
    tags = row.values.get("tags")
    if not tags:
        if row.labelled:
            raise RowError("no tags (the card does not list this split in unlabelled_splits)")
        return None
    if len(tags) != n_tokens:
        raise RowError(f"{len(tags)} tags for {n_tokens} tokens")
    if row.tags != FROM_TRAIN:
        unknown = sorted({t for t in tags if t not in (row.tags or ())})
        if unknown:
            first = next(k for k, t in enumerate(tags) if t not in (row.tags or ()))
            raise RowError(f"tag(s) {', '.join(unknown)} not in the card's tags ({', '.join(row.tags or ())})",
                           token=first)
    return list(tags)


def answers_in(row: GoldRow, context: str) -> list[Answer]:
    """The row's answers, each checked to sit at its character offset in the context."""
    answers = []
    for text, start in row.values.get("answers") or []:
        if not text:
            raise RowError(f"an empty answer at character {start} (test answers stripped, as XTREME does?)")
        if context[start:start + len(text)] != text:
            raise RowError(f"answer {text!r} is not at character {start} of the context "
                           f"({context[start:start + len(text)]!r} is)")
        answers.append(Answer(text, start))
    return answers


def score_value(row: GoldRow) -> float | None:
    """A regression target: a number inside the card's score range; None for an unlabelled split."""
    raw = row.values.get("label")
    if not row.labelled:  # GLUE's hub copies give hidden test scores as -1
        return None
    if raw is None or str(raw).strip() == "":
        raise RowError("no score (the card does not list this split in unlabelled_splits)")
    try:
        value = float(str(raw).strip())
    except ValueError:
        raise RowError(f"score {str(raw)[:40]!r} is not a number") from None
    low, high = row.score_range or (float("-inf"), float("inf"))
    if not low <= value <= high:  # NaN fails too
        raise RowError(f"score {value:g} is outside the card's score_range {low:g} to {high:g}")
    return value


def option_segments(row: GoldRow) -> list[Segment]:
    """A multiple-choice row's options, one raw-text segment each (in the last segment's language), as
    many as the card has answer labels."""
    options = row.values.get("options")
    if not isinstance(options, (list, tuple)) or not options:
        raise RowError("no options (a multiple-choice question needs its list of options)")
    expected = len(row.labels or ()) if row.labels != FROM_TRAIN else len(options)
    if len(options) != expected:
        raise RowError(f"{len(options)} options, but the card's labels name {expected} ({', '.join(row.labels or ())})")
    lang = row.segment_langs[-1]
    return [_text_segment({"option": text}, "option", lang, f"{row.uid}.option{k}")
            for k, text in enumerate(options)]
