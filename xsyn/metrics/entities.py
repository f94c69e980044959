"""Entity precision, recall and F1 over BIO tag sequences (PAN-X, CoNLL, MSRA NER, slots).

Two modes, as in seqeval:

- `default`: conlleval-compatible and lenient (seqeval's `mode=None`): an `I-X` after `O` or after
  another type starts an entity, and IOBES prefixes are understood. XTREME reports PAN-X this way.
- `strict`: only well-formed IOB2 chunks count (seqeval `mode="strict", scheme=IOB2`); an `I-X`
  that does not continue a `B-X`/`I-X` is no entity at all.

Entities are matched on (type, start, end) per sentence; precision, recall and F1 are micro
averages over the corpus, with per-type scores alongside.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from seqeval.metrics.sequence_labeling import get_entities
from seqeval.scheme import IOB2, Entities

from xsyn.metrics.base import Metric, percent, precision_recall_f1

MODES = ("default", "strict")
_PREFIXES = {"default": ("B", "I", "E", "S"), "strict": ("B", "I")}


def entity_spans(tags: Sequence[str], mode: str = "default") -> set[tuple[str, int, int]]:
    """The entities of one tag sequence as (type, start, end), `end` exclusive."""
    check_tags(tags, mode)
    if mode == "default":
        # seqeval.metrics pulls in scikit-learn (seconds): load it on first use, not on import

        return {(kind, start, end + 1) for kind, start, end in get_entities(list(tags))}
    found = Entities([list(tags)], IOB2).entities[0]
    return {(entity.tag, entity.start, entity.end) for entity in found}


def check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"unknown tagging mode {mode!r}; valid: {', '.join(MODES)}")


def check_tags(tags: Any, mode: str) -> None:
    check_mode(mode)
    if isinstance(tags, str) or not isinstance(tags, Sequence):
        raise TypeError(f"expected a list of tags, got {type(tags).__name__}")
    prefixes = _PREFIXES[mode]
    for position, tag in enumerate(tags):
        if tag == "O":
            continue
        if not isinstance(tag, str) or tag[:1] not in prefixes or tag[1:2] != "-" or len(tag) < 3:
            allowed = "/".join(f"{p}-TYPE" for p in prefixes)
            raise ValueError(f"tag {tag!r} at position {position} is neither O nor {allowed} "
                             f"({mode} mode)")


def entity_counts(predicted: Sequence[str], gold: Sequence[str], mode: str,
                  prefix: str = "") -> dict[str, float]:
    """True positives, predicted and gold entities, overall and per type (`tp:PER`, ...)."""
    if len(predicted) != len(gold):
        raise ValueError(f"the prediction has {len(predicted)} tags but the reference {len(gold)}")
    predicted_spans = entity_spans(predicted, mode)
    gold_spans = entity_spans(gold, mode)
    hits = predicted_spans & gold_spans
    counts = {f"{prefix}tp": len(hits), f"{prefix}predicted": len(predicted_spans),
              f"{prefix}gold": len(gold_spans)}
    for name, spans in (("tp", hits), ("predicted", predicted_spans), ("gold", gold_spans)):
        for kind, _, _ in spans:
            key = f"{prefix}{name}:{kind}"
            counts[key] = counts.get(key, 0) + 1
    return counts


def entity_scores(totals: Mapping[str, np.ndarray], prefix: str = "") -> dict[str, np.ndarray]:
    """Overall and per-type precision/recall/F1 from summed `entity_counts`."""
    precision, recall, f1 = precision_recall_f1(totals[f"{prefix}tp"], totals[f"{prefix}predicted"],
                                                totals[f"{prefix}gold"])
    scores = {f"{prefix}precision": precision, f"{prefix}recall": recall, f"{prefix}f1": f1}
    kinds = sorted({name.split(":", 1)[1] for name in totals
                    if name.startswith((f"{prefix}predicted:", f"{prefix}gold:"))})
    for kind in kinds:
        p, r, f = precision_recall_f1(totals[f"{prefix}tp:{kind}"], totals[f"{prefix}predicted:{kind}"],
                                      totals[f"{prefix}gold:{kind}"])
        scores.update({f"{prefix}{kind}_precision": p, f"{prefix}{kind}_recall": r, f"{prefix}{kind}_f1": f})
    return scores


@dataclass(frozen=True)
class TaggingMetric(Metric):
    """A metric over BIO tags; `mode` is "default" (conlleval-compatible) or "strict" (IOB2)."""

    mode: str = "default"

    def __post_init__(self) -> None:
        check_mode(self.mode)


@dataclass(frozen=True)
class EntityF1(TaggingMetric):
    """seqeval entity P/R/F1 over tag sequences."""

    id = "seqeval"
    primary = "f1"
    nothing = "no entity in any sentence (every tag O)"

    def says_nothing(self, prediction: Any) -> bool:
        return all(tag == "O" for tag in prediction)

    def example_counts(self, prediction: Any, reference: Any) -> dict[str, float]:
        counts = entity_counts(prediction, reference, self.mode)
        counts["tokens_correct"] = sum(p == g for p, g in zip(prediction, reference, strict=True))
        counts["tokens"] = len(reference)
        return counts

    def scores(self, totals: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        scores = entity_scores(totals)
        scores["accuracy"] = percent(totals["tokens_correct"], totals["tokens"])
        return scores
