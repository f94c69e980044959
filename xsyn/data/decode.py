"""Model outputs -> one prediction per example, in the form the card's metric scores.

    predictions, report = decode(card.task_kind, examples, features, outputs, metric=card.metric,
                                 labels=..., tags=...)
    scores = xsyn.metrics.compute(card.metric, predictions, references(card.task_kind, examples, card.metric),
                                  **metric_options(card.metric, examples, labels))

`outputs` holds one array per feature, in the order of `features` (padded batches are fine: each is
cut to its feature's length): the outputs the kind names (`logits`, `start_logits` and `end_logits`,
`intent_logits` and `slot_logits`). The kind (`xsyn.data.kinds`) turns them into predictions with
the helpers here, which know windows but no kind and no card:

| helper         | what                                                                            |
|----------------|---------------------------------------------------------------------------------|
| `mean_logits`  | an example's logits over its windows (classification, regression, intents)      |
| `token_tags`   | one tag per gold token, from its first piece                                    |
| `best_span`    | the answer: best start+end over every window's n-best, at most                  |
|                | `max_answer_length` pieces, cut from the context by the pieces' spans           |
| `null_score`   | the no-answer score ([CLS] start + end), the lowest over the windows (SQuAD 2.0) |

A token seen by several windows takes its tag from the window where its first piece has the most
context on both sides. A gold token that got no piece at all is predicted `O` and counted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from xsyn.data.example import Example, has_gold
from xsyn.utils.errors import InputError

_FEATURE_COLUMNS = ("example_index", "window_start", "window_end", "tree_segment", "source_start", "source_end")


@dataclass
class DecodeReport:
    examples: int = 0
    features: int = 0
    tokens_without_piece: int = 0  # gold tokens no window held a piece of: predicted "O"
    empty_answers: int = 0  # QA examples without a valid span in any window: predicted ""


@dataclass(frozen=True)
class Window:
    feature: int  # row in `features` and in the outputs
    start: int  # window_start: the windowed segment's first piece in this window
    end: int
    positions: np.ndarray  # sequence positions of the windowed (last) segment's pieces
    source_start: np.ndarray  # per position above
    source_end: np.ndarray


@dataclass(frozen=True)
class DecodeInput:
    """What decoding one split needs: the examples, their windows and the model outputs per feature;
    `xsyn predict` adds each tagged example's token spans in its input text."""

    examples: Sequence[Example]
    windows: list[list[Window]]
    outputs: Mapping[str, Any]
    labels: Sequence[str]
    tags: Sequence[str]
    metric: str
    n_best: int
    max_answer_length: int
    report: DecodeReport
    token_spans: Sequence[Sequence[tuple[int, int]]] = field(default_factory=list)
    texts: Sequence[str] = field(default_factory=list)


class DecodingKind(Protocol):
    """What decoding asks of a task kind (`xsyn.data.kinds.TaskKind`)."""

    n_segments: int
    decode: Callable[[DecodeInput], list[Any]]
    reference: Callable[[Example, str], Any]


def decode(kind: DecodingKind, examples: Sequence[Example], features, outputs: Mapping[str, Any], *, metric: str,
           labels: Sequence[str] = (), tags: Sequence[str] = (), n_best: int = 20,
           max_answer_length: int = 30) -> tuple[list[Any], DecodeReport]:
    """One metric-ready prediction per example (see the module table): the kind decodes."""
    windows = example_windows(features, len(examples), last_segment=kind.n_segments - 1)
    report = DecodeReport(examples=len(examples), features=sum(len(w) for w in windows))
    predictions = kind.decode(DecodeInput(examples, windows, outputs, labels, tags, metric, n_best,
                                          max_answer_length, report))
    return predictions, report


def references(kind: DecodingKind, examples: Sequence[Example], metric: str, task: str = "") -> list[Any]:
    """The gold of each example, in the form the metric scores (`task` names it in the error)."""
    missing = sum(1 for e in examples if not has_gold(e))
    if missing:
        raise InputError(f"{task or metric}: {missing} of {len(examples)} examples have no gold labels (a split "
                         "released without them); they cannot be scored")
    return [kind.reference(e, metric) for e in examples]


def metric_options(metric: str, examples: Sequence[Example], labels: Sequence[str] = ()) -> dict[str, Any]:
    """Options the metric needs: MLQA normalises by the context (answer) language; accuracy + F1
    scores F1 of the positive class, the second of two labels (GLUE's 1: MRPC's `equivalent`)."""
    if metric == "accuracy_f1":
        if len(labels) != 2:
            raise ValueError(f"accuracy_f1 scores F1 of a binary task's second label; got labels {list(labels)}")
        return {"positive": labels[1]}
    if metric != "mlqa":
        return {}
    langs = {e.segments[-1].lang for e in examples}
    if len(langs) != 1:
        raise ValueError(f"score one context language at a time, got {', '.join(sorted(langs))}")
    return {"lang": langs.pop()}


# -- windows ---------------------------------------------------------------------------------------


def example_windows(features, n_examples: int, last_segment: int = 0) -> list[list[Window]]:
    """The features of each example (in window order), with the windowed segment's positions."""
    columns = _columns(features)
    out: list[list[Window]] = [[] for _ in range(n_examples)]
    for row in range(len(columns["example_index"])):
        segment = np.asarray(columns["tree_segment"][row])
        positions = np.flatnonzero(segment == last_segment)
        out[columns["example_index"][row]].append(Window(
            row, columns["window_start"][row], columns["window_end"][row], positions,
            np.asarray(columns["source_start"][row])[positions], np.asarray(columns["source_end"][row])[positions]))
    empty = [i for i, w in enumerate(out) if not w]
    if empty:
        raise ValueError(f"{len(empty)} examples have no feature (first: example {empty[0]}); decode the "
                         "features prepared from these same examples")
    return out


def _columns(features) -> dict[str, list]:
    if hasattr(features, "select_columns"):  # a datasets.Dataset
        return features.select_columns(list(_FEATURE_COLUMNS)).to_dict()
    return {name: [f[name] for f in features] for name in _FEATURE_COLUMNS}


def mean_logits(logits: Any, windows: list[Window]) -> np.ndarray:
    """An example's logits: the mean over its windows (one window for classification)."""
    return np.mean([np.asarray(logits[w.feature], dtype=np.float64) for w in windows], axis=0)


def _context_score(piece: int, window: Window) -> int:
    """How much context a piece has in a window: its distance to the nearer window edge."""
    return min(piece - window.start, window.end - 1 - piece)


# -- tagging ---------------------------------------------------------------------------------------


def token_tags(n_tokens: int, windows: list[Window], logits: Any, tags: Sequence[str],
               report: DecodeReport) -> list[str]:
    """One tag per gold token, from its first piece in the window where that piece sees most context."""
    first_piece = np.full(n_tokens, np.iinfo(np.int64).max, dtype=np.int64)
    for w in windows:
        pieces = w.start + np.arange(len(w.positions))
        np.minimum.at(first_piece, w.source_start, pieces)
    predicted = ["O"] * n_tokens
    best = np.full(n_tokens, -1, dtype=np.int64)
    for w in windows:
        scores = np.asarray(logits[w.feature])
        for k, (token, position) in enumerate(zip(w.source_start, w.positions)):
            piece = w.start + k
            if piece != first_piece[token]:
                continue
            context = _context_score(piece, w)
            if context > best[token]:
                best[token] = context
                predicted[token] = tags[int(np.argmax(scores[position]))]
    report.tokens_without_piece += int((best < 0).sum())
    return predicted


# -- extractive QA ---------------------------------------------------------------------------------


def best_span(windows: list[Window], start_logits: Any, end_logits: Any, n_best: int = 20,
              max_answer_length: int = 30) -> tuple[float, int, int] | None:
    """(score, start, end) of the highest-scoring answer over all windows: character offsets into the
    context, score = start + end logit; None when no window holds a valid span.

    Candidates pair each window's `n_best` start and end pieces of the context, end not before
    start and at most `max_answer_length` pieces long; a start piece counts only in the window
    where it has the most context (so overlapping windows do not vote twice).
    """
    piece_best: dict[int, int] = {}
    for w in windows:
        for k in range(len(w.positions)):
            score = _context_score(w.start + k, w)
            piece_best[w.start + k] = max(piece_best.get(w.start + k, -1), score)
    best: tuple[float, int, int] | None = None
    for w in windows:
        starts = np.asarray(start_logits[w.feature], dtype=np.float64)[w.positions]
        ends = np.asarray(end_logits[w.feature], dtype=np.float64)[w.positions]
        for i in np.argsort(-starts, kind="stable")[:n_best]:
            if _context_score(w.start + i, w) < piece_best[w.start + i]:
                continue
            for j in np.argsort(-ends, kind="stable")[:n_best]:
                if j < i or j - i + 1 > max_answer_length:
                    continue
                score = float(starts[i] + ends[j])
                if best is None or score > best[0]:
                    best = (score, int(w.source_start[i]), int(w.source_end[j]))
    return best


def null_score(windows: list[Window], start_logits: Any, end_logits: Any) -> float:
    """The no-answer score of a question: [CLS]'s start + end logit, the lowest over its windows (the
    window that most believes an answer is in it speaks for the question), as SQuAD 2.0 baselines do."""
    return min(float(start_logits[w.feature][0]) + float(end_logits[w.feature][0]) for w in windows)
