"""The benchmarks' metrics as plain functions, offline (no `evaluate.load`).

    compute("seqeval", [["B-PER", "O"]], [["B-PER", "O"]])          # {"f1": 100.0, ...}
    compute("mlqa", ["北京"], [["北京大学"]], lang="zh")              # keyed by the context language
    primary_score("squad", result)                                  # the number tables show

| id            | prediction / reference per example          | options                    | primary        |
|---------------|---------------------------------------------|----------------------------|----------------|
| `accuracy`    | label / label                               |                            | accuracy       |
| `word_accuracy` | tags / tags (one list per sentence)       |                            | accuracy (words) |
| `subset_accuracy` | label / (label, subset)                 |                            | accuracy (+ per subset) |
| `mcc`         | label / label                               |                            | mcc            |
| `accuracy_f1` | label / label                               | `positive`: the F1 class   | accuracy       |
| `correlation` | score / score                               |                            | pearson (also spearman) |
| `detection`   | tags / tags (one list per sentence)         | `error`: the error tag (i) | f0.5           |
| `squad_v2`    | (answer, na_prob) / gold texts ([]: none)   |                            | f1 (+HasAns, NoAns, best) |
| `seqeval`     | tags / tags (BIO, one list per sentence)    | `mode`: default or strict  | f1 (entity)    |
| `squad`       | answer text / list of gold answer texts     |                            | f1             |
| `mlqa`        | answer text / list of gold answer texts     | `lang`: context language   | f1             |
| `intent_slot` | (intent, tags) / (intent, tags)             | `mode` for the slots       | exact_match    |
| `cged`        | set of (start, end, type) / the same        |                            | position_f1    |

Every score is a percentage. Each metric is per-example counts plus a formula over their sums
(`xsyn.metrics.base`), which is what the paired bootstrap (`xsyn.metrics.bootstrap`) resamples.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from xsyn.utils.registry import Registry, UnknownName

if TYPE_CHECKING:
    import numpy as np

    from xsyn.metrics.base import Metric

# Every metric by id, imported on first use; another package adds one (a `Metric` subclass with its `id`) through
# the entry-point group `xsyn.metrics`, and its task cards may then name it.
BUILT_IN = {
    "accuracy": "xsyn.metrics.accuracy:Accuracy",
    "seqeval": "xsyn.metrics.entities:EntityF1",
    "squad": "xsyn.metrics.qa:SquadQA",
    "mlqa": "xsyn.metrics.qa:MlqaQA",
    "intent_slot": "xsyn.metrics.intent_slot:IntentSlot",
    "cged": "xsyn.metrics.cged:Cged",
    "word_accuracy": "xsyn.metrics.accuracy:WordAccuracy",
    "mcc": "xsyn.metrics.glue:Mcc",
    "accuracy_f1": "xsyn.metrics.glue:AccuracyF1",
    "correlation": "xsyn.metrics.glue:Correlation",
    "detection": "xsyn.metrics.detection:ErrorDetection",
    "squad_v2": "xsyn.metrics.qa:Squad2QA",
    "subset_accuracy": "xsyn.metrics.accuracy:SubsetAccuracy",
}
METRICS: Registry[type[Metric]] = Registry("metric", BUILT_IN, group="xsyn.metrics", of="xsyn.metrics.base:Metric",
                                           classes=True, name_of=lambda cls: cls.id)
METRIC_IDS = tuple(BUILT_IN)  # the built-in metrics (no plug-in's: every registered one is `tuple(METRICS)`)

__all__ = ["METRICS", "METRIC_IDS", "CountTable", "Metric", "MetricInputError", "UnknownName", "compute",
           "get_metric", "primary_name", "primary_score", "resample_fn"]
_BASE = ("CountTable", "Metric", "MetricInputError")  # imported on first use: the cards read METRICS without numpy


def __getattr__(name: str) -> Any:
    if name not in _BASE:
        raise AttributeError(f"module 'xsyn.metrics' has no attribute {name!r}")
    return getattr(importlib.import_module("xsyn.metrics.base"), name)


def get_metric(metric_id: str, **options: Any) -> Metric:
    """The metric `metric_id` with its options (`lang` for mlqa, `mode` for seqeval/intent_slot)."""
    cls = METRICS[metric_id]
    try:
        return cls(**options)
    except TypeError as err:
        fields = getattr(cls, "__dataclass_fields__", {})
        accepted = ", ".join(name for name, f in fields.items() if f.init) or "no options"
        raise ValueError(f"metric {metric_id!r} takes {accepted}; got {sorted(options)} ({err})") from None


def compute(metric_id: str, predictions: Sequence, references: Sequence, **options: Any) -> dict[str, float]:
    """Corpus-level scores (percent) of `predictions` against `references`."""
    return get_metric(metric_id, **options).compute(predictions, references)


def primary_name(metric_id: str) -> str:
    return METRICS[metric_id].primary


def primary_score(metric_id: str, result: Mapping[str, float]) -> float:
    """The single number tables show: accuracy, entity F1, QA F1, exact match, CGED position F1."""
    return float(result[primary_name(metric_id)])


def resample_fn(metric_id: str, predictions: Sequence, references: Sequence,
                **options: Any) -> Callable[[np.ndarray], float]:
    """`fn(indices)`: the primary score recomputed from counts on a resample of example indices."""
    return get_metric(metric_id, **options).resample_fn(predictions, references)
