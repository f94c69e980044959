"""Task-oriented parsing (MTOP, mATIS++): exact match, intent accuracy and slot F1.

A prediction and a reference are each `(intent, slot_tags)`, the tags BIO over the gold tokens.
Exact match, the papers' headline number and the checkpoint-selection metric of Ahmad et al.'s
released code, needs the intent right and every slot tag right.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xsyn.metrics.base import percent
from xsyn.metrics.entities import TaggingMetric, entity_counts, entity_scores


def _intent_and_tags(value: Any, what: str) -> tuple[Any, Sequence[str]]:
    if isinstance(value, str) or not isinstance(value, Sequence) or len(value) != 2:
        raise TypeError(f"the {what} must be a pair (intent, slot tags)")
    return value[0], value[1]


@dataclass(frozen=True)
class IntentSlot(TaggingMetric):
    """Exact match (primary), intent accuracy and slot P/R/F1 (seqeval `mode` for the slots)."""

    id = "intent_slot"
    primary = "exact_match"
    nothing = "no slot in any utterance (every slot tag O)"

    def says_nothing(self, prediction: Any) -> bool:
        return all(tag == "O" for tag in _intent_and_tags(prediction, "prediction")[1])

    def example_counts(self, prediction: Any, reference: Any) -> dict[str, float]:
        predicted_intent, predicted_tags = _intent_and_tags(prediction, "prediction")
        gold_intent, gold_tags = _intent_and_tags(reference, "reference")
        counts = entity_counts(predicted_tags, gold_tags, self.mode, prefix="slot_")
        intent_right = predicted_intent == gold_intent
        counts.update(intent_correct=float(intent_right), total=1.0,
                      exact=float(intent_right and list(predicted_tags) == list(gold_tags)))
        return counts

    def scores(self, totals: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        scores = {"exact_match": percent(totals["exact"], totals["total"]),
                  "intent_accuracy": percent(totals["intent_correct"], totals["total"])}
        scores.update(entity_scores(totals, prefix="slot_"))
        return scores
