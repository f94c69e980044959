"""UDPipe 1, the parser of Ahmad et al. (2021), through the `ufal.udpipe` package: `--parser udpipe:MODEL`.

MODEL is a `.udpipe` model file (a released UD 2.x model, or one trained with
`scripts/train_udpipe.py`), used for every language, or a folder of them, one per language as
Ahmad et al. used them: `en.udpipe` / `en_ewt.udpipe`, or named as UDPipe's releases are
(`english-ewt-ud-2.5-191206.udpipe`). Raw text goes through the model's tokenizer (which also splits
sentences); gold tokens are given one per line (UDPipe's `vertical` input), one sentence per
segment, and keep their tokenisation. Gold tokens that are the single characters of a language
written without spaces are parsed as their joined text, as with Stanza. The parse cache keys parses
by the UDPipe version and the sha256 of the model file (of every model in a folder), so another model
re-parses.

ufal.udpipe aborts the whole process (a C++ exception, exit 134) on some files that are not models,
so a model reaches it only after two checks: its first bytes must be UDPipe 1's model header (when
the parser is built), and a short-lived child process must load it (on first use, once per file
content in a process). A file that fails either is a one-line error naming it.
"""

from __future__ import annotations

import functools
import hashlib
import re
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ufal.udpipe as udpipe

from xsyn.syntax.conllu import parse_conllu
from xsyn.syntax.parsing.base import LanguageSupport, ParserUnavailable, Readiness, joins_characters
from xsyn.syntax.parsing.placement import place_sentences, source_checksum
from xsyn.syntax.record import SyntaxRecord, TreeError
from xsyn.syntax.treebanks import load_registry
from xsyn.utils.errors import MissingInputError
from xsyn.utils.io import atomic_write_bytes

# A UDPipe 1 model file starts with its model type as a length-prefixed string; UDPipe 1 has one type.
MODEL_HEADER = b"\x12morphodita_parsito"
_PROBE = "import sys, ufal.udpipe as u; sys.exit(0 if u.Model.load(sys.argv[1]) is not None else 3)"
PROBE_SECONDS = 300  # a released model loads in seconds; a hung load is reported, not waited for


def not_a_model(path: Path, why: str) -> ParserUnavailable:
    return ParserUnavailable(f"--parser udpipe:{path}: not a UDPipe 1 model ({why}); pass a .udpipe model file "
                             "(a released UD 2.x model, or one trained with scripts/train_udpipe.py)")


def check_header(path: Path) -> None:
    """Refuse a file that does not start as a UDPipe 1 model does (text, another format, empty)."""
    with path.open("rb") as fh:
        head = fh.read(len(MODEL_HEADER))
    if head != MODEL_HEADER:
        raise not_a_model(path, "empty file" if not head else f"it starts with {head[:8]!r}, not {MODEL_HEADER!r}")


@functools.cache
def probe_load(path: Path, sha256: str) -> str | None:
    """Load the model in a child process: None if it loads, else why not (the child may crash; we do not).
    Cached by content: the same bytes are probed once per process."""
    try:
        done = subprocess.run([sys.executable, "-c", _PROBE, str(path)], capture_output=True, text=True,
                              timeout=PROBE_SECONDS)
    except subprocess.TimeoutExpired:
        return f"loading it took over {PROBE_SECONDS} s"
    if done.returncode == 0:
        return None
    if done.returncode == 3:
        return "ufal.udpipe cannot load it: damaged or truncated"
    last = (done.stderr.strip().splitlines() or ["no message"])[-1].strip()
    how = signal.Signals(-done.returncode).name if done.returncode < 0 else f"exit status {done.returncode}"
    return f"ufal.udpipe crashed loading it ({how}: {last[:120]})"


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class UDPipeParser:
    """One UDPipe model for every language, or a folder with one model per language."""

    name = "udpipe"
    preparsed = False
    data_trees = False
    max_workers = None

    def __init__(self, model_path: str | Path):
        self.path = Path(model_path)
        if self.path.is_file():
            self.models, self.checksum = [self.path], file_sha256(self.path)
        elif self.path.is_dir() and sorted(self.path.glob("*.udpipe")):
            self.models = sorted(self.path.glob("*.udpipe"))
            self.checksum = source_checksum(self.models, self.path)
        else:
            what = "folder has no .udpipe models" if self.path.is_dir() else "model file does not exist"
            raise MissingInputError(f"--parser udpipe:{self.path}: the {what}; download a UDPipe 1 model (a .udpipe "
                                    "file) or train one with scripts/train_udpipe.py")
        for model in self.models:
            check_header(model)
        self.version = udpipe.__version__
        self._udpipe = udpipe
        self._loaded: dict[Path, Any] = {}

    def cache_identity(self) -> dict[str, Any]:
        return {"model_sha256": self.checksum}

    def __getstate__(self) -> dict[str, Any]:
        """What a parse worker is sent: the model paths, not the loaded models (each worker loads its own)."""
        return {**self.__dict__, "_udpipe": None, "_loaded": {}}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _udpipe=udpipe)

    def language_support(self, langs: Sequence[str], online: bool) -> list[LanguageSupport]:
        """Before any data is read (the preflight): a model for each language, so that a folder without one
        stops the command at once, not after the training that precedes an evaluation in that language."""
        support = []
        for lang in langs:
            try:
                model = self.model_for(lang)
                support.append(LanguageSupport(lang, Readiness.READY, str(model), models=model.name))
            except ParserUnavailable as err:  # no model for it, or several: the folder is the fix, not a download
                support.append(LanguageSupport(lang, Readiness.MISSING, str(err)))  # (its fix included)
        return support

    def model_for(self, lang: str) -> Path:
        """The model file for a language: the only one, or the folder's model named for the language."""
        if self.path.is_file():
            return self.path
        base = lang.split("-")[0].lower()
        treebanks = load_registry().get(base, ())
        names = {base} | {tb.language.lower() for tb in treebanks}
        found = [m for m in self.models if re.split(r"[-_.]", m.name, maxsplit=1)[0].lower() in names]
        if len(found) > 1:  # several treebanks' models: the registry's order of preference (the paper's first)
            for tb in treebanks:
                treebank = tb.code.split("_", 1)[-1]
                preferred = [m for m in found if re.search(rf"[-_]{re.escape(treebank)}([-_.]|$)", m.name.lower())]
                if preferred:
                    return preferred[0]
            raise ParserUnavailable(f"several UDPipe models for language {lang!r} in {self.path}: "
                                    f"{', '.join(m.name for m in found)}; keep one per language")
        if not found:
            language = treebanks[0].language.lower() if treebanks else "LANGUAGE"
            raise ParserUnavailable(
                f"no UDPipe model for language {lang!r} in {self.path} (models there: "
                f"{', '.join(m.name for m in self.models)}); add {base}.udpipe, or a model named as UDPipe's "
                f"releases are ({language}-TREEBANK-ud-2.5-191206.udpipe)")
        return found[0]

    def _pipeline(self, lang: str, input_format: str) -> Any:
        path = self.model_for(lang)
        if path not in self._loaded:
            failure = probe_load(path.resolve(), file_sha256(path))
            model = self._udpipe.Model.load(str(path)) if failure is None else None
            if model is None:
                raise not_a_model(path, failure or "ufal.udpipe cannot load it")
            self._loaded[path] = model
        udpipe = self._udpipe
        return udpipe.Pipeline(self._loaded[path], input_format, udpipe.Pipeline.DEFAULT, udpipe.Pipeline.DEFAULT,
                               "conllu")

    def _run(self, pipeline: Any, source: str, lang: str) -> list[SyntaxRecord]:
        error = self._udpipe.ProcessingError()
        output = pipeline.process(source, error)
        if error.occurred():
            raise TreeError(f"UDPipe ({self.model_for(lang).name}) failed on {source[:60]!r}: {error.message}")
        # lines end at "\n" alone: str.splitlines would also break at characters of the text (U+2028, U+0085)
        return list(parse_conllu(output.split("\n"), source=f"UDPipe output for {source[:40]!r}", lang=lang))

    def parse_texts(self, texts: Sequence[str], lang: str, *, sent_ids: Sequence[str | None] | None = None
                    ) -> list[SyntaxRecord]:
        pipeline = self._pipeline(lang, "tokenize")
        return [place_sentences(self._run(pipeline, text, lang), text, lang) for text in texts]

    def parse_tokens(self, token_lists: Sequence[Sequence[str]], lang: str, *,
                     sent_ids: Sequence[str | None] | None = None) -> list[SyntaxRecord]:
        records = []
        for tokens in token_lists:
            if joins_characters(tokens, lang):
                sentences = self._run(self._pipeline(lang, "tokenize"), "".join(tokens), lang)
            else:  # one token per line (whitespace inside a token would split it: it is dropped)
                lines = [line for line in ("".join(token.split()) for token in tokens) if line]
                sentences = self._run(self._pipeline(lang, "vertical"), "\n".join(lines) + "\n\n", lang)
            records.append(place_sentences(sentences, list(tokens), lang))
        return records


# -- training a model -----------------------------------------------------------------------------------

# UDPipe trainer options (its own syntax, `key=value;...`) that train a small working model in seconds:
# a UPOS-only tagger (no lemmas, XPOS or features: xsyn reads UPOS) and a narrow parser. UDPipe's released
# models are trained far longer and tag everything.
QUICK_TOKENIZER = "epochs=1;dimension=16"
QUICK_TAGGER = ("iterations=2;use_lemma=0;provide_lemma=0;use_xpostag=0;provide_xpostag=0;use_feats=0;"
                "provide_feats=0;guesser_suffix_rules=4;guesser_enrich_dictionary=2")
QUICK_PARSER = "iterations=2;hidden_layer=64;embedding_form_file=;structured_interval=0"


def train_model(treebank: str | Path, output: str | Path, sentences: int = 200, tokenizer: str = QUICK_TOKENIZER,
                tagger: str = QUICK_TAGGER, parser: str = QUICK_PARSER) -> Path:
    """Train a UDPipe 1 tokenizer + tagger + parser on the first `sentences` of a CoNLL-U treebank with
    ufal.udpipe's own trainer (options in UDPipe's syntax), and write the model file atomically.
    Training is deterministic for given data and options."""
    conllu = udpipe.InputFormat.newConlluInputFormat()
    conllu.setText(Path(treebank).read_text(encoding="utf-8-sig"))
    data, error, sentence = udpipe.Sentences(), udpipe.ProcessingError(), udpipe.Sentence()
    while len(data) < sentences and conllu.nextSentence(sentence, error):
        data.append(sentence)
        sentence = udpipe.Sentence()
    if error.occurred() or not len(data):
        raise TreeError(f"{treebank}: no training sentences read ({error.message or 'empty file'})")
    model = udpipe.Trainer.train("morphodita_parsito", data, udpipe.Sentences(), tokenizer, tagger, parser, error)
    if error.occurred() or not model:
        raise TreeError(f"UDPipe training on {treebank} failed: {error.message}")
    atomic_write_bytes(output, model if isinstance(model, bytes) else model.encode("latin-1"))
    return Path(output)
