"""Task kinds: everything that differs between classification, tagging, QA and intent + slots, in one place.

A card names its kind (`kind = "extractive-qa"`); `KINDS[card.kind]` (also `card.spec`) is the
`TaskKind` that every stage asks instead of testing the name:

| stage            | asks the kind for                                                              |
|------------------|--------------------------------------------------------------------------------|
| cards, readers   | the segments and what a row carries (`label`, `tags`, `answers`)               |
| features         | whether long inputs become windows, the QA question cap, each window's labels  |
| batches          | the label columns, and which of them hold one value per piece                  |
| model            | the head (`xsyn.models.factory.label_settings` sizes it from the label sets)    |
| decoding         | the model outputs it reads, outputs -> one prediction per example, the gold    |
| evaluation       | the prediction file in the benchmark's own layout (`write_predictions`)         |
| predict, publish | the tagged segment (`tags`), the head, the hub's pipeline tag and Auto class   |

Adding a kind is adding one `TaskKind` to `KINDS`; an unknown kind in a card is a `CardError`.
A metric that scores something other than tags (CGED: error triples) is a form of the tagging kind.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xsyn.data.example import Example
from xsyn.models.defaults import IGNORE_INDEX
from xsyn.utils.io import atomic_write_json, atomic_write_text

if TYPE_CHECKING:
    import numpy as np

    from xsyn.data.decode import DecodeInput

# numpy, the decoders and the metrics are imported by the functions that use them: reading a card (which
# validates its kind here) stays light, so `xsyn tasks` starts as fast as `xsyn --help`.


@dataclass(frozen=True)
class WindowGold:
    """The gold of one example as its windows' label columns are cut from it."""

    label: int  # class or intent id (IGNORE_INDEX when there is none)
    piece_tags: np.ndarray | None  # tag id per piece of the tagged segment (first pieces), else None
    answers: Sequence[Sequence[Any]]  # QA: [text, character start] of each answer


@dataclass(frozen=True)
class TaskKind:
    """What every example of a task kind carries, and how each stage treats it."""

    name: str
    segments: tuple[str, ...] | None  # fixed segment names, or None: the card names them
    n_segments: int
    label: bool  # a class (or intent) per example
    tags: bool  # a tag per gold token of the (only) segment
    answers: bool  # answer spans in the last segment
    head: str  # the model head (`xsyn.models.heads.HEAD_CLASSES`)
    label_columns: tuple[str, ...]  # the feature columns the head's loss reads
    piece_label_columns: tuple[str, ...]  # those with one value per piece (padded with IGNORE_INDEX)
    output_keys: tuple[str, ...]  # the model outputs decoding reads
    windowed: bool  # long inputs become windows over the last segment (else they are truncated)
    window_labels: Callable[[WindowGold, Any, int], dict[str, Any]]  # (gold, window's tree, last segment)
    decode: Callable[[DecodeInput], list[Any]]
    reference: Callable[[Example, str], Any]  # (example, metric) -> the gold as the metric scores it
    write_predictions: Callable[[Path, Sequence[Example], Sequence[Any], str], Path]  # (stem, ..., metric)
    caps_query: bool = False  # the segments before the windowed one keep at most max_query_length pieces
    pipeline_tag: str = ""  # the Hugging Face hub's task of a published model
    auto_class: str | None = None  # the transformers Auto class that loads the model, where one does


# -- labels of one window --------------------------------------------------------------------------


def window_piece_labels(piece_labels: np.ndarray, segment_id: np.ndarray, window: tuple[int, int]) -> np.ndarray:
    """The labels of one window's sequence: the windowed segment's pieces, IGNORE_INDEX on specials."""
    import numpy as np

    out = np.full(len(segment_id), IGNORE_INDEX, dtype=np.int64)
    out[segment_id == 0] = piece_labels[window[0]:window[1]]
    return out


def answer_positions(source: np.ndarray, segment_id: np.ndarray, context: int,
                     answers: Sequence[Sequence[Any]]) -> tuple[int, int]:
    """Sequence positions of the first answer's first and last piece, or (0, 0) when the window
    does not hold the whole answer (or there is none)."""
    import numpy as np

    if not answers:
        return 0, 0
    text, start = answers[0]
    end = start + len(text)
    positions = np.flatnonzero(segment_id == context)
    starts, ends = source[positions, 0], source[positions, 1]
    inside = positions[(ends > start) & (starts < end)]
    if len(inside) == 0 or starts.min() > start or ends.max() < end:
        return 0, 0
    return int(inside[0]), int(inside[-1])


def _class_labels(gold: WindowGold, tree, last_segment: int) -> dict[str, Any]:
    return {"labels": gold.label}


def _tag_labels(gold: WindowGold, tree, last_segment: int) -> dict[str, Any]:
    return {"labels": window_piece_labels(gold.piece_tags, tree.segment_id, tree.window)}


def _intent_slot_labels(gold: WindowGold, tree, last_segment: int) -> dict[str, Any]:
    return {"intent_labels": gold.label,
            "slot_labels": window_piece_labels(gold.piece_tags, tree.segment_id, tree.window)}


def _answer_labels(gold: WindowGold, tree, last_segment: int) -> dict[str, Any]:
    start, end = answer_positions(tree.source, tree.segment_id, last_segment, gold.answers)
    return {"start_positions": start, "end_positions": end, "answer_outside": int(bool(gold.answers) and start == 0)}


# -- decoding and gold -----------------------------------------------------------------------------


def _argmax_labels(data: DecodeInput, key: str) -> list[str]:
    import numpy as np

    from xsyn.data.decode import mean_logits

    return [data.labels[int(np.argmax(mean_logits(data.outputs[key], w)))] for w in data.windows]


def _tag_form(tags: list[str], metric: str) -> Any:
    """Tags as the metric scores them: CGED scores the error triples the tags spell."""
    from xsyn.metrics.cged import errors_from_tags

    return errors_from_tags(tags) if metric == "cged" else tags


def _token_tags(data: DecodeInput, key: str) -> list[list[str]]:
    from xsyn.data.decode import token_tags

    return [token_tags(len(e.segments[0].tokens or []), w, data.outputs[key], data.tags, data.report)
            for e, w in zip(data.examples, data.windows)]


def _decode_classes(data: DecodeInput) -> list[Any]:
    return _argmax_labels(data, "logits")


def _decode_tags(data: DecodeInput) -> list[Any]:
    return [_tag_form(t, data.metric) for t in _token_tags(data, "logits")]


def _decode_intent_slots(data: DecodeInput) -> list[Any]:
    return list(zip(_argmax_labels(data, "intent_logits"), _token_tags(data, "slot_logits")))


def _decode_answers(data: DecodeInput) -> list[Any]:
    from xsyn.data.decode import best_answer

    answers = [best_answer(e.segments[-1].text or "", w, data.outputs["start_logits"], data.outputs["end_logits"],
                           data.n_best, data.max_answer_length) for e, w in zip(data.examples, data.windows)]
    data.report.empty_answers = sum(1 for a in answers if not a.text)
    return [a.text for a in answers]


def _class_reference(example: Example, metric: str) -> Any:
    return example.label


def _tag_reference(example: Example, metric: str) -> Any:
    if metric == "cged" and example.errors is not None:  # the released errors, overlaps included
        return set(example.errors)
    return _tag_form(example.tags or [], metric)


def _intent_slot_reference(example: Example, metric: str) -> Any:
    return example.label, example.tags


def _answer_reference(example: Example, metric: str) -> Any:
    return [a.text for a in example.answers]


# -- prediction files, in each benchmark's own layout (XTREME's, NLPTEA's) --------------------------


def _write_lines(stem: Path, examples: Sequence[Example], predictions: Sequence[Any], metric: str) -> Path:
    """One label per line."""
    path = stem.with_name(stem.name + ".tsv")
    atomic_write_text(path, "".join(f"{p}\n" for p in predictions))
    return path


def _write_tags(stem: Path, examples: Sequence[Example], predictions: Sequence[Any], metric: str) -> Path:
    """One tag per line, a blank line between sentences; CGED: NLPTEA's `id, start, end, type` lines
    (`id, correct` for a sentence without errors), in a .txt file."""
    path = stem.with_name(stem.name + (".txt" if metric == "cged" else ".tsv"))
    if metric == "cged":  # the NLPTEA scorer's input, in example order
        lines = [line for e, errors in zip(examples, predictions)
                 for line in [f"{e.id}, {s}, {end}, {t}" for s, end, t in sorted(errors)] or [f"{e.id}, correct"]]
        text = "".join(line + "\n" for line in lines)
    else:
        text = "".join("".join(t + "\n" for t in tags) + "\n" for tags in predictions)
    atomic_write_text(path, text)
    return path


def _write_intent_slots(stem: Path, examples: Sequence[Example], predictions: Sequence[Any], metric: str) -> Path:
    """The intent, a tab, the slot tags separated by spaces."""
    path = stem.with_name(stem.name + ".tsv")
    atomic_write_text(path, "".join(f"{intent}\t{' '.join(tags)}\n" for intent, tags in predictions))
    return path


def _write_answers(stem: Path, examples: Sequence[Example], predictions: Sequence[Any], metric: str) -> Path:
    """XTREME's {question id: answer text}."""
    path = stem.with_name(stem.name + ".json")
    atomic_write_json(path, {e.id: p for e, p in zip(examples, predictions)})
    return path


def _classification(name: str, n_segments: int) -> TaskKind:
    return TaskKind(name, None, n_segments, label=True, tags=False, answers=False, head="sequence",
                    label_columns=("labels",), piece_label_columns=(), output_keys=("logits",), windowed=False,
                    window_labels=_class_labels, decode=_decode_classes, reference=_class_reference,
                    write_predictions=_write_lines, pipeline_tag="text-classification",
                    auto_class="AutoModelForSequenceClassification")


def _tagging(name: str) -> TaskKind:
    """A tag per gold token, predicted on its first piece (XTREME's labelling)."""
    return TaskKind(name, ("tokens",), 1, label=False, tags=True, answers=False, head="token",
                    label_columns=("labels",), piece_label_columns=("labels",), output_keys=("logits",),
                    windowed=True, window_labels=_tag_labels, decode=_decode_tags, reference=_tag_reference,
                    write_predictions=_write_tags, pipeline_tag="token-classification",
                    auto_class="AutoModelForTokenClassification")


KINDS: dict[str, TaskKind] = {kind.name: kind for kind in (
    _classification("single-classification", 1),
    _classification("pair-classification", 2),
    _tagging("token-classification"),
    _tagging("pos-tagging"),
    TaskKind("extractive-qa", ("question", "context"), 2, label=False, tags=False, answers=True, head="qa",
             label_columns=("start_positions", "end_positions"), piece_label_columns=(),
             output_keys=("start_logits", "end_logits"), windowed=True, caps_query=True,
             window_labels=_answer_labels, decode=_decode_answers, reference=_answer_reference,
             write_predictions=_write_answers, pipeline_tag="question-answering",
             auto_class="AutoModelForQuestionAnswering"),
    TaskKind("intent-slot", ("tokens",), 1, label=True, tags=True, answers=False, head="intent_slot",
             label_columns=("intent_labels", "slot_labels"), piece_label_columns=("slot_labels",),
             output_keys=("intent_logits", "slot_logits"), windowed=True,
             window_labels=_intent_slot_labels, decode=_decode_intent_slots, reference=_intent_slot_reference,
             write_predictions=_write_intent_slots, pipeline_tag="token-classification"),
)}

# Over every kind: what a batch may carry as gold, which of it is per piece, and what a model may output.
LABEL_COLUMNS = tuple(dict.fromkeys(c for kind in KINDS.values() for c in kind.label_columns))
PIECE_LABEL_COLUMNS = tuple(dict.fromkeys(c for kind in KINDS.values() for c in kind.piece_label_columns))
OUTPUT_KEYS = tuple(dict.fromkeys(k for kind in KINDS.values() for k in kind.output_keys))
