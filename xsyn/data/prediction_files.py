"""Prediction files in each benchmark's own layout (XTREME's, NLPTEA's, SQuAD's), for the official scripts:
one writer per task kind (`TaskKind.write_predictions`), each `(stem, examples, predictions, metric) -> path`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from xsyn.data.example import Example
from xsyn.utils.io import atomic_write_json, atomic_write_text


def write_lines(stem: Path, examples: Sequence[Example], predictions: Sequence[Any], metric: str) -> Path:
    """One label (or score) per line."""
    path = stem.with_name(stem.name + ".tsv")
    atomic_write_text(path, "".join(f"{p}\n" for p in predictions))
    return path


def write_tags(stem: Path, examples: Sequence[Example], predictions: Sequence[Any], metric: str) -> Path:
    """One tag per line, a blank line between sentences; CGED: NLPTEA's `id, start, end, type` lines
    (`id, correct` for a sentence without errors), in a .txt file."""
    path = stem.with_name(stem.name + (".txt" if metric == "cged" else ".tsv"))
    if metric == "cged":  # the NLPTEA scorer's input, in example order
        lines = [line for e, errors in zip(examples, predictions)
                 for line in [f"{e.id}, {s}, {end}, {t}" for s, end, t in sorted(errors)] or [f"{e.id}, correct"]]
        text = "".join(line + "\n" for line in lines)
    else:
        text = "".join("".join(t + "\n" for t in tags) + "\n" for tags in predictions)
    atomic_write_text(path, text)
    return path


def write_intent_slots(stem: Path, examples: Sequence[Example], predictions: Sequence[Any], metric: str) -> Path:
    """The intent, a tab, the slot tags separated by spaces."""
    path = stem.with_name(stem.name + ".tsv")
    atomic_write_text(path, "".join(f"{intent}\t{' '.join(tags)}\n" for intent, tags in predictions))
    return path


def write_answers(stem: Path, examples: Sequence[Example], predictions: Sequence[Any], metric: str) -> Path:
    """XTREME's {question id: answer text}."""
    path = stem.with_name(stem.name + ".json")
    atomic_write_json(path, {e.id: p for e, p in zip(examples, predictions)})
    return path


def write_answers_or_none(stem: Path, examples: Sequence[Example], predictions: Sequence[Any], metric: str
                           ) -> Path:
    """The official SQuAD 2.0 script's two inputs: {id: answer} and, beside it, {id: na_prob}."""
    atomic_write_json(stem.with_name(stem.name + "-na_prob.json"),
                      {e.id: min(p[1], 1e9) for e, p in zip(examples, predictions)})
    return write_answers(stem, examples, [p[0] for p in predictions], metric)
