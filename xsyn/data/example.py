"""One example schema for every task.

An example is a list of text segments (one for single-sentence and tagging tasks; two for pairs:
premise/hypothesis, sentence1/sentence2, question/context) plus its gold annotation. A segment
carries raw text (parsed as raw text) or gold tokens (pre-tokenised tasks: NER, slots; parsed
pre-tokenised and scored on the gold tokens), and its own language, which is what makes
generalized (cross-language pair) evaluation a matter of pairing segments.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xsyn.syntax.segment import Segment

UNANSWERABLE = "unanswerable"


@dataclass
class Answer:
    """An extractive-QA answer: its text and character offset in the context segment."""

    text: str
    start: int


@dataclass
class Example:
    id: str
    segments: list[Segment]
    # the class label, the intent of intent-slot tasks, a regression score (float), or UNANSWERABLE for an
    # extractive-QA question its dataset marks as having no answer (SQuAD 2.0)
    label: str | float | None = None
    tags: list[str] | None = None  # one BIO tag per gold token of the tokenised segment
    answers: list[Answer] = field(default_factory=list)  # extractive QA (context = last segment)
    # CGED gold errors (start, end, type), NLPTEA 1-based inclusive offsets: kept whole because BIO
    # `tags` cannot hold errors that overlap, and the NLPTEA scores count every one
    errors: list[tuple[int, int, str]] | None = None

    @property
    def langs(self) -> list[str]:
        return [s.lang for s in self.segments]


def has_gold(example: Example) -> bool:
    """Whether an example carries an annotation to score (a split released without labels does not)."""
    return example.label is not None or example.tags is not None or bool(example.answers)


def label_balanced(examples: list[Example], limit: int) -> list[Example]:
    """At most `limit` examples, as many of each class label as `limit` allows (the labels in turn, each label's
    examples in file order; the result in file order), so that a capped split keeps every class: the first N
    of a test set can be 11:5. Examples without a class label each (tags, answers, scores) are cut to the first N."""
    if limit >= len(examples) or not all(isinstance(e.label, str) for e in examples):
        return examples[:limit]
    by_label: dict[str, list[int]] = {}
    for index, example in enumerate(examples):
        by_label.setdefault(example.label, []).append(index)  # type: ignore[arg-type]
    queues, chosen = [iter(indices) for indices in by_label.values()], []
    while len(chosen) < limit:
        turn = [index for index in (next(queue, None) for queue in queues) if index is not None]
        chosen += turn[:limit - len(chosen)]
    return [examples[index] for index in sorted(chosen)]
