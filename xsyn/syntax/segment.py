"""The unit xsyn parses: a segment of text in one language, and the syntax record parsing attaches.

A segment carries raw text (parsed as raw text) or gold tokens (pre-tokenised tasks: NER, slots;
parsed pre-tokenised and scored on the gold tokens), and its own language, which is what makes
generalized (cross-language pair) evaluation a matter of pairing segments.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from xsyn.syntax.record import SyntaxRecord

_INVISIBLE = ("Cf", "Cc")  # format characters (zero-width space and joiners, BOM, marks) and controls


def is_blank(text: str | Iterable[str]) -> bool:
    """Whether a text (or every one of some tokens) shows nothing: only whitespace and invisible format
    or control characters (U+200B-U+200F, U+2060, U+FEFF, ...). Such a segment is empty: the tokenizer
    drops these characters, so it would reach the model as no pieces at all."""
    texts = [text] if isinstance(text, str) else text
    return all(ch.isspace() or unicodedata.category(ch) in _INVISIBLE for t in texts for ch in t)


@dataclass
class Segment:
    """Raw `text` or gold `tokens`; `record` is its syntax, attached by parsing (or given as gold).

    `sent_id` names the segment where its data has ids (the example's id, with `.NAME` for each
    segment of a pair): a pre-parsed CoNLL-U source uses it to choose among sentences of the same text.
    `gold_tree` is the tree the data itself carries (a UD treebank's), served only by `--parser gold`
    (every other parser parses the segment), placed as a parse of it would be: on its gold tokens or text.
    """

    lang: str
    text: str | None = None
    tokens: list[str] | None = None
    record: SyntaxRecord | None = None
    sent_id: str | None = None
    gold_tree: SyntaxRecord | None = None

    def __post_init__(self) -> None:
        if (self.text is None) == (self.tokens is None):
            raise ValueError("a segment has either raw text or gold tokens, not both or neither")
