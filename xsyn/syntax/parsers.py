"""Parsers: text or gold tokens in, syntax records out.

- `StanzaParser`: a real `stanza.Pipeline` (tokenize, mwt, pos, lemma, depparse) into Universal
  Dependencies; raw or pre-tokenised input, batched through `bulk_process`. Gold tokens that are
  the single characters of a language written without spaces (Chinese character-level tasks) are
  parsed as their joined text, so Stanza finds the words; each word then covers its characters.
- `ChainParser`: a model-free control tree (each word headed by its right neighbour). It is the
  linear-order baseline of syntax ablations, and lets every code path run where no parser
  model is installed.
- `conllu:PATH` (`preparsed.ConlluParser`): the trees of a pre-parsed CoNLL-U file or folder, looked up
  by each segment's text; `udpipe:MODEL` (`udpipe.UDPipeParser`): UDPipe 1 with a `.udpipe` model.

`get_parser(spec)` builds any of them from its choice string, checked by `parse_parser_spec`.

A parser is described by `name`, `version` and `settings()`: together with the segment's
content and language they address the parse cache, so a change of any of them re-parses.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from xsyn.syntax.conllu import locate_tokens
from xsyn.syntax.record import SyntaxRecord
from xsyn.utils.errors import XsynError


class Parser(Protocol):
    name: str
    version: str

    def settings(self) -> dict[str, Any]: ...

    def parse_texts(self, texts: Sequence[str], lang: str) -> list[SyntaxRecord]: ...

    def parse_tokens(self, token_lists: Sequence[Sequence[str]], lang: str) -> list[SyntaxRecord]: ...


class ParserUnavailable(XsynError, RuntimeError):
    """The parser cannot run here (models missing); the message says how to install them."""


# -- the control tree --------------------------------------------------------------------------------

_WORD = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]|\w+(?:['’-]\w+)*|[^\w\s]")


class ChainParser:
    """Right-branching chain over regex words: word i's head is word i+1; the last word is the root.

    UPOS is PUNCT for punctuation and X otherwise; relations are `dep` (and `root`).
    """

    name = "chain"
    version = "1"
    max_workers = 1  # model-free and fast: a worker process would take longer to start than the parse

    def settings(self) -> dict[str, Any]:
        return {"pattern": _WORD.pattern}

    def parse_texts(self, texts: Sequence[str], lang: str) -> list[SyntaxRecord]:
        records = []
        for text in texts:
            matches = list(_WORD.finditer(text)) or [re.match(r"(?s).*", text)]
            words = [m.group() for m in matches]
            records.append(_chain(words, lang, text=text, spans=[m.span() for m in matches]))
        return records

    def parse_tokens(self, token_lists: Sequence[Sequence[str]], lang: str) -> list[SyntaxRecord]:
        return [_chain(list(tokens), lang, token_index=list(range(len(tokens))), text=" ".join(tokens))
                for tokens in token_lists]


def _chain(words: list[str], lang: str, **where: Any) -> SyntaxRecord:
    n = len(words)
    heads = [i + 2 for i in range(n - 1)] + [0]
    upos = ["PUNCT" if re.fullmatch(r"[^\w\s]+", w) else "X" for w in words]
    deprels = ["dep"] * (n - 1) + ["root"]
    return SyntaxRecord(words, heads, upos, deprels, lang=lang, **where)


# -- Stanza ------------------------------------------------------------------------------------------

_DOWNLOAD = {"none": "NONE", "reuse": "REUSE_RESOURCES", "download": "DOWNLOAD_RESOURCES"}
DOWNLOAD_POLICIES = tuple(_DOWNLOAD)
UNSPACED_LANGUAGES = ("zh", "ja")  # written without spaces between words
STANZA_BATCH_DOCS = 256  # documents per Stanza call, unless a run or command sets another


def joins_characters(tokens: Sequence[str], lang: str) -> bool:
    """Gold tokens that are single characters of an unspaced language: a parser given them one by
    one would take every character for a word, so they are parsed as one text instead."""
    return lang.split("-")[0] in UNSPACED_LANGUAGES and bool(tokens) and all(len(t) == 1 for t in tokens)


def characters_as_tokens(record: SyntaxRecord, tokens: Sequence[str]) -> SyntaxRecord:
    """A record parsed from `"".join(tokens)` (one character per token) -> the same words placed on
    the gold tokens: a character span is a range of tokens."""
    units = record.units() or []
    return SyntaxRecord(record.words, record.heads, record.upos, record.deprels,
                        token_index=[start for start, _ in units], token_end=[end for _, end in units],
                        text=" ".join(tokens), lang=record.lang, sentence_starts=record.sentence_starts)


class StanzaParser:
    """Stanza's neural pipeline, one pipeline per (language, raw | pre-tokenised), built lazily.

    `download` is the model policy: "none" (use `model_dir` as it is), "reuse" (download what
    is missing) or "download" (refresh). Pre-tokenised input keeps the gold tokens (Stanza then
    runs no multiword expansion, stanza#95). `pipeline_factory(lang, pretokenized)` replaces how
    pipelines are built (tests hand in a stand-in); everything after it is the same code path.
    """

    name = "stanza"

    def __init__(self, processors: str = "tokenize,mwt,pos,lemma,depparse", package: str = "default",
                 model_dir: str | None = None, download: str = "reuse", device: str | None = None,
                 batch_docs: int = STANZA_BATCH_DOCS, pipeline_factory: Callable[[str, bool], Any] | None = None):
        import stanza

        if download not in _DOWNLOAD:
            raise ValueError(f"download must be one of {sorted(_DOWNLOAD)}, got {download!r}")
        self.version = stanza.__version__
        self.processors, self.package, self.model_dir = processors, package, model_dir
        self.download, self.device, self.batch_docs = download, device, batch_docs
        self._factory = pipeline_factory or self._build_pipeline
        self._pipelines: dict[tuple[str, bool], Any] = {}

    def settings(self) -> dict[str, Any]:
        return {"processors": self.processors, "package": self.package, "unspaced_characters": "joined"}

    @property
    def max_workers(self) -> int | None:
        """1 on a GPU (parse workers would each load the models onto it), else no limit."""
        if self.device is not None:
            return None if self.device == "cpu" else 1
        import torch

        return 1 if torch.cuda.is_available() else None

    def __getstate__(self) -> dict[str, Any]:
        """What a parse worker is sent: the settings, not the loaded pipelines (each worker builds its own)."""
        return {**self.__dict__, "_pipelines": {}}

    def _build_pipeline(self, lang: str, pretokenized: bool) -> Any:
        import stanza

        processors = self.processors
        if pretokenized:
            processors = ",".join(p for p in processors.split(",") if p != "mwt")
        try:
            return stanza.Pipeline(
                lang, dir=self.model_dir or stanza.resources.common.DEFAULT_MODEL_DIR,
                processors=processors, package=self.package, tokenize_pretokenized=pretokenized,
                download_method=getattr(stanza.DownloadMethod, _DOWNLOAD[self.download]),
                device=self.device, logging_level="WARN")
        except Exception as err:  # stanza raises several unrelated types for missing models
            where = self.model_dir or "~/stanza_resources"
            raise ParserUnavailable(
                f"cannot load Stanza models for language {lang!r} from {where} ({err}). On a machine "
                f"with network run: python -c \"import stanza; stanza.download('{lang}', "
                f"model_dir='{where}')\" and copy the folder here, then pass --parser-model-dir "
                "(or use pre-parsed CoNLL-U input)") from err

    def _pipeline(self, lang: str, pretokenized: bool) -> Any:
        key = (lang, pretokenized)
        if key not in self._pipelines:
            self._pipelines[key] = self._factory(lang, pretokenized)
        return self._pipelines[key]

    def parse_texts(self, texts: Sequence[str], lang: str) -> list[SyntaxRecord]:
        from stanza import Document

        nlp = self._pipeline(lang, pretokenized=False)
        records = []
        for start in range(0, len(texts), self.batch_docs):
            chunk = texts[start:start + self.batch_docs]
            docs = nlp.bulk_process([Document([], text=t) for t in chunk])
            records += [document_record(doc, lang, text=t) for doc, t in zip(docs, chunk)]
        return records

    def parse_tokens(self, token_lists: Sequence[Sequence[str]], lang: str) -> list[SyntaxRecord]:
        from stanza import Document

        records: list[SyntaxRecord | None] = [None] * len(token_lists)
        joined = [k for k, tokens in enumerate(token_lists) if joins_characters(tokens, lang)]
        if joined:  # (a pipeline is loaded only where it has work)
            for k, record in zip(joined, self.parse_texts(["".join(token_lists[k]) for k in joined], lang)):
                records[k] = characters_as_tokens(record, token_lists[k])
        rest = [k for k, record in enumerate(records) if record is None]
        if rest:
            nlp = self._pipeline(lang, pretokenized=True)
            for start in range(0, len(rest), self.batch_docs):
                chunk = rest[start:start + self.batch_docs]
                docs = nlp.bulk_process([
                    Document([[{"id": (i + 1,), "text": tok} for i, tok in enumerate(token_lists[k])]],
                             text=" ".join(token_lists[k])) for k in chunk])
                for k, doc in zip(chunk, docs):
                    records[k] = document_record(doc, lang, pretokenized=True)
        return records  # type: ignore[return-value]


def document_record(doc: Any, lang: str, text: str | None = None, pretokenized: bool = False
                    ) -> SyntaxRecord:
    """One stanza `Document` (all its sentences) -> one multi-sentence syntax record.

    Words of a multiword token inherit the token's character span (or gold-token index). When
    Stanza left no character offsets (documents read from CoNLL-U), tokens are located in `text`.
    """
    words, heads, upos, deprels, starts = [], [], [], [], []
    surface: list[tuple[str, int, int, str]] = []
    offsets: list[tuple[int, int] | None] = []
    for sentence in doc.sentences:
        base = len(words)
        starts.append(base)
        for token in sentence.tokens:
            first = len(words)
            for word in token.words:
                words.append(word.text)
                heads.append(word.head + base if word.head else 0)
                upos.append(word.upos or "X")
                deprels.append(word.deprel or "dep")
            surface.append((token.text, first, len(words) - 1, ""))
            has_offsets = token.start_char is not None and token.end_char is not None
            offsets.append((token.start_char, token.end_char) if has_offsets else None)
    if pretokenized:
        index = [0] * len(words)
        for t, (_, first, last, _) in enumerate(surface):
            index[first:last + 1] = [t] * (last - first + 1)
        return SyntaxRecord(words, heads, upos, deprels, token_index=index,
                            text=" ".join(s[0] for s in surface), lang=lang, sentence_starts=starts)
    if text is not None and all(o is not None for o in offsets):
        spans = [(0, 0)] * len(words)
        for (_, first, last, _), span in zip(surface, offsets):
            spans[first:last + 1] = [span] * (last - first + 1)
    else:
        text, spans = locate_tokens(text if text is not None else doc.text, surface, len(words))
    return SyntaxRecord(words, heads, upos, deprels, spans=spans, text=text, lang=lang,
                        sentence_starts=starts)


PARSERS = ("stanza", "chain", "conllu:PATH", "udpipe:MODEL")  # the forms a parser choice takes
_PATH_PARSERS = {"conllu": "a CoNLL-U file or a folder of .conllu files",
                 "udpipe": "a UDPipe 1 model file (.udpipe) or a folder of them, one per language"}


class ParserSpecError(XsynError, ValueError):
    """A parser choice that is not one of `PARSERS`; the message lists them."""


def parse_parser_spec(spec: str) -> tuple[str, str | None]:
    """`stanza` -> ("stanza", None); `conllu:PATH` -> ("conllu", PATH); `udpipe:MODEL` -> ("udpipe", MODEL).

    The one check of a parser choice, for every command and run setting: the name must be known and a
    path-taking parser needs its path (whether it exists is checked when the parser is built).
    """
    name, sep, path = spec.partition(":")
    if not sep and name in ("stanza", "chain"):
        return name, None
    if sep and name in _PATH_PARSERS:
        if not path.strip():
            raise ParserSpecError(f"parser {spec!r}: give {_PATH_PARSERS[name]} after the colon, e.g. {name}:PATH")
        return name, path
    raise ParserSpecError(f"unknown parser {spec!r}; choose one of: {', '.join(PARSERS)} (PATH is "
                          f"{_PATH_PARSERS['conllu']}; MODEL is {_PATH_PARSERS['udpipe']})")


def get_parser(spec: str, **stanza_options: Any) -> Parser:
    """The parser a choice names (see `parse_parser_spec`). `stanza_options` (processors, package,
    model_dir, download, device, batch_docs) configure Stanza; the other parsers take none."""
    name, path = parse_parser_spec(spec)
    if name == "stanza":
        return StanzaParser(**stanza_options)
    if name == "chain":
        return ChainParser()
    if name == "conllu":
        from xsyn.syntax.preparsed import ConlluParser

        return ConlluParser(path)
    from xsyn.syntax.udpipe import UDPipeParser

    return UDPipeParser(path)
