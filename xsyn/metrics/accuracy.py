"""Accuracy of single labels (XNLI, PAWS-X, ChnSentiCorp, the synthetic benchmark) and of words' tags (UD-POS)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xsyn.metrics.base import Metric, percent


@dataclass(frozen=True)
class Accuracy(Metric):
    """Share of examples whose predicted label equals the gold label (labels compared as given)."""

    id = "accuracy"
    primary = "accuracy"

    def example_counts(self, prediction: Any, reference: Any) -> dict[str, float]:
        if isinstance(prediction, (list, dict)) or isinstance(reference, (list, dict)):
            raise TypeError("accuracy compares single labels; got a list or mapping "
                            "(tag sequences are scored with 'seqeval')")
        return {"correct": float(prediction == reference), "total": 1.0}

    def scores(self, totals: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"accuracy": percent(totals["correct"], totals["total"])}


@dataclass(frozen=True)
class WordAccuracy(Metric):
    """Share of words whose predicted tag equals the gold tag, over every word of the corpus (XTREME's
    UD-POS score: a long sentence weighs as many words as it has)."""

    id = "word_accuracy"
    primary = "accuracy"

    def nothing_predicted(self, predictions: Sequence) -> str | None:
        tags = {tag for sentence in predictions for tag in sentence}
        words = sum(len(sentence) for sentence in predictions)
        return f"the same tag, {next(iter(tags))!r}, for every word" if len(tags) == 1 and words > 1 else None

    def example_counts(self, prediction: Any, reference: Any) -> dict[str, float]:
        if not isinstance(prediction, (list, tuple)) or not isinstance(reference, (list, tuple)):
            raise TypeError("word accuracy compares one tag list per sentence")
        if len(prediction) != len(reference):
            raise ValueError(f"{len(prediction)} predicted tags for {len(reference)} gold words")
        return {"correct": float(sum(p == g for p, g in zip(prediction, reference))), "total": float(len(reference))}

    def scores(self, totals: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"accuracy": percent(totals["correct"], totals["total"])}


@dataclass(frozen=True)
class SubsetAccuracy(Metric):
    """Accuracy overall and on each subset the references name (RACE: `accuracy_middle` is RACE-M,
    `accuracy_high` RACE-H); a reference is (label, subset)."""

    id = "subset_accuracy"
    primary = "accuracy"

    def example_counts(self, prediction: Any, reference: Any) -> dict[str, float]:
        label, subset = reference
        hit = float(prediction == label)
        return {"correct": hit, "total": 1.0, f"correct\t{subset}": hit, f"total\t{subset}": 1.0}

    def scores(self, totals: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        subsets = sorted(name.split("\t", 1)[1] for name in totals if name.startswith("total\t"))
        return {"accuracy": percent(totals["correct"], totals["total"]),
                **{f"accuracy_{s}": percent(totals[f"correct\t{s}"], totals[f"total\t{s}"]) for s in subsets}}
