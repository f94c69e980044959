"""`--parser conllu:PATH`: pre-parsed CoNLL-U as a parser; each segment gets the tree a file holds for it.

Any parser's output, or a gold treebank that covers the data, can feed a run this way. A segment is
looked up by its text: the characters other than whitespace must be the same (so runs of spaces,
line breaks, and a `# text` rebuilt from forms without `SpaceAfter=No` all match), and the segment's
words are placed back on its own text (character spans) or its gold tokens (token indices). A
segment the file splits into several consecutive sentences (a paragraph, a QA context) is matched
by those sentences in file order. Where several sentences have the segment's text, the one whose
`sent_id` is the segment's own (`ID`, or `ID-1`, `ID-2`, ... for a segment of several sentences)
is taken, else the first in file order.

A segment with no parse is an error that says how many and shows the first few: never a silent
fallback to another parser.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from xsyn.syntax.conllu import language_of, read_conllu
from xsyn.syntax.parsing.base import ParsesNotFound
from xsyn.syntax.parsing.placement import Sentence, place_sentences, sentence_of, source_checksum, without_whitespace
from xsyn.syntax.record import SyntaxRecord
from xsyn.utils.errors import MissingInputError


def conllu_files(path: Path) -> list[Path]:
    """The CoNLL-U files of a source: the file itself, or every `*.conllu` under a folder."""
    if path.is_file():
        return [path]
    if path.is_dir():
        return sorted(path.rglob("*.conllu"))
    return []


class ConlluParser:
    """Serves each segment its tree from a CoNLL-U file or a folder of them (see the module doc).

    Files named by the UD convention (`de_gsd-ud-dev.conllu`) serve segments of their language only;
    other files serve every language. A file is read the first time a segment of its language is
    looked up.
    """

    name = "conllu"
    version = "1"
    # parses are looked up, not computed: keyed by sent_id too, and looked up by every process itself
    preparsed = True
    data_trees = False
    max_workers = 1  # a lookup: every process does its own

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.files = conllu_files(self.path)
        if not self.files:
            what = "folder has no .conllu files" if self.path.is_dir() else "file does not exist"
            raise MissingInputError(f"--parser conllu:{self.path}: the {what}; give a CoNLL-U file or a folder "
                                    "of .conllu files")
        self.checksum = source_checksum(self.files, self.path)
        self._by_lang: dict[str, list[Path]] = {}
        for file in self.files:
            self._by_lang.setdefault(language_of(file), []).append(file)
        self._index: dict[str, tuple[list[Sentence], dict[str, list[int]]]] = {}

    def cache_identity(self) -> dict[str, Any]:
        return {"sha256": self.checksum}

    def _sentences(self, lang: str) -> tuple[list[Sentence], dict[str, list[int]]]:
        """The sentences a segment of `lang` may match, in file order, and their positions by text."""
        if lang not in self._index:
            files = self._by_lang.get(lang, []) + (self._by_lang.get("", []) if lang else [])
            sentences = [sentence_of(record) for file in files for record in read_conllu(file, lang=lang)]
            at_key: dict[str, list[int]] = {}
            for i, sentence in enumerate(sentences):
                at_key.setdefault(sentence.key, []).append(i)
            self._index[lang] = (sentences, at_key)
        return self._index[lang]

    def lookup(self, target: str | Sequence[str], lang: str, sent_id: str | None = None) -> list[SyntaxRecord] | None:
        """The sentence records that parse one segment, or None."""
        sentences, at_key = self._sentences(lang)
        key = without_whitespace(target if isinstance(target, str) else "".join(target))
        runs = [[i] for i in at_key.get(key, [])] or self._runs(key, sentences, at_key)
        if not runs:
            return None
        if sent_id is not None:
            for run in runs:
                ids = [sentences[i].record.sent_id for i in run]
                if ids == ([sent_id] if len(run) == 1 else [f"{sent_id}-{k + 1}" for k in range(len(run))]):
                    return [sentences[i].record for i in run]
        return [sentences[i].record for i in runs[0]]

    @staticmethod
    def _runs(key: str, sentences: list[Sentence], at_key: dict[str, list[int]]) -> list[list[int]]:
        """Runs of consecutive sentences whose texts spell `key` (a segment of several sentences)."""
        runs = []
        starts = sorted(i for length in range(1, len(key)) for i in at_key.get(key[:length], []))
        for first in starts:
            run, at, i = [first], len(sentences[first].key), first + 1
            while at < len(key) and i < len(sentences) and sentences[i].key and key.startswith(sentences[i].key, at):
                run.append(i)
                at += len(sentences[i].key)
                i += 1
            if at == len(key):
                runs.append(run)
        return runs

    def _place(self, targets: Sequence[str | Sequence[str]], lang: str, sent_ids: Sequence[str | None] | None
               ) -> list[SyntaxRecord]:
        ids = list(sent_ids) if sent_ids is not None else [None] * len(targets)
        records, missing = [], []
        for target, sent_id in zip(targets, ids, strict=True):
            found = self.lookup(target, lang, sent_id)
            if found is None:
                shown = target if isinstance(target, str) else " ".join(target)
                name = f" (sent_id {sent_id})" if sent_id else ""
                missing.append(f"[{lang}]{name} {shown[:100]!r}")
                continue
            records.append(place_sentences(found, target, lang, sent_id=found[0].sent_id))
        if missing:
            raise ParsesNotFound(f"conllu:{self.path}", missing)
        return records

    def parse_texts(self, texts: Sequence[str], lang: str, *, sent_ids: Sequence[str | None] | None = None
                    ) -> list[SyntaxRecord]:
        return self._place(texts, lang, sent_ids)

    def parse_tokens(self, token_lists: Sequence[Sequence[str]], lang: str, *,
                     sent_ids: Sequence[str | None] | None = None) -> list[SyntaxRecord]:
        return self._place([list(tokens) for tokens in token_lists], lang, sent_ids)
