"""A metric as per-example counts plus a formula over their sums.

Every benchmark metric xsyn reports is a ratio of corpus-wide sums: correct / total, true positives /
predicted, summed per-question EM / questions. So each metric here is written as (1) the counts of
one example and (2) the scores computed from summed counts. The corpus value is the formula over all
examples; a bootstrap resample is the same formula over the counts summed with resample weights, so
F1 is recomputed from resampled counts, never averaged over examples.

All scores are percentages (0-100), as in XTREME and the papers' tables.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np


class MetricInputError(ValueError):
    """A prediction or reference the metric cannot score (wrong shape, unknown tag, ...)."""


@dataclass(frozen=True)
class CountTable:
    """Per-example counts: `values[i, k]` is count `names[k]` of example i."""

    names: tuple[str, ...]
    values: np.ndarray

    def __len__(self) -> int:
        return self.values.shape[0]

    def take(self, rows: Sequence[int] | np.ndarray) -> CountTable:
        """The examples at `rows`, in that order (used to pair runs by example id)."""
        return CountTable(self.names, self.values[np.asarray(rows, dtype=np.int64)])

    def totals(self, weights: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Summed counts: plain sums, or one weighted sum per row of `weights` (B, N) -> arrays (B,)."""
        summed = self.values.sum(axis=0) if weights is None else weights @ self.values
        return {name: summed[..., k] for k, name in enumerate(self.names)}


class Metric(ABC):
    """One metric family; options (language, tagging mode) are constructor fields."""

    id: ClassVar[str]
    primary: ClassVar[str]  # the key of the single number tables show
    # What a prediction that finds nothing is, in words, for the warning when every prediction is one
    # (`says_nothing`): "no token flagged as an error". "" where a prediction always says something (a label).
    nothing: ClassVar[str] = ""

    @abstractmethod
    def example_counts(self, prediction: Any, reference: Any) -> dict[str, float]:
        """The additive counts of one example."""

    @abstractmethod
    def scores(self, totals: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """All scores from summed counts; works elementwise on arrays of resampled totals."""

    def says_nothing(self, prediction: Any) -> bool:
        """Whether one prediction finds nothing (no error, entity, answer); only read where `nothing` is set."""
        return False

    def nothing_predicted(self, predictions: Sequence) -> str | None:
        """What the predictions say, in words, where they all say nothing (`nothing`) or, for single labels or
        scores, all say the same; None otherwise. Scores that reward silence look good for that reason alone."""
        if not predictions:
            return None
        if self.nothing:
            return self.nothing if all(self.says_nothing(p) for p in predictions) else None
        first = predictions[0]
        if (len(predictions) < 2 or isinstance(first, (list, tuple, set, frozenset, dict))
                or any(p != first for p in predictions)):
            return None
        return f"the same prediction, {first!r}, for every example"

    def count_table(self, predictions: Sequence, references: Sequence) -> CountTable:
        if len(predictions) != len(references):
            raise MetricInputError(f"{self.id}: {len(predictions)} predictions but {len(references)} "
                                   "references; give one prediction per reference, in the same order")
        if not references:
            raise MetricInputError(f"{self.id}: no examples to score")
        rows = []
        for i, (prediction, reference) in enumerate(zip(predictions, references, strict=True)):
            try:
                rows.append(self.example_counts(prediction, reference))
            except (TypeError, ValueError, KeyError) as err:
                raise MetricInputError(f"{self.id}: example {i}: {err}") from err
        names = tuple(sorted({name for row in rows for name in row}))
        values = np.zeros((len(rows), len(names)))
        column = {name: k for k, name in enumerate(names)}
        for i, row in enumerate(rows):
            for name, value in row.items():
                values[i, column[name]] = value
        return CountTable(names, values)

    def compute(self, predictions: Sequence, references: Sequence) -> dict[str, float]:
        return self.scores_of(self.count_table(predictions, references))

    def totals(self, table: CountTable, weights: np.ndarray | None = None) -> Mapping[str, np.ndarray]:
        """What `scores` reads: the column sums of `table` (one per row of resample `weights` (B, N)).
        A metric whose formula cancels over raw sums (a correlation) overrides it with stable sums."""
        shape = () if weights is None else (weights.shape[0],)
        return _ZeroDefault(table.totals(weights), shape=shape)

    def scores_of(self, table: CountTable) -> dict[str, float]:
        """Corpus-level scores of the examples in `table`."""
        return {name: float(value) for name, value in self.scores(self.totals(table)).items()}

    def primary_scores(self, table: CountTable, weights: np.ndarray) -> np.ndarray:
        """The primary score for each row of resample weights (B, N) -> (B,)."""
        return np.asarray(self.scores(self.totals(table, weights))[self.primary], dtype=float)

    def resample_fn(self, predictions: Sequence, references: Sequence) -> Callable[[np.ndarray], float]:
        """`fn(indices)`: the primary score recomputed on the examples at `indices` (with repeats)."""
        table = self.count_table(predictions, references)

        def fn(indices: np.ndarray) -> float:
            weights = np.bincount(np.asarray(indices, dtype=np.int64), minlength=len(table))
            return float(self.primary_scores(table, weights[None, :].astype(float))[0])

        return fn


class _ZeroDefault(dict):
    """Totals where a count no example produced (no entity of a type, ...) reads as zero."""

    def __init__(self, totals: Mapping[str, np.ndarray], shape: tuple[int, ...]):
        super().__init__(totals)
        self.shape = shape

    def __missing__(self, name: str) -> np.ndarray:
        return np.zeros(self.shape)


def percent(numerator: np.ndarray | float, denominator: np.ndarray | float) -> np.ndarray:
    """100 * numerator / denominator, and 0 where the denominator is 0 (as conlleval and seqeval do)."""
    num, den = np.broadcast_arrays(np.asarray(numerator, dtype=float), np.asarray(denominator, dtype=float))
    return np.divide(100.0 * num, den, out=np.zeros(num.shape), where=den > 0)


def precision_recall_f1(true_positives: np.ndarray, predicted: np.ndarray,
                        gold: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Micro precision, recall and F1 (percent) from counts."""
    precision = percent(true_positives, predicted)
    recall = percent(true_positives, gold)
    total = precision + recall
    f1 = np.divide(2.0 * precision * recall, total, out=np.zeros(total.shape), where=total > 0)
    return precision, recall, f1
