"""Extractive QA kinds: start and end logits over the context's pieces; long contexts become windows.
SQuAD 1 style (every question has an answer) and SQuAD 2.0 (the null answer is the [CLS] span)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from xsyn.data.example import UNANSWERABLE, Example
from xsyn.data.kinds.base import Gold, TaskKind, WindowGold
from xsyn.data.prediction_files import write_answers, write_answers_or_none
from xsyn.data.rows import GoldRow, RowError, answers_in, text_segments

if TYPE_CHECKING:
    import numpy as np

    from xsyn.data.decode import DecodeInput


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


def _answer_labels(gold: WindowGold, tree, last_segment: int) -> dict[str, Any]:
    start, end = answer_positions(tree.source, tree.segment_id, last_segment, gold.answers)
    return {"start_positions": start, "end_positions": end, "answer_outside": int(bool(gold.answers) and start == 0)}


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


def _answer_reference(example: Example, metric: str) -> Any:
    return [a.text for a in example.answers]


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


def _extractive(name: str, gold: Gold, decode, write_predictions, present) -> TaskKind:
    """Start and end logits over the context's pieces; long contexts become windows."""
    return TaskKind(name, ("question", "context"), 2, gold, head="qa",
                    label_columns=("start_positions", "end_positions"), piece_label_columns=(),
                    output_keys=("start_logits", "end_logits"), windowed=True, caps_query=True,
                    window_labels=_answer_labels, decode=decode, reference=_answer_reference,
                    write_predictions=write_predictions, present=present, pipeline_tag="question-answering",
                    auto_class="AutoModelForQuestionAnswering")


EXTRACTIVE_QA_KINDS = (
    _extractive("extractive-qa", Gold(("answers",), (), _answer_example), _decode_answers, write_answers,
                _present_answers),
    # SQuAD 2.0: the null answer is the [CLS] span
    _extractive("extractive-qa-v2", Gold(("answers", "impossible"), (), _answer_or_none_example), _answers_or_none,
                write_answers_or_none, _present_answers_or_none),
)
