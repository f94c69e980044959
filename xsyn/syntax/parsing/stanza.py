"""`--parser stanza`: Stanza's neural pipeline (tokenize, mwt, pos, lemma, depparse) into Universal Dependencies.

Raw or pre-tokenised input, batched through `bulk_process`. Gold tokens that are the single
characters of a language written without spaces (Chinese character-level tasks) are parsed as their
joined text, so Stanza finds the words; each word then covers its characters.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import stanza
import torch
from stanza import Document

from xsyn.syntax.conllu import locate_tokens
from xsyn.syntax.parsing.base import ParserUnavailable, characters_as_tokens, joins_characters
from xsyn.syntax.parsing.registry import STANZA_BATCH_DOCS
from xsyn.syntax.record import SyntaxRecord

# xsyn's download policies (the registry's DOWNLOAD option) -> stanza.DownloadMethod's names
_DOWNLOAD = {"none": "NONE", "reuse": "REUSE_RESOURCES", "download": "DOWNLOAD_RESOURCES"}


class StanzaParser:
    """Stanza's neural pipeline, one pipeline per (language, raw | pre-tokenised), built lazily.

    `download` is the model policy: "none" (use `model_dir` as it is), "reuse" (download what
    is missing) or "download" (refresh). Pre-tokenised input keeps the gold tokens (Stanza then
    runs no multiword expansion, stanza#95). `pipeline_factory(lang, pretokenized)` replaces how
    pipelines are built (tests hand in a stand-in); everything after it is the same code path.
    """

    name = "stanza"
    preparsed = False
    data_trees = False

    def __init__(self, processors: str = "tokenize,mwt,pos,lemma,depparse", package: str = "default",
                 model_dir: str | None = None, download: str = "reuse", device: str | None = None,
                 batch_docs: int = STANZA_BATCH_DOCS, pipeline_factory: Callable[[str, bool], Any] | None = None):
        if download not in _DOWNLOAD:
            raise ValueError(f"download must be one of {sorted(_DOWNLOAD)}, got {download!r}")
        self.version = stanza.__version__
        self.processors, self.package, self.model_dir = processors, package, model_dir
        self.download, self.device, self.batch_docs = download, device, batch_docs
        self._factory = pipeline_factory or self._build_pipeline
        self._pipelines: dict[tuple[str, bool], Any] = {}

    def cache_identity(self) -> dict[str, Any]:
        return {"processors": self.processors, "package": self.package, "unspaced_characters": "joined"}

    @property
    def max_workers(self) -> int | None:
        """1 on a GPU (parse workers would each load the models onto it), else no limit."""
        if self.device is not None:
            return None if self.device == "cpu" else 1

        return 1 if torch.cuda.is_available() else None

    def __getstate__(self) -> dict[str, Any]:
        """What a parse worker is sent: the settings, not the loaded pipelines (each worker builds its own)."""
        return {**self.__dict__, "_pipelines": {}}

    def _build_pipeline(self, lang: str, pretokenized: bool) -> Any:
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
            raise self._unavailable([lang], str(err)) from err

    def check_models(self, langs: Sequence[str], online: bool) -> None:
        """Before any data is read (the preflight): each language's models are in the model folder, or can be
        fetched (the download policy allows it and the network is there); else the error parsing would raise."""
        if online and self.download != "none":
            return
        where = Path(self.model_dir or stanza.resources.common.DEFAULT_MODEL_DIR)
        missing = [lang for lang in langs if not (where / "resources.json").is_file() or not (where / lang).is_dir()]
        if missing:
            raise self._unavailable(missing, "--parser-download none" if online else "no network to download them")

    def _unavailable(self, langs: Sequence[str], cause: str) -> ParserUnavailable:

        # the folder Stanza reads (its own default where --parser-model-dir is not given), named once, as it is
        where = self.model_dir or stanza.resources.common.DEFAULT_MODEL_DIR
        names = ", ".join(map(repr, langs))
        return ParserUnavailable(
            f"cannot load Stanza models for language {names} from {where} ({cause}). On a machine with network "
            f"run: python -c \"import stanza; stanza.download('{langs[0]}', model_dir='MODELS')\" and copy MODELS "
            f"to {where}, or pass it as --parser-model-dir MODELS; or choose another parser: --parser "
            "udpipe:MODEL (a UDPipe 1 model file or folder), --parser spacy:PIPELINE (an installed spaCy pipeline), "
            "--parser chain (no model: a right-branching chain, to check a setup), or pre-parsed CoNLL-U input "
            "(--parser conllu:PATH)")

    def _pipeline(self, lang: str, pretokenized: bool) -> Any:
        key = (lang, pretokenized)
        if key not in self._pipelines:
            self._pipelines[key] = self._factory(lang, pretokenized)
        return self._pipelines[key]

    def parse_texts(self, texts: Sequence[str], lang: str, *, sent_ids: Sequence[str | None] | None = None
                    ) -> list[SyntaxRecord]:
        nlp = self._pipeline(lang, pretokenized=False)
        records = []
        for start in range(0, len(texts), self.batch_docs):
            chunk = texts[start:start + self.batch_docs]
            docs = nlp.bulk_process([Document([], text=t) for t in chunk])
            records += [document_record(doc, lang, text=t) for doc, t in zip(docs, chunk)]
        return records

    def parse_tokens(self, token_lists: Sequence[Sequence[str]], lang: str, *,
                     sent_ids: Sequence[str | None] | None = None) -> list[SyntaxRecord]:
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


