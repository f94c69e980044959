"""`--parser chain`: a model-free control tree, each word headed by its right neighbour.

It is the linear-order baseline of syntax ablations, and lets every code path run where no parser
model is installed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import regex

from xsyn.syntax.record import SyntaxRecord

# A word is letters and digits with their combining marks (\p{M}): Devanagari, Arabic, Thai and Hebrew
# vowel signs are marks, which Python's `\w` leaves out, so `re` would cut उसने into उसन + े.
_WORD = regex.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]|[\w\p{M}]+(?:['’-][\w\p{M}]+)*|[^\w\s\p{M}]")
_PUNCTUATION = regex.compile(r"[^\w\s\p{M}]+")


class ChainParser:
    """Right-branching chain over regex words: word i's head is word i+1; the last word is the root.

    UPOS is PUNCT for punctuation and X otherwise; relations are `dep` (and `root`).
    """

    name = "chain"
    version = "1"
    preparsed = False
    data_trees = False
    max_workers = 1  # model-free and fast: a worker process would take longer to start than the parse

    def cache_identity(self) -> dict[str, Any]:
        return {"pattern": _WORD.pattern}

    def parse_texts(self, texts: Sequence[str], lang: str, *, sent_ids: Sequence[str | None] | None = None
                    ) -> list[SyntaxRecord]:
        records = []
        for text in texts:
            matches = list(_WORD.finditer(text)) or [re.match(r"(?s).*", text)]
            words = [m.group() for m in matches]
            records.append(_chain(words, lang, text=text, spans=[m.span() for m in matches]))
        return records

    def parse_tokens(self, token_lists: Sequence[Sequence[str]], lang: str, *,
                     sent_ids: Sequence[str | None] | None = None) -> list[SyntaxRecord]:
        return [_chain(list(tokens), lang, token_index=list(range(len(tokens))), text=" ".join(tokens))
                for tokens in token_lists]


def _chain(words: list[str], lang: str, **where: Any) -> SyntaxRecord:
    n = len(words)
    heads = [i + 2 for i in range(n - 1)] + [0]
    upos = ["PUNCT" if _PUNCTUATION.fullmatch(w) else "X" for w in words]
    deprels = ["dep"] * (n - 1) + ["root"]
    return SyntaxRecord(words, heads, upos, deprels, lang=lang, **where)
