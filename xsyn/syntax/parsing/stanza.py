"""`--parser stanza`: Stanza's neural pipeline (tokenize, mwt, pos, lemma, depparse) into Universal Dependencies.

Raw or pre-tokenised input, batched through `bulk_process`. Gold tokens that are the single
characters of a language written without spaces (Chinese character-level tasks) are parsed as their
joined text, so Stanza finds the words; each word then covers its characters.

xsyn asks Stanza for `tokenize,pos,lemma,depparse` and lets Stanza add `mwt` (multiword tokens) to raw
input where the language's tokenizer expects it (`stanza.resources.common.add_mwt`): 13 of the languages
the task cards list (bg, hu, ja, ru, vi, zh, ...) have no mwt model, and a pipeline asked for one fails.
Which languages Stanza parses at all, and with which models, is read from Stanza's model index
(`resources.json` in the model folder, the file Stanza itself reads first) by Stanza's own resolution
code, so the preflight names a language Stanza has no models for (sw, yo, my, ...) before any data is
read, and `zh` is found under `zh-hans`, the folder Stanza keeps it in.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import stanza
import torch
from stanza import Document
from stanza.pipeline.core import filter_variants
from stanza.resources.common import (
    DEFAULT_RESOURCES_URL,
    DEFAULT_RESOURCES_VERSION,
    add_dependencies,
    download_resources_json,
    flatten_processor_list,
    maintain_processor_list,
    process_pipeline_parameters,
)

from xsyn.syntax.conllu import locate_tokens
from xsyn.syntax.parsing.base import (
    OTHER_PARSE_SOURCES,
    LanguageSupport,
    ParserUnavailable,
    Readiness,
    characters_as_tokens,
    joins_characters,
)
from xsyn.syntax.parsing.registry import STANZA_BATCH_DOCS
from xsyn.syntax.record import SyntaxRecord

# xsyn's download policies (the registry's DOWNLOAD option) -> stanza.DownloadMethod's names
_DOWNLOAD = {"none": "NONE", "reuse": "REUSE_RESOURCES", "download": "DOWNLOAD_RESOURCES"}
PROCESSORS = "tokenize,pos,lemma,depparse"  # what xsyn asks for; Stanza adds mwt where the tokenizer needs it
NEEDED = ("tokenize", "pos", "depparse")  # without a model for each of these, Stanza cannot parse a language
INDEX_FILE = "resources.json"  # Stanza's model index, in its model folder
UNSUPPORTED_FIX = f"No Stanza download helps these languages: {OTHER_PARSE_SOURCES}."


def stanza_code(index: dict[str, Any], lang: str) -> str | None:
    """The language's code in Stanza's index, its aliases followed (`zh` -> `zh-hans`), as Stanza follows them
    (`stanza.resources.common.get_language_resources`); None for a language the index does not have."""
    lang = lang.strip().lower()  # (as stanza.Pipeline's process_pipeline_parameters)
    seen: set[str] = set()
    while isinstance(index.get(lang), dict) and "alias" in index[lang] and lang not in seen:
        seen.add(lang)
        lang = index[lang]["alias"]
    return lang if isinstance(index.get(lang), dict) and "alias" not in index[lang] else None


def resolve_request(index: dict[str, Any], code: str, package: str, pretokenized: bool) -> list:
    """The load list Stanza builds for xsyn's request in language `code` (of the index, aliases followed):
    each processor with its model specifications and their dependencies, by Stanza's own code."""
    _, _, package_arg, processors = process_pipeline_parameters(code, None, package, PROCESSORS)
    stanza_log = logging.getLogger("stanza")
    level = stanza_log.level
    stanza_log.setLevel(max(level, logging.ERROR))  # ("expects mwt, which has been added": what xsyn asks it to do)
    try:  # (stanza.Pipeline adds mwt only to raw input: maybe_add_mwt=not tokenize_pretokenized)
        load_list = maintain_processor_list(index, code, package_arg, processors, maybe_add_mwt=not pretokenized)
    finally:
        stanza_log.setLevel(level)
    return add_dependencies(index, code, load_list)


def model_files(index: dict[str, Any], code: str, package: str) -> list[tuple[str, str]]:
    """Every (processor, model) file xsyn's request loads in `code`, raw and pre-tokenised input both: the
    processors' models and their dependencies (pretrained embeddings, character LMs), as Stanza downloads
    them (an identity lemmatizer or an external variant has no file)."""
    files: dict[tuple[str, str], None] = {}
    for pretokenized in (False, True):
        load_list = [item for item in resolve_request(index, code, package, pretokenized) if item[0] in index[code]]
        files.update(dict.fromkeys(tuple(pair) for pair in flatten_processor_list(filter_variants(load_list))))
    return list(files)


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

    def __init__(self, package: str = "default", model_dir: str | None = None, download: str = "reuse",
                 device: str | None = None, batch_docs: int = STANZA_BATCH_DOCS,
                 pipeline_factory: Callable[[str, bool], Any] | None = None):
        if download not in _DOWNLOAD:
            raise ValueError(f"download must be one of {sorted(_DOWNLOAD)}, got {download!r}")
        self.version = stanza.__version__
        self.package, self.model_dir = package, model_dir
        self.download, self.device, self.batch_docs = download, device, batch_docs
        self._factory = pipeline_factory or self._build_pipeline
        self._pipelines: dict[tuple[str, bool], Any] = {}
        self._index: dict[str, Any] | None = None

    def cache_identity(self) -> dict[str, Any]:
        # Stanza's full UD pipeline, mwt where the language's tokenizer has one: the request leaves mwt to Stanza
        # (PROCESSORS), which changes no parse of a language that has it, so the parses cached before stay valid
        return {"processors": "tokenize,mwt,pos,lemma,depparse", "package": self.package,
                "unspaced_characters": "joined"}

    @property
    def max_workers(self) -> int | None:
        """1 on a GPU (parse workers would each load the models onto it), else no limit."""
        if self.device is not None:
            return None if self.device == "cpu" else 1

        return 1 if torch.cuda.is_available() else None

    def __getstate__(self) -> dict[str, Any]:
        """What a parse worker is sent: the settings, not the loaded pipelines (each worker builds its own)."""
        return {**self.__dict__, "_pipelines": {}, "_index": None}

    @property
    def folder(self) -> Path:
        """The folder Stanza reads its models from: `model_dir`, else Stanza's own default."""
        return Path(self.model_dir or stanza.resources.common.DEFAULT_MODEL_DIR)

    def pipeline_arguments(self, lang: str, pretokenized: bool) -> dict[str, Any]:
        """What `stanza.Pipeline` is called with for a language and input form."""
        return {"lang": lang, "dir": str(self.folder), "processors": PROCESSORS, "package": self.package,
                "tokenize_pretokenized": pretokenized,
                "download_method": getattr(stanza.DownloadMethod, _DOWNLOAD[self.download]),
                "device": self.device, "logging_level": "WARN"}

    def _build_pipeline(self, lang: str, pretokenized: bool) -> Any:
        try:
            return stanza.Pipeline(**self.pipeline_arguments(lang, pretokenized))
        except Exception as err:  # stanza raises several unrelated types for missing models
            raise self._build_failed(lang, err) from err

    # -- which languages it can parse, from Stanza's model index ---------------------------------------------

    def model_index(self, fetch: bool = False) -> tuple[dict[str, Any] | None, str]:
        """Stanza's model index in the model folder (with `fetch`, downloaded there first where it is missing, as
        stanza.Pipeline would), or None and why there is none."""
        if self._index is not None:
            return self._index, ""
        path = self.folder / INDEX_FILE
        if not path.is_file() and fetch:

            try:
                download_resources_json(str(self.folder))
            except Exception as err:  # requests' errors, an HTTP status, a folder that cannot be written
                return None, f"no {INDEX_FILE} there, and downloading it failed: {type(err).__name__}: {err}"
        try:
            self._index = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None, f"no {INDEX_FILE} there"
        except (OSError, ValueError) as err:
            return None, f"its {INDEX_FILE} cannot be read ({err}); delete it to download it again"
        return self._index, ""

    def language_support(self, langs: Sequence[str], online: bool) -> list[LanguageSupport]:
        """Each language as Stanza can parse it here: its models in the folder (READY), to be downloaded at first
        use (FETCHABLE), neither (MISSING: the fix downloads all of those asked about at once), or none in
        Stanza's index at all (UNSUPPORTED, no download helps)."""
        fetch = online and self.download != "none"
        index, why = self.model_index(fetch=fetch)
        if index is None:
            if not fetch:
                why += ", and " + ("no network to download them" if not online else "--parser-download none")
            found = [(lang, Readiness.MISSING, self._cannot_load(lang, why)) for lang in langs]
        else:
            found = [self._support(index, lang, fetch, online) for lang in langs]
        missing = [lang for lang, readiness, _ in found if readiness is Readiness.MISSING]
        fixes = {Readiness.MISSING: self._download_fix(missing, known=index is not None),
                 Readiness.UNSUPPORTED: UNSUPPORTED_FIX}
        folders = {lang: stanza_code(index, lang) or "" for lang in langs} if index is not None else {}
        return [LanguageSupport(lang, readiness, detail, fixes.get(readiness, ""),
                                folders.get(lang, "") if readiness is not Readiness.UNSUPPORTED else "")
                for lang, readiness, detail in found]

    def _support(self, index: dict[str, Any], lang: str, fetch: bool, online: bool) -> tuple[str, Readiness, str]:
        code = stanza_code(index, lang)
        if code is None or any(p not in index[code] for p in NEEDED):
            return lang, Readiness.UNSUPPORTED, self._unsupported(index, lang, code)
        files = model_files(index, code, self.package)
        absent = [f"{p}/{m}.pt" for p, m in files if not (self.folder / code / p / f"{m}.pt").is_file()]
        named = f"{lang} (Stanza's {code})" if code != lang else lang
        if not absent:
            return lang, Readiness.READY, f"{named}: {', '.join(f'{p} {m}' for p, m in files)} in {self.folder / code}"
        if fetch:
            return lang, Readiness.FETCHABLE, (f"{named}: {len(absent)} of {len(files)} model files to download into "
                                               f"{self.folder / code} at first use ({', '.join(absent)})")
        cause = "no network to download them" if not online else "--parser-download none"
        return lang, Readiness.MISSING, self._cannot_load(lang, f"{cause}; not in {code}/: {', '.join(absent)}")

    def _unsupported(self, index: dict[str, Any], lang: str, code: str | None) -> str:
        if code is None:
            return f"Stanza {self.version}'s model index has no language {lang!r}"
        have = [p for p in ("tokenize", "mwt", "pos", "lemma", "depparse") if p in index[code]]
        lacking = [p for p in NEEDED if p not in index[code]]
        named = " or ".join(lacking) if len(lacking) < 3 else f"{', '.join(lacking[:-1])} or {lacking[-1]}"
        return (f"Stanza {self.version} has no {named} model for {lang!r}"
                + (f" (only {', '.join(have)})" if have else " (no UD models at all)"))

    def _cannot_load(self, lang: str, cause: str) -> str:
        return f"cannot load Stanza models for language {lang!r} from {self.folder} ({cause})"

    def _download_fix(self, langs: Sequence[str], known: bool) -> str:
        """How to get the models of `langs` onto this machine, or what to use instead."""
        if not langs:
            return ""
        call = f"model_dir='MODELS', processors='{PROCESSORS}'"
        download = (f"stanza.download('{langs[0]}', {call})" if len(langs) == 1 else
                    f"[stanza.download(lang, {call}) for lang in {tuple(langs)!r}]")
        fetch = f"On a machine with network run: python -c \"import stanza; {download}\""
        if not known:  # which of them Stanza has models for at all is in the index

            fetch = (f"Stanza's model index is not there, so whether Stanza has models for these languages at all "
                     f"cannot be told: save {DEFAULT_RESOURCES_URL}/resources_{DEFAULT_RESOURCES_VERSION}.json as "
                     f"{self.folder / INDEX_FILE} and run again to be told. {fetch} (it fetches the models of those "
                     "Stanza has, and names any it has none for)")
        return (f"{fetch} and copy MODELS to {self.folder}, or pass it as --parser-model-dir MODELS; or choose another "
                "parser: --parser udpipe:MODEL (a UDPipe 1 model file or folder), --parser spacy:PIPELINE (an "
                "installed spaCy pipeline), --parser chain (no model: a right-branching chain, to check a setup), or "
                "pre-parsed CoNLL-U input (--parser conllu:PATH)")

    def _build_failed(self, lang: str, err: Exception) -> ParserUnavailable:
        """The error for a pipeline Stanza could not build: no download advice for a language its index has no
        models for; else what failed, and how to get the models."""
        index, _ = self.model_index()
        code = stanza_code(index, lang) if index is not None else None
        if index is not None and (code is None or any(p not in index[code] for p in NEEDED)):
            support = LanguageSupport(lang, Readiness.UNSUPPORTED, self._unsupported(index, lang, code),
                                      UNSUPPORTED_FIX)
        else:
            support = LanguageSupport(lang, Readiness.MISSING, self._cannot_load(lang, str(err)),
                                      self._download_fix([lang], known=index is not None))
        return ParserUnavailable(f"{support.detail}. {support.fix}", [support])

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


