"""Token-level error detection (FCE grammatical error detection, Rei and Yannakoudakis 2016): precision,
recall and F0.5 of the error class over tokens, F0.5 weighing precision twice as much as recall, as
the GED literature and Li et al. (2021) report it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from xsyn.metrics.base import Metric, percent


@dataclass(frozen=True)
class ErrorDetection(Metric):
    """P/R/F0.5 (percent) of tokens tagged `error` (FCE's `i`; its other tag, `c`, is correct)."""

    error: str = "i"
    id = "detection"
    primary = "f0.5"

    @property
    def nothing(self) -> str:  # type: ignore[override]
        return f"no token flagged as an error ({self.error!r}) in any sentence"

    def says_nothing(self, prediction: Any) -> bool:
        return self.error not in prediction

    def example_counts(self, prediction: Any, reference: Any) -> dict[str, float]:
        if not isinstance(prediction, (list, tuple)) or not isinstance(reference, (list, tuple)):
            raise TypeError("error detection compares one tag list per sentence")
        if len(prediction) != len(reference):
            raise ValueError(f"{len(prediction)} predicted tags for {len(reference)} gold tokens")
        predicted = [p == self.error for p in prediction]
        gold = [g == self.error for g in reference]
        return {"predicted": float(sum(predicted)), "gold": float(sum(gold)),
                "true_positive": float(sum(p and g for p, g in zip(predicted, gold)))}

    def scores(self, totals: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        precision = percent(totals["true_positive"], totals["predicted"])
        recall = percent(totals["true_positive"], totals["gold"])
        weighted = 0.25 * precision + recall
        f05 = np.divide(1.25 * precision * recall, weighted, out=np.zeros(weighted.shape), where=weighted > 0)
        return {"precision": precision, "recall": recall, "f0.5": f05}
