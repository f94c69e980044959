"""Accuracy of single labels (XNLI, PAWS-X, ChnSentiCorp, the synthetic benchmark)."""

from __future__ import annotations

from collections.abc import Mapping
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
