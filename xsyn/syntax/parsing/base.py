"""What every parser is: the `Parser` protocol, its errors, and the helpers several parsers share.

This module imports no parser. The registry (`registry.py`) names the parsers and imports one only
when it is asked for, so `xsyn --help` loads neither Stanza, spaCy nor UDPipe, and no parser module
imports another's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from xsyn.syntax.record import SyntaxRecord
from xsyn.utils.errors import XsynError
from xsyn.utils.network import offline_unless_reachable


class Parser(Protocol):
    """Text or gold tokens in, one syntax record per segment out.

    `name`, `version` and `cache_identity()` address the parse cache (with the segment's content and
    language): a change of any of them re-parses. `preparsed` parsers look their trees up rather than
    compute them; the cache keys their parses by each segment's sent_id too, every process looks up
    all its segments itself, and `sent_ids` (one per text, or None) are handed to them. `data_trees`
    parsers serve the tree a segment's data carries (`Segment.gold_tree`, e.g. a UD treebank's); they
    are asked only about segments without one, and say so. `max_workers` caps the processes that
    parse side by side (None: no cap; 1 where a worker would cost more than it saves, or share one
    GPU); a parser sent to worker processes must pickle without its loaded models.

    A parser that needs models per language also has `language_support(langs, online)`: one
    `LanguageSupport` per language, found without reading any data or loading a model (the preflight
    calls it through `require_languages`); a parser without one serves every language as it is.
    """

    name: str
    version: str
    preparsed: bool
    data_trees: bool
    max_workers: int | None

    def cache_identity(self) -> dict[str, Any]: ...

    def parse_texts(self, texts: Sequence[str], lang: str, *, sent_ids: Sequence[str | None] | None = None
                    ) -> list[SyntaxRecord]: ...

    def parse_tokens(self, token_lists: Sequence[Sequence[str]], lang: str, *,
                     sent_ids: Sequence[str | None] | None = None) -> list[SyntaxRecord]: ...


class ParserUnavailable(XsynError, RuntimeError):
    """The parser cannot run here (models missing, or none exist for a language); the message says what
    does work. `support` holds the languages it is about, where it was found by `require_languages`."""

    def __init__(self, message: str, support: Sequence[LanguageSupport] = ()):
        super().__init__(message)
        self.support = tuple(support)


class Readiness(StrEnum):
    """How a parser stands with one language, before anything is parsed."""

    READY = "ready"  # its models are here
    FETCHABLE = "fetchable"  # its models are not here, and the parser downloads them at first use
    MISSING = "missing"  # its models are not here, and the parser cannot fetch them now (offline, downloads off,
    #                      a parser that never downloads: a UDPipe folder without that language's model)
    UNSUPPORTED = "unsupported"  # the parser has no models for it anywhere: no download helps


@dataclass(frozen=True)
class LanguageSupport:
    """One language as a parser can serve it: `detail` says what is there (the models) or what is wrong,
    `fix` what to do where the language is not usable, `models` names its models in a word or two, as a table
    of a run's languages shows them (Stanza's folder for it, `zh-hans` for zh; a UDPipe model file)."""

    lang: str
    readiness: Readiness
    detail: str
    fix: str = ""
    models: str = ""

    @property
    def usable(self) -> bool:
        return self.readiness in (Readiness.READY, Readiness.FETCHABLE)


# What works for a language a parser has no models for; a parser's `fix` for UNSUPPORTED languages ends with it.
OTHER_PARSE_SOURCES = (
    "give them a UDPipe 1 model (--parser udpipe:FOLDER, one .udpipe model per language, e.g. sw.udpipe; "
    "scripts/train_udpipe.py trains one from a UD treebank in minutes), parse them beforehand into CoNLL-U "
    "(--parser conllu:PATH), or leave them out of the run's languages")


def support_of(parser: Parser, langs: Sequence[str], online: bool | None = None) -> list[LanguageSupport]:
    """Each of `langs` (once each, in order) as `parser` can serve it; `online`: the network is there (None:
    decided once per process, `xsyn.utils.network`). Reads no data and loads no model: what the preflight,
    and a table of a run's languages, ask."""
    langs = list(dict.fromkeys(langs))
    check = getattr(parser, "language_support", None)
    if check is None:  # (chain, conllu:PATH, gold: no models per language; they say what they miss when asked)
        return [LanguageSupport(lang, Readiness.READY, "no models needed") for lang in langs]
    if online is None:

        online = not offline_unless_reachable()
    return check(langs, online)


def require_languages(parser: Parser, langs: Sequence[str], online: bool | None = None) -> list[LanguageSupport]:
    """`support_of`, or the `ParserUnavailable` that names every language the parser cannot serve, each with
    why, grouped by what fixes them."""
    support = support_of(parser, langs, online)
    unusable = [s for s in support if not s.usable]
    if not unusable:
        return support
    lines = [f"parser {parser.name} cannot parse {len(unusable)} of the {len(support)} language(s) asked for:"]
    for fix in dict.fromkeys(s.fix for s in unusable):
        lines += [f"  {s.lang}: {s.detail}" for s in unusable if s.fix == fix]
        lines += [fix] if fix else []
    raise ParserUnavailable("\n".join(lines), unusable)


class ParserChoiceError(XsynError, ValueError):
    """A parser choice that names no registered parser, or lacks (or wrongly has) its argument."""


UNSPACED_LANGUAGES = ("zh", "ja")  # written without spaces between words


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


SHOWN_MISSING = 5  # segments without a parse shown in the error; all are counted


class ParsesNotFound(XsynError, ValueError):
    """Segments that a parser which looks trees up (a CoNLL-U source, the data's own trees) has no tree
    for; `missing` describes each one, `how` says how they were looked up and `fix` what to do."""

    LOOKUP = ("texts are compared ignoring whitespace; segments of several sentences need those sentences "
              "consecutive in the file")
    FIX = "Parse these texts into the CoNLL-U source too, or choose another --parser"

    def __init__(self, source: str, missing: list[str], how: str = LOOKUP, fix: str = FIX):
        self.source, self.missing, self.how, self.fix = source, missing, how, fix
        shown = "\n".join(f"  {line}" for line in missing[:SHOWN_MISSING])
        more = f"\n  ... and {len(missing) - SHOWN_MISSING} more" if len(missing) > SHOWN_MISSING else ""
        super().__init__(f"{source} has no parse for {len(missing)} segment(s) ({how}):\n{shown}{more}\n{fix}")

    @classmethod
    def merge(cls, errors: Sequence[ParsesNotFound]) -> ParsesNotFound:
        """The errors of several batches as one, counting all their segments."""
        first = errors[0]
        return cls(first.source, [m for e in errors for m in e.missing], first.how, first.fix)
