"""`--parser gold`: the trees the task's own data carries, where it carries them (UD CoNLL-U input).

A reader of a format with trees (a UD treebank, for UD-POS or any CoNLL-U task input) keeps each
segment's tree as `Segment.gold_tree`. Every parser but this one ignores it and parses the segment;
this one serves it as the segment's record, so the same model, run once with `--parser gold` and
once with a predicted parse (`udpipe:MODEL`, `stanza`, ...), shows what parse errors cost: the
parser is one run setting, a grid axis of `xsyn experiment` like any other.

`parse_segments` attaches the data's trees before it consults the cache; this parser is asked only
about segments whose data has no tree, and refuses them all in one error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xsyn.syntax.parsing.base import ParsesNotFound
from xsyn.syntax.record import SyntaxRecord


class GoldParser:
    name = "gold"
    version = "1"
    preparsed = True  # nothing is computed: no rank divides the work, none caches it
    data_trees = True
    max_workers = 1

    def cache_identity(self) -> dict[str, Any]:
        return {}

    def parse_texts(self, texts: Sequence[str], lang: str, *, sent_ids: Sequence[str | None] | None = None
                    ) -> list[SyntaxRecord]:
        raise self._no_trees(texts, lang, sent_ids)

    def parse_tokens(self, token_lists: Sequence[Sequence[str]], lang: str, *,
                     sent_ids: Sequence[str | None] | None = None) -> list[SyntaxRecord]:
        raise self._no_trees([" ".join(tokens) for tokens in token_lists], lang, sent_ids)

    @staticmethod
    def _no_trees(texts: Sequence[str], lang: str, sent_ids: Sequence[str | None] | None) -> ParsesNotFound:
        ids = list(sent_ids) if sent_ids is not None else [None] * len(texts)
        missing = [f"[{lang}]{f' (sent_id {i})' if i else ''} {text[:100]!r}" for text, i in zip(texts, ids)]
        return ParsesNotFound(
            "--parser gold", missing,
            how="the task's data carries no tree for them", fix="--parser gold needs data with trees (UD CoNLL-U "
            "input, e.g. the udpos task read from a treebank); choose a parser (stanza, udpipe:MODEL, ...)")
