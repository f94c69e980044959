"""GLUE's metrics beyond accuracy, as the GLUE benchmark scores them (scikit-learn / scipy definitions):

- `mcc` (CoLA): Matthews correlation over the confusion matrix (the multi-class form, which is the
  binary one for two labels); 0 when a row or column of the matrix is empty (constant predictions),
  as scikit-learn's `matthews_corrcoef` returns.
- `accuracy_f1` (MRPC, QQP): accuracy (primary, as Li et al. report MRPC) and F1 of the positive class
  (`positive`, GLUE's label 1).
- `correlation` (STS-B): Pearson and Spearman correlation of predicted and gold scores; a constant
  prediction (or gold) has no defined correlation: it is reported as 0, where scipy gives NaN.

Every score is a percentage (x 100), as the GLUE leaderboard and the papers' tables show them.
MCC is a formula over summed counts (the bootstrap resamples them). Pearson is computed in two passes
(weighted means, then sums of centred products), on the whole set and on each resample: the one-pass
form `n*Sxx - Sx^2` cancels when predictions vary little or sit far from zero. Spearman ranks the
whole scored set, so it is computed on it (`scores_of`) and is not the primary score.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from xsyn.metrics.base import CountTable, Metric, percent, precision_recall_f1

_PAIR = "pair\t"  # count names of the confusion matrix: pair<TAB>predicted<TAB>gold


@dataclass(frozen=True)
class Mcc(Metric):
    """Matthews correlation coefficient (x 100) of single labels."""

    id = "mcc"
    primary = "mcc"

    def example_counts(self, prediction: Any, reference: Any) -> dict[str, float]:
        if isinstance(prediction, (list, dict)) or isinstance(reference, (list, dict)):
            raise TypeError("MCC compares single labels")
        return {f"{_PAIR}{prediction}\t{reference}": 1.0}

    def scores(self, totals: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        pairs = {tuple(name.split("\t")[1:]): value for name, value in totals.items() if name.startswith(_PAIR)}
        labels = sorted({label for pair in pairs for label in pair})
        n = sum(pairs.values())
        correct = sum(value for (p, g), value in pairs.items() if p == g)
        predicted = [sum(v for (p, _), v in pairs.items() if p == label) for label in labels]
        gold = [sum(v for (_, g), v in pairs.items() if g == label) for label in labels]
        covariance = correct * n - sum(p * g for p, g in zip(predicted, gold))
        spread = (n * n - sum(p * p for p in predicted)) * (n * n - sum(g * g for g in gold))
        spread = np.asarray(spread, dtype=float)
        mcc = np.divide(100.0 * np.asarray(covariance, dtype=float), np.sqrt(spread), out=np.zeros(spread.shape),
                        where=spread > 0)
        return {"mcc": mcc}


@dataclass(frozen=True)
class AccuracyF1(Metric):
    """Accuracy and F1 (precision, recall) of the `positive` label."""

    positive: str
    id = "accuracy_f1"
    primary = "accuracy"  # Li et al. (2021) Table 2 reports MRPC accuracy

    def example_counts(self, prediction: Any, reference: Any) -> dict[str, float]:
        if isinstance(prediction, (list, dict)) or isinstance(reference, (list, dict)):
            raise TypeError("accuracy and F1 compare single labels")
        hit = prediction == self.positive
        return {"correct": float(prediction == reference), "total": 1.0, "predicted": float(hit),
                "gold": float(reference == self.positive), "true_positive": float(hit and reference == prediction)}

    def scores(self, totals: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        precision, recall, f1 = precision_recall_f1(totals["true_positive"], totals["predicted"], totals["gold"])
        return {"accuracy": percent(totals["correct"], totals["total"]), "precision": precision, "recall": recall,
                "f1": f1}


def average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks, ties sharing the mean of the ranks they span (Spearman's convention)."""
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values))
    sorted_values = values[order]
    start = 0
    for end in range(1, len(values) + 1):
        if end == len(values) or sorted_values[end] != sorted_values[start]:
            ranks[order[start:end]] = (start + end + 1) / 2
            start = end
    return ranks


def _centred_sums(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> dict[str, np.ndarray]:
    """Sums of centred squares and products of x and y (N,) for each row of weights (B, N), in two
    passes (weighted means first), and whether both vary over the examples the row draws."""
    drawn = weights > 0

    def centred(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        v = v - np.median(v)  # exact differences of nearby values (Sterbenz), so the mean is near exact
        mean = (weights @ v) / weights.sum(axis=1)
        # Constancy by comparison, not by a small spread: a mean may be an ulp off a constant value.
        varies = np.where(drawn, v, np.inf).min(axis=1) < np.where(drawn, v, -np.inf).max(axis=1)
        return v[None, :] - mean[:, None], varies

    (dx, x_varies), (dy, y_varies) = centred(x), centred(y)
    return {"sxx": (weights * dx * dx).sum(axis=1), "syy": (weights * dy * dy).sum(axis=1),
            "sxy": (weights * dx * dy).sum(axis=1), "defined": x_varies & y_varies}


def _pearson(sums: Mapping[str, np.ndarray]) -> np.ndarray:
    """Pearson correlation (x 100) from centred sums; 0 where x or y is constant (undefined)."""
    spread = np.sqrt(sums["sxx"]) * np.sqrt(sums["syy"])
    pearson = np.divide(100.0 * sums["sxy"], spread, out=np.zeros(np.shape(spread)),
                        where=sums["defined"] & (spread > 0))
    return np.clip(pearson, -100.0, 100.0)


@dataclass(frozen=True)
class Correlation(Metric):
    """Pearson (primary) and Spearman correlation (x 100) of predicted and gold scores."""

    id = "correlation"
    primary = "pearson"

    def example_counts(self, prediction: Any, reference: Any) -> dict[str, float]:
        x, y = float(prediction), float(reference)
        if not (np.isfinite(x) and np.isfinite(y)):
            raise ValueError(f"scores must be finite numbers, got {prediction!r} and {reference!r}")
        return {"x": x, "y": y}

    def totals(self, table: CountTable, weights: np.ndarray | None = None) -> Mapping[str, np.ndarray]:
        x, y = _columns(table)
        sums = _centred_sums(x, y, np.ones((1, len(table))) if weights is None else weights)
        return sums if weights is not None else {name: value[0] for name, value in sums.items()}

    def scores(self, totals: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"pearson": _pearson(totals)}

    def scores_of(self, table: CountTable) -> dict[str, float]:
        x, y = _columns(table)
        spearman = _pearson(_centred_sums(average_ranks(x), average_ranks(y), np.ones((1, len(table)))))[0]
        return {**super().scores_of(table), "spearman": float(spearman)}


def _columns(table: CountTable) -> tuple[np.ndarray, np.ndarray]:
    column = {name: k for k, name in enumerate(table.names)}
    return table.values[:, column["x"]], table.values[:, column["y"]]
