"""Rows -> `Example`s: the one place where every source (file reader or hub) is checked against its card.

A row is a dict keyed by role. Per task kind:

| kind                    | roles                                                    |
|-------------------------|----------------------------------------------------------|
| single-/pair-classification | one per segment name (`premise`, `hypothesis`, ...), `label` |
| token-classification    | `tokens`, `tags`                                         |
| extractive-qa           | `question`, `context`, `answers` [(text, start), ...]    |
| intent-slot             | `tokens`, `tags`, `label` (the intent)                   |

plus an optional `id` (rows without one are numbered `#0`, `#1`, ... in file order, so parallel
files pair up line by line and never with files that carry real ids), and where the format carries
trees (UD CoNLL-U) a tagging row's `tree`: its segment's gold tree, served by `--parser gold`.
Labels go through the card's `label_map` and must be in its label set; tags must be one per token;
answers must sit at their offsets in the context.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from xsyn.data.cards import FROM_TRAIN, TaskCard
from xsyn.data.example import Answer, Example
from xsyn.syntax.segment import Segment, is_blank
from xsyn.utils.errors import XsynError


class RowError(XsynError, ValueError):
    """A row that does not make an example of its task (the message says why)."""


def build_example(card: TaskCard, values: Mapping[str, Any], segment_langs: Sequence[str],
                  default_id: str, labelled: bool = True) -> Example:
    """One `Example` from a row; `segment_langs` gives each segment's language, in card order."""
    spec = card.spec
    uid = values.get("id")
    uid = default_id if uid is None or str(uid).strip() == "" else str(uid)
    if spec.answers:
        segments = _text_segments(card, values, segment_langs, uid)
        answers = _answers(values.get("answers") or [], segments[-1].text or "", labelled)
        return Example(uid, segments, answers=answers)
    if spec.tags:
        tokens = _tokens(values)
        tags = _tags(card, values.get("tags"), len(tokens), labelled)
        label = _label(card, values.get("label"), labelled) if spec.label else None
        errors = values.get("errors")
        segment = Segment(segment_langs[0], tokens=tokens, sent_id=uid, gold_tree=values.get("tree"))
        return Example(uid, [segment], label=label, tags=tags,
                       errors=None if errors is None else [tuple(e) for e in errors])
    segments = _text_segments(card, values, segment_langs, uid)
    return Example(uid, segments, label=_label(card, values.get("label"), labelled))


def _text_segments(card: TaskCard, values: Mapping[str, Any], segment_langs: Sequence[str], uid: str
                   ) -> list[Segment]:
    """The raw-text segments, named for a pre-parsed source by the example id (`ID.NAME` in pairs)."""
    return [_text_segment(values, name, lang, uid if len(card.segments) == 1 else f"{uid}.{name}")
            for name, lang in zip(card.segments, segment_langs)]


def _text_segment(values: Mapping[str, Any], name: str, lang: str, sent_id: str) -> Segment:
    text = values.get(name)
    if not isinstance(text, str) or not text.strip():
        raise RowError(f"{name} is empty")
    if is_blank(text):
        raise RowError(f"{name} is empty: it holds only invisible characters "
                       f"({' '.join(f'U+{ord(ch):04X}' for ch in dict.fromkeys(text) if not ch.isspace())})")
    return Segment(lang, text=text, sent_id=sent_id)


def _tokens(values: Mapping[str, Any]) -> list[str]:
    tokens = values.get("tokens")
    if not tokens:
        raise RowError("a sentence without tokens")
    if any(not isinstance(t, str) or t == "" for t in tokens):
        raise RowError("an empty token")
    if is_blank(tokens):
        raise RowError("a sentence whose tokens hold only invisible characters")
    return list(tokens)


def _label(card: TaskCard, raw: Any, labelled: bool) -> str | None:
    if raw is None or str(raw).strip() == "":
        if labelled:
            raise RowError("no label (the card does not list this split in unlabelled_splits)")
        return None
    label = str(raw).strip()
    label = card.label_map.get(label, label)
    if card.labels != FROM_TRAIN and label not in card.labels:
        raise RowError(f"label {label!r} is not one of {', '.join(card.labels)}; fix the file or the "
                       "card's labels / label_map")
    return label


def _tags(card: TaskCard, tags: Any, n_tokens: int, labelled: bool) -> list[str] | None:
    if not tags:
        if labelled:
            raise RowError("no tags (the card does not list this split in unlabelled_splits)")
        return None
    if len(tags) != n_tokens:
        raise RowError(f"{len(tags)} tags for {n_tokens} tokens")
    if card.tags != FROM_TRAIN:
        unknown = sorted({t for t in tags if t not in card.tags})
        if unknown:
            raise RowError(f"tag(s) {', '.join(unknown)} not in the card's tags ({', '.join(card.tags)})")
    return list(tags)


def _answers(raw: Sequence[Any], context: str, labelled: bool) -> list[Answer]:
    answers = []
    for text, start in raw:
        if not text:
            raise RowError(f"an empty answer at character {start} (test answers stripped, as XTREME does?)")
        if context[start:start + len(text)] != text:
            raise RowError(f"answer {text!r} is not at character {start} of the context "
                           f"({context[start:start + len(text)]!r} is)")
        answers.append(Answer(text, start))
    if not answers and labelled:
        raise RowError("a question without answers (the card does not list this split in unlabelled_splits)")
    return answers
