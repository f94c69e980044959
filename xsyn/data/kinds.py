"""Task kinds: everything that differs between classification, regression, tagging, QA and intent +
slots, in one place.

A card names its kind (`kind = "extractive-qa"`); `KINDS[card.kind]` (also `card.task_kind`) is the
`TaskKind` that every stage asks instead of testing the name:

| stage            | asks the kind for                                                                  |
|------------------|------------------------------------------------------------------------------------|
| cards, readers   | the segments; its gold form: the roles a row carries and the label sets it needs    |
| rows             | the example a row makes (`gold.build`, from the checks in `xsyn.data.rows`)        |
| features         | whether long inputs become windows, the QA question cap, each window's labels      |
| batches          | the label columns, and which of them hold one value per piece                      |
| model            | the head (`xsyn.models.heads`; the head sizes itself from the label sets)          |
| decoding         | the model outputs it reads, outputs -> one prediction per example, the gold        |
| evaluation       | the prediction file in the benchmark's own layout (`write_predictions`)             |
| predict, publish | what `xsyn predict` prints per example (`present`), the hub's pipeline tag and     |
|                  | Auto class                                                                         |

Adding a kind is adding one `TaskKind` to the `KINDS` registry (with its head in `xsyn.models.heads` and its
metric in `xsyn.metrics`), here or, from another package, through the entry-point group `xsyn.task_kinds`; an
unknown kind in a card is a `CardError`. A metric that scores something other
than tags (CGED: error triples) is a form of the tagging kind.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xsyn.data.example import UNANSWERABLE, Example
from xsyn.data.prediction_files import (
    write_answers,
    write_answers_or_none,
    write_intent_slots,
    write_lines,
    write_tags,
)
from xsyn.data.rows import (
    GoldRow,
    RowError,
    answers_in,
    class_label,
    option_segments,
    score_value,
    tags_per_token,
    text_segments,
    token_segment,
)
from xsyn.models.defaults import IGNORE_INDEX
from xsyn.utils.registry import Registry

if TYPE_CHECKING:
    import numpy as np

    from xsyn.data.decode import DecodeInput

# numpy, the decoding helpers and the metrics are imported by the functions that use them: reading a card
# (which validates its kind here) stays light, so `xsyn tasks` starts as fast as `xsyn --help`.


@dataclass(frozen=True)
class Gold:
    """A kind's gold form: the roles a row carries beside its segments, the card's label sets it needs
    (`labels`, `tags`; a regression needs `score_range`), and the example a row makes."""

    roles: tuple[str, ...]
    label_sets: tuple[str, ...]
    build: Callable[[GoldRow], Example]


@dataclass(frozen=True)
class WindowGold:
    """The gold of one example as its windows' label columns are cut from it."""

    label: int  # class or intent id (IGNORE_INDEX when there is none)
    piece_tags: np.ndarray | None  # tag id per piece of the tagged segment (first pieces), else None
    answers: Sequence[Sequence[Any]]  # QA: [text, character start] of each answer
    value: Any = None  # the example's label as it is (a regression score)


@dataclass(frozen=True)
class TaskKind:
    """What every example of a task kind carries, and how each stage treats it."""

    name: str
    segments: tuple[str, ...] | None  # fixed segment names, or None: the card names them
    n_segments: int
    gold: Gold
    head: str  # the model head (`xsyn.models.heads.HEAD_CLASSES`)
    label_columns: tuple[str, ...]  # the feature columns the head's loss reads
    piece_label_columns: tuple[str, ...]  # those with one value per piece (padded with IGNORE_INDEX)
    output_keys: tuple[str, ...]  # the model outputs decoding reads
    windowed: bool  # long inputs become windows over the last segment (else they are truncated)
    window_labels: Callable[[WindowGold, Any, int], dict[str, Any]]  # (gold, window's tree, last segment)
    decode: Callable[[DecodeInput], list[Any]]
    reference: Callable[[Example, str], Any]  # (example, metric) -> the gold as the metric scores it
    write_predictions: Callable[[Path, Sequence[Example], Sequence[Any], str], Path]  # (stem, ..., metric)
    present: Callable[[DecodeInput], list[dict[str, Any]]]  # what `xsyn predict` gives per example
    caps_query: bool = False  # the segments before the windowed one keep at most max_query_length pieces
    choices: bool = False  # segments after the fixed ones are options: one sequence each, all in one feature
    pipeline_tag: str = ""  # the Hugging Face hub's task of a published model
    auto_class: str | None = None  # the transformers Auto class that loads the model, where one does
    head_config: Mapping[str, Any] = field(default_factory=dict)  # fixed head settings (a regression's)

    def head_settings(self, labels: Sequence[str], tags: Sequence[str]) -> dict[str, Any]:
        """`build_model` keywords for the head: fixed ones, else sized from the run's label and tag names."""
        from xsyn.models.factory import label_settings

        return dict(self.head_config) if self.head_config else label_settings(self.head, labels, tags)

    @property
    def tagged(self) -> bool:
        """Whether examples are gold tokens with a tag each (input is tokenised; tags are a label set)."""
        return "tags" in self.gold.label_sets


# -- gold forms: a row -> an example -----------------------------------------------------------------


def _label_example(row: GoldRow) -> Example:
    return Example(row.uid, text_segments(row), label=class_label(row))


def _score_example(row: GoldRow) -> Example:
    return Example(row.uid, text_segments(row), label=score_value(row))


def _tag_example(row: GoldRow) -> Example:
    segment = token_segment(row)
    errors = row.values.get("errors")
    return Example(row.uid, [segment], tags=tags_per_token(row, len(segment.tokens or [])),
                   errors=None if errors is None else [tuple(e) for e in errors])


def _intent_slot_example(row: GoldRow) -> Example:
    segment = token_segment(row)
    return Example(row.uid, [segment], label=class_label(row), tags=tags_per_token(row, len(segment.tokens or [])))


def _choice_example(row: GoldRow) -> Example:
    """RACE: the passage and question segments, then one segment per option; the label is the answer's letter."""
    return Example(row.uid, text_segments(row) + option_segments(row), label=class_label(row))


def _answer_example(row: GoldRow) -> Example:
    segments = text_segments(row)
    answers = answers_in(row, segments[-1].text or "")
    if not answers and row.labelled:
        raise RowError("a question without answers (the card does not list this split in unlabelled_splits)")
    return Example(row.uid, segments, answers=answers)


def _answer_or_none_example(row: GoldRow) -> Example:
    """SQuAD 2.0: answers, or none for a question marked impossible (a hub row without answers is one)."""
    segments = text_segments(row)
    answers = answers_in(row, segments[-1].text or "")
    impossible = row.values.get("impossible")
    if impossible and answers:
        raise RowError(f"is_impossible is true but the question has {len(answers)} answer(s); a question "
                       "without an answer lists its guesses under plausible_answers")
    if impossible is False and not answers and row.labelled:
        raise RowError("is_impossible is false but the question has no answers")
    if answers or not row.labelled:
        return Example(row.uid, segments, answers=answers)
    return Example(row.uid, segments, label=UNANSWERABLE)


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


def _score_labels(gold: WindowGold, tree, last_segment: int) -> dict[str, Any]:
    return {"labels": float("nan") if gold.value is None else float(gold.value)}


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


def _decode_scores(data: DecodeInput) -> list[Any]:
    from xsyn.data.decode import mean_logits

    return [float(mean_logits(data.outputs["logits"], w).reshape(-1)[0]) for w in data.windows]


def _decode_tags(data: DecodeInput) -> list[Any]:
    return [_tag_form(t, data.metric) for t in _token_tags(data, "logits")]


def _decode_intent_slots(data: DecodeInput) -> list[Any]:
    return list(zip(_argmax_labels(data, "intent_logits"), _token_tags(data, "slot_logits")))


def _spans(data: DecodeInput) -> list[tuple[float, int, int] | None]:
    from xsyn.data.decode import best_span

    return [best_span(w, data.outputs["start_logits"], data.outputs["end_logits"], data.n_best,
                      data.max_answer_length) for w in data.windows]


def _decode_answers(data: DecodeInput) -> list[Any]:
    answers = [(e.segments[-1].text or "")[s[1]:s[2]] if s else "" for e, s in zip(data.examples, _spans(data))]
    data.report.empty_answers = sum(1 for a in answers if not a)
    return answers


def _answers_or_none(data: DecodeInput) -> list[tuple[str, float]]:
    """(answer, no-answer score) per question: the best span, or "" when [CLS] outscores it; the score
    is the null score minus the best span's (the official SQuAD 2.0 script's `na_prob`, which it
    thresholds for best_exact / best_f1)."""
    from xsyn.data.decode import null_score

    out = []
    for example, windows, span in zip(data.examples, data.windows, _spans(data)):
        null = null_score(windows, data.outputs["start_logits"], data.outputs["end_logits"])
        if span is None:
            out.append(("", float("inf")))
            continue
        text = (example.segments[-1].text or "")[span[1]:span[2]] if span[0] >= null else ""
        out.append((text, null - span[0]))
    data.report.empty_answers = sum(1 for text, _ in out if not text)
    return out


def _class_reference(example: Example, metric: str) -> Any:
    return example.label


def _choice_reference(example: Example, metric: str) -> Any:
    """The answer, and for a score per subset (RACE-M, RACE-H) the subset: the id's leading word
    (RACE's files and hub ids are named middle*/high*)."""
    import re

    subset = re.match(r"[^\W\d_]*", example.id).group(0)
    return (example.label, subset) if metric == "subset_accuracy" else example.label


def _tag_reference(example: Example, metric: str) -> Any:
    if metric == "cged" and example.errors is not None:  # the released errors, overlaps included
        return set(example.errors)
    return _tag_form(example.tags or [], metric)


def _intent_slot_reference(example: Example, metric: str) -> Any:
    return example.label, example.tags


def _answer_reference(example: Example, metric: str) -> Any:
    return [a.text for a in example.answers]


# -- what `xsyn predict` gives per example -----------------------------------------------------------


def _probabilities(logits: np.ndarray, names: Sequence[str]) -> dict[str, float]:
    import numpy as np

    shifted = np.exp(logits - logits.max())
    return {name: round(float(p), 6) for name, p in zip(names, shifted / shifted.sum())}


def _entities(tags: list[str], spans: Sequence[tuple[int, int]], text: str) -> list[dict[str, Any]]:
    from xsyn.metrics.entities import entity_spans

    found = sorted(entity_spans(tags), key=lambda e: (e[1], e[2]))
    return [{"type": kind, "text": text[spans[start][0]:spans[end - 1][1]], "start": spans[start][0],
             "end": spans[end - 1][1], "token_start": start, "token_end": end} for kind, start, end in found]


def _tokens(data: DecodeInput, i: int, key: str) -> tuple[list[dict[str, Any]], list[str]]:
    from xsyn.data.decode import token_tags

    spans, text = data.token_spans[i], data.texts[i]
    predicted = token_tags(len(spans), data.windows[i], data.outputs[key], data.tags, data.report)
    return [{"text": text[s:e], "start": s, "end": e, "tag": tag} for (s, e), tag in zip(spans, predicted)], predicted


def _present_classes(data: DecodeInput) -> list[dict[str, Any]]:
    from xsyn.data.decode import mean_logits

    out = []
    for w in data.windows:
        logits = mean_logits(data.outputs["logits"], w)
        out.append({"label": data.labels[int(logits.argmax())], "probabilities": _probabilities(logits, data.labels)})
    return out


def _present_choices(data: DecodeInput) -> list[dict[str, Any]]:
    """The answer's label and option text, and each option's probability (softmax over the options)."""
    out = []
    for example, shown in zip(data.examples, _present_classes(data)):
        options = example.segments[2:]
        out.append({"answer": shown["label"], "option": options[data.labels.index(shown["label"])].text,
                    "probabilities": shown["probabilities"]})
    return out


def _present_scores(data: DecodeInput) -> list[dict[str, Any]]:
    return [{"score": round(score, 6)} for score in _decode_scores(data)]


def _present_entities(data: DecodeInput) -> list[dict[str, Any]]:
    out = []
    for i in range(len(data.windows)):
        tokens, tags = _tokens(data, i, "logits")
        out.append({"tokens": tokens, "entities": _entities(tags, data.token_spans[i], data.texts[i])})
    return out


def _present_tags(data: DecodeInput) -> list[dict[str, Any]]:
    return [{"tokens": _tokens(data, i, "logits")[0]} for i in range(len(data.windows))]


def _present_answers(data: DecodeInput) -> list[dict[str, Any]]:
    out = []
    for example, span in zip(data.examples, _spans(data)):
        if span is None:
            out.append({"answer": "", "start": None, "end": None, "score": None})
            continue
        score, start, end = span
        out.append({"answer": (example.segments[-1].text or "")[start:end], "start": start, "end": end,
                    "score": round(score, 6)})
    return out


def _present_answers_or_none(data: DecodeInput) -> list[dict[str, Any]]:
    """The best span as for SQuAD 1, plus `no_answer` (the [CLS] null answer won) and its score margin."""
    out = []
    for shown, (text, margin) in zip(_present_answers(data), _answers_or_none(data)):
        no_answer = not text
        out.append({**shown, **({"answer": "", "start": None, "end": None} if no_answer else {}),
                    "no_answer": no_answer, "no_answer_margin": None if margin == float("inf") else round(margin, 6)})
    return out


def _present_intent_slots(data: DecodeInput) -> list[dict[str, Any]]:
    from xsyn.data.decode import mean_logits

    out = []
    for i, w in enumerate(data.windows):
        logits = mean_logits(data.outputs["intent_logits"], w)
        tokens, tags = _tokens(data, i, "slot_logits")
        out.append({"intent": data.labels[int(logits.argmax())],
                    "intent_probabilities": _probabilities(logits, data.labels), "tokens": tokens,
                    "slots": _entities(tags, data.token_spans[i], data.texts[i])})
    return out


# -- the kinds ---------------------------------------------------------------------------------------

_LABEL = Gold(("label",), ("labels",), _label_example)


def _sentences(name: str, n_segments: int, gold: Gold, decode, present, **kind: Any) -> TaskKind:
    """A kind with one output per example from the pooled [CLS] (its segments named by the card)."""
    return TaskKind(name, None, n_segments, gold, head="sequence", label_columns=("labels",),
                    piece_label_columns=(), output_keys=("logits",), windowed=False, decode=decode,
                    reference=_class_reference, write_predictions=write_lines, present=present,
                    pipeline_tag="text-classification", auto_class="AutoModelForSequenceClassification", **kind)


def _tagging(name: str, present) -> TaskKind:
    """A tag per gold token, predicted on its first piece (XTREME's labelling)."""
    return TaskKind(name, ("tokens",), 1, Gold(("tags",), ("tags",), _tag_example), head="token",
                    label_columns=("labels",), piece_label_columns=("labels",), output_keys=("logits",),
                    windowed=True, window_labels=_tag_labels, decode=_decode_tags, reference=_tag_reference,
                    write_predictions=write_tags, present=present, pipeline_tag="token-classification",
                    auto_class="AutoModelForTokenClassification")


def _extractive(name: str, gold: Gold, decode, write_predictions, present) -> TaskKind:
    """Start and end logits over the context's pieces; long contexts become windows."""
    return TaskKind(name, ("question", "context"), 2, gold, head="qa",
                    label_columns=("start_positions", "end_positions"), piece_label_columns=(),
                    output_keys=("start_logits", "end_logits"), windowed=True, caps_query=True,
                    window_labels=_answer_labels, decode=decode, reference=_answer_reference,
                    write_predictions=write_predictions, present=present, pipeline_tag="question-answering",
                    auto_class="AutoModelForQuestionAnswering")


# Every task kind by name; another package adds one (a `TaskKind`, its metric through `xsyn.metrics`) through the
# entry-point group `xsyn.task_kinds`, and its cards may then name it.
KINDS: Registry[TaskKind] = Registry("task kind", {kind.name: kind for kind in (
    _sentences("single-classification", 1, _LABEL, _decode_classes, _present_classes, window_labels=_class_labels),
    _sentences("pair-classification", 2, _LABEL, _decode_classes, _present_classes, window_labels=_class_labels),
    # STS-B: one output from [CLS], MSE loss (the sequence head with one label regresses)
    _sentences("pair-regression", 2, Gold(("label",), ("score_range",), _score_example), _decode_scores,
               _present_scores, window_labels=_score_labels,
               head_config={"num_labels": 1, "problem_type": "regression"}),
    _tagging("token-classification", _present_entities),
    _tagging("pos-tagging", _present_tags),
    # FCE: a correct / incorrect tag per token, scored on the error class
    _tagging("token-detection", _present_tags),
    _extractive("extractive-qa", Gold(("answers",), (), _answer_example), _decode_answers, write_answers,
                _present_answers),
    # SQuAD 2.0: the null answer is the [CLS] span
    _extractive("extractive-qa-v2", Gold(("answers", "impossible"), (), _answer_or_none_example), _answers_or_none,
                write_answers_or_none, _present_answers_or_none),
    # RACE: passage + question + each option as one sequence (the passage alone truncated), one score per
    # option, softmax over the options
    TaskKind("multiple-choice", ("article", "question"), 2, Gold(("options", "label"), ("labels",), _choice_example),
             head="multiple_choice", label_columns=("labels",), piece_label_columns=(), output_keys=("logits",),
             windowed=False, choices=True, window_labels=_class_labels, decode=_decode_classes,
             reference=_choice_reference, write_predictions=write_lines, present=_present_choices,
             pipeline_tag="multiple-choice", auto_class="AutoModelForMultipleChoice"),
    TaskKind("intent-slot", ("tokens",), 1, Gold(("label", "tags"), ("labels", "tags"), _intent_slot_example),
             head="intent_slot", label_columns=("intent_labels", "slot_labels"), piece_label_columns=("slot_labels",),
             output_keys=("intent_logits", "slot_logits"), windowed=True,
             window_labels=_intent_slot_labels, decode=_decode_intent_slots, reference=_intent_slot_reference,
             write_predictions=write_intent_slots, present=_present_intent_slots,
             pipeline_tag="token-classification"),
)}, group="xsyn.task_kinds", of=TaskKind, name_of=lambda kind: kind.name)


# Over every registered kind: what a batch may carry as gold, which of it is per piece, what a model may output.

def label_columns() -> tuple[str, ...]:
    return tuple(dict.fromkeys(c for kind in KINDS.values() for c in kind.label_columns))


def piece_label_columns() -> tuple[str, ...]:
    return tuple(dict.fromkeys(c for kind in KINDS.values() for c in kind.piece_label_columns))


def output_keys() -> tuple[str, ...]:
    return tuple(dict.fromkeys(k for kind in KINDS.values() for k in kind.output_keys))

