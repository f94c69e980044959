"""Chinese grammatical error diagnosis (CGED, NLPTEA 2016-2020) at its three levels.

A prediction and a reference are the errors of one sentence, a set of `(start, end, type)` with
the NLPTEA offsets (1-based, inclusive character positions) and type R, M, S or W; an empty set
is a correct sentence. The levels, as the NLPTEA overview papers define them:

- detection: is the sentence correct or not (any error type counts as "incorrect");
- identification: which error types the sentence has, as a set per sentence;
- position: which `(start, end, type)` triples, exactly.

Each level counts TP (predicted items that are gold), FP (predicted items that are not), FN (gold
items not predicted) and TN (correct sentences predicted correct), and reports accuracy,
precision TP / (TP + FP), recall TP / (TP + FN) and F1. Accuracy is the official NLPTEA-2016
scorer's: at the detection level (one item per sentence) (TP + TN) / (TP + FP + TN + FN), at the
identification and position levels (TP + TN) / (TP + FP + TN), which leaves the missed gold
errors out, as the scorer's printout of its worked example shows (identification 5/6, position
3/7; `tests/test_metrics_cged.py`). The false positive rate is the share of correct sentences
reported as having errors. The primary score is position-level F1.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xsyn.metrics.base import Metric, percent, precision_recall_f1
from xsyn.metrics.entities import entity_spans

LEVELS = ("detection", "identification", "position")


def errors_from_tags(tags: Sequence[str]) -> set[tuple[int, int, str]]:
    """Character BIO tags over R/M/S/W -> NLPTEA error triples (1-based, inclusive offsets)."""
    return {(start + 1, end, kind) for kind, start, end in entity_spans(tags, "default")}


def _triples(value: Any, what: str) -> frozenset[tuple[int, int, str]]:
    if isinstance(value, (str, Mapping)) or not isinstance(value, Iterable):
        raise TypeError(f"the {what} must be a set of (start, end, type) errors")
    triples = set()
    for item in value:
        if isinstance(item, str) or not isinstance(item, Sequence) or len(item) != 3:
            raise TypeError(f"the {what} holds {item!r}, not a (start, end, type) error")
        start, end, kind = item
        triples.add((int(start), int(end), str(kind)))
    return frozenset(triples)


def _level_items(errors: frozenset[tuple[int, int, str]]) -> dict[str, set]:
    return {"detection": {"incorrect"} if errors else set(),
            "identification": {kind for _, _, kind in errors},
            "position": set(errors)}


@dataclass(frozen=True)
class Cged(Metric):
    """NLPTEA CGED detection, identification and position scores plus the false positive rate."""

    id = "cged"
    primary = "position_f1"
    nothing = "no error in any sentence (every sentence predicted correct)"

    def says_nothing(self, prediction: Any) -> bool:
        return not prediction

    def example_counts(self, prediction: Any, reference: Any) -> dict[str, float]:
        predicted = _level_items(_triples(prediction, "prediction"))
        gold = _level_items(_triples(reference, "reference"))
        correct_sentence_kept = float(not predicted["detection"] and not gold["detection"])
        counts: dict[str, float] = {"correct_sentences": float(not gold["detection"])}
        for level in LEVELS:
            counts[f"{level}_tp"] = len(predicted[level] & gold[level])
            counts[f"{level}_fp"] = len(predicted[level] - gold[level])
            counts[f"{level}_fn"] = len(gold[level] - predicted[level])
            counts[f"{level}_tn"] = correct_sentence_kept
        return counts

    def scores(self, totals: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        scores = {"false_positive_rate": percent(totals["detection_fp"], totals["correct_sentences"])}
        for level in LEVELS:
            tp, fp, fn, tn = (totals[f"{level}_{name}"] for name in ("tp", "fp", "fn", "tn"))
            precision, recall, f1 = precision_recall_f1(tp, tp + fp, tp + fn)
            judged = tp + fp + tn + (fn if level == "detection" else 0)  # the scorer's denominators
            scores.update({f"{level}_accuracy": percent(tp + tn, judged),
                           f"{level}_precision": precision, f"{level}_recall": recall, f"{level}_f1": f1})
        return scores
