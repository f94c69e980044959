"""Sentence kinds: one output per example from the pooled [CLS], a class (single or pair classification)
or a score (pair regression). Their segments are named by the card; long inputs are truncated."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from xsyn.data.example import Example
from xsyn.data.kinds.base import Gold, TaskKind, WindowGold
from xsyn.data.prediction_files import write_lines
from xsyn.data.rows import GoldRow, class_label, score_value, text_segments

if TYPE_CHECKING:
    import numpy as np

    from xsyn.data.decode import DecodeInput


def _label_example(row: GoldRow) -> Example:
    return Example(row.uid, text_segments(row), label=class_label(row))


def _score_example(row: GoldRow) -> Example:
    return Example(row.uid, text_segments(row), label=score_value(row))


def class_labels(gold: WindowGold, tree, last_segment: int) -> dict[str, Any]:
    return {"labels": gold.label}


def _score_labels(gold: WindowGold, tree, last_segment: int) -> dict[str, Any]:
    return {"labels": float("nan") if gold.value is None else float(gold.value)}


def argmax_labels(data: DecodeInput, key: str) -> list[str]:
    import numpy as np

    from xsyn.data.decode import mean_logits

    return [data.labels[int(np.argmax(mean_logits(data.outputs[key], w)))] for w in data.windows]


def decode_classes(data: DecodeInput) -> list[Any]:
    return argmax_labels(data, "logits")


def _decode_scores(data: DecodeInput) -> list[Any]:
    from xsyn.data.decode import mean_logits

    return [float(mean_logits(data.outputs["logits"], w).reshape(-1)[0]) for w in data.windows]


def _class_reference(example: Example, metric: str) -> Any:
    return example.label


def probabilities(logits: np.ndarray, names: Sequence[str]) -> dict[str, float]:
    import numpy as np

    shifted = np.exp(logits - logits.max())
    return {name: round(float(p), 6) for name, p in zip(names, shifted / shifted.sum())}


def present_classes(data: DecodeInput) -> list[dict[str, Any]]:
    from xsyn.data.decode import mean_logits

    out = []
    for w in data.windows:
        logits = mean_logits(data.outputs["logits"], w)
        out.append({"label": data.labels[int(logits.argmax())], "probabilities": probabilities(logits, data.labels)})
    return out


def _present_scores(data: DecodeInput) -> list[dict[str, Any]]:
    return [{"score": round(score, 6)} for score in _decode_scores(data)]


_LABEL = Gold(("label",), ("labels",), _label_example)


def _sentences(name: str, n_segments: int, gold: Gold, decode, present, **kind: Any) -> TaskKind:
    """A kind with one output per example from the pooled [CLS] (its segments named by the card)."""
    return TaskKind(name, None, n_segments, gold, head="sequence", label_columns=("labels",),
                    piece_label_columns=(), output_keys=("logits",), windowed=False, decode=decode,
                    reference=_class_reference, write_predictions=write_lines, present=present,
                    pipeline_tag="text-classification", auto_class="AutoModelForSequenceClassification", **kind)


SENTENCE_KINDS = (
    _sentences("single-classification", 1, _LABEL, decode_classes, present_classes, window_labels=class_labels),
    _sentences("pair-classification", 2, _LABEL, decode_classes, present_classes, window_labels=class_labels),
    # STS-B: one output from [CLS], MSE loss (the sequence head with one label regresses)
    _sentences("pair-regression", 2, Gold(("label",), ("score_range",), _score_example), _decode_scores,
               _present_scores, window_labels=_score_labels,
               head_config={"num_labels": 1, "problem_type": "regression"}),
)
