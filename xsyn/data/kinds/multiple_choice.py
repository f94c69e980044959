"""Multiple choice (RACE): passage + question + each option as one sequence (the passage alone truncated),
one score per option, softmax over the options; the label is the answer's letter."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from xsyn.data.example import Example
from xsyn.data.kinds.base import Gold, TaskKind
from xsyn.data.kinds.classification import class_labels, decode_classes, present_classes
from xsyn.data.prediction_files import write_lines
from xsyn.data.rows import GoldRow, class_label, option_segments, text_segments

if TYPE_CHECKING:
    from xsyn.data.decode import DecodeInput


def _choice_example(row: GoldRow) -> Example:
    """RACE: the passage and question segments, then one segment per option; the label is the answer's letter."""
    return Example(row.uid, text_segments(row) + option_segments(row), label=class_label(row))


def _choice_reference(example: Example, metric: str) -> Any:
    """The answer, and for a score per subset (RACE-M, RACE-H) the subset: the id's leading word
    (RACE's files and hub ids are named middle*/high*)."""
    subset = re.match(r"[^\W\d_]*", example.id).group(0)
    return (example.label, subset) if metric == "subset_accuracy" else example.label


def _present_choices(data: DecodeInput) -> list[dict[str, Any]]:
    """The answer's label and option text, and each option's probability (softmax over the options)."""
    out = []
    for example, shown in zip(data.examples, present_classes(data)):
        options = example.segments[2:]
        out.append({"answer": shown["label"], "option": options[data.labels.index(shown["label"])].text,
                    "probabilities": shown["probabilities"]})
    return out


MULTIPLE_CHOICE_KINDS = (
    TaskKind("multiple-choice", ("article", "question"), 2, Gold(("options", "label"), ("labels",), _choice_example),
             head="multiple_choice", label_columns=("labels",), piece_label_columns=(), output_keys=("logits",),
             windowed=False, choices=True, window_labels=class_labels, decode=decode_classes,
             reference=_choice_reference, write_predictions=write_lines, present=_present_choices,
             pipeline_tag="multiple-choice", auto_class="AutoModelForMultipleChoice"),
)
