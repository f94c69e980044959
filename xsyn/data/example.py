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
