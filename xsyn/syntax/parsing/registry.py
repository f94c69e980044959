"""The parsers xsyn knows, by name: what each takes, its help text and its options, and how to build it.

    choice = resolve_parser_choice("udpipe:models/en.udpipe")   # ParserChoice(name="udpipe", argument=...)
    parser = build_parser("stanza", parser_device="cuda:1")      # the run settings of its options

Each entry names its class as "module:Class" and is imported only when a parser is built, so listing
the parsers (the CLI's help, the docs' parser table, checking a run's settings) loads no parser library.
A parser's options are declared once here (`ParserOption`): the CLI makes one flag of each and the
run settings hold one field of each; parsers that share a setting (a batch size) share the option.

A third-party package adds a parser through the entry-point group `xsyn.parsers`: the entry point's
name is the parser's name and its object a `ParserEntry`, e.g. in its pyproject.toml

    [project.entry-points."xsyn.parsers"]
    mine = "my_package.xsyn_parser:ENTRY"
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xsyn.syntax.parsing.base import Parser, ParserChoiceError
from xsyn.utils.registry import PluginError, Registry

ENTRY_POINT_GROUP = "xsyn.parsers"


@dataclass(frozen=True)
class ParserOption:
    """One setting of a parser: a run setting `setting` (also the CLI flag `--setting-with-dashes`),
    handed to the parser class as `keyword`. Unset (None) means `default`."""

    setting: str
    keyword: str
    help: str
    type: type = str
    default: Any = None
    choices: tuple[str, ...] | None = None
    folder: bool = False  # a folder on disk
    minimum: int | None = None
    changes_parses: bool = False  # it decides the trees (not only how or where they are made)

    @property
    def flag(self) -> str:
        return "--" + self.setting.replace("_", "-")


@dataclass(frozen=True)
class ParserEntry:
    """A parser as the registry knows it, without importing it.

    `takes` is the argument's placeholder after the colon (`udpipe:MODEL`), None for a parser without
    one; `argument_help` says what it is; `argument_is_path`: it must exist on disk before the parser
    is built. `target` is "module:Class"; the class is called with the argument (if any) and the
    keywords of `options`."""

    name: str
    target: str
    help: str
    takes: str | None = None
    argument_help: str = ""
    argument_is_path: bool = False
    options: tuple[ParserOption, ...] = ()

    @property
    def form(self) -> str:
        """How the choice is written: `stanza`, `udpipe:MODEL`."""
        return f"{self.name}:{self.takes}" if self.takes else self.name

    def load(self) -> type:
        module, _, attribute = self.target.partition(":")
        return getattr(importlib.import_module(module), attribute)


# -- the options ------------------------------------------------------------------------------------------

STANZA_BATCH_DOCS = 256  # documents per parser call, unless a run or command sets another
DOWNLOAD_POLICIES = ("none", "reuse", "download")

MODEL_DIR = ParserOption("parser_model_dir", "model_dir", "Folder of Stanza models (default: Stanza's own).",
                         folder=True)
DOWNLOAD = ParserOption("parser_download", "download", "Stanza's model download policy: none (use the folder as "
                        "it is), reuse (download what is missing), download (refresh).", default="reuse",
                        choices=DOWNLOAD_POLICIES)
DEVICE = ParserOption("parser_device", "device", "Device for the parser (cpu, cuda, cuda:1) [default: a GPU "
                      "when there is one].")
BATCH_SIZE = ParserOption("parser_batch_size", "batch_docs", "Documents per parser call.", type=int,
                          default=STANZA_BATCH_DOCS, minimum=1)
WORD_SPLITS = ("own", "whitespace")
WORDS = ParserOption("parser_words", "words", "How the parser cuts raw text into words: own (its tokenizer) or "
                     "whitespace (one word per space-separated token, as Li et al. parse with spaCy, in their paper "
                     "and their code).", default="own", choices=WORD_SPLITS, changes_parses=True)
# Every parser option: each is a run setting (a RunConfig field) and a flag of every parsing command. A parser
# (a third-party one too) declares those of them it takes.
PARSER_OPTIONS = (MODEL_DIR, DOWNLOAD, DEVICE, BATCH_SIZE, WORDS)

# -- the parsers ------------------------------------------------------------------------------------------

BUILTIN_PARSERS = (
    ParserEntry("stanza", "xsyn.syntax.parsing.stanza:StanzaParser", "Stanza's neural UD pipeline",
                options=(MODEL_DIR, DOWNLOAD, DEVICE, BATCH_SIZE)),
    ParserEntry("chain", "xsyn.syntax.parsing.chain:ChainParser", "a model-free linear-order control tree"),
    ParserEntry("conllu", "xsyn.syntax.parsing.preparsed:ConlluParser",
                "trees looked up by each segment's text in pre-parsed CoNLL-U",
                takes="PATH", argument_help="a CoNLL-U file or a folder of .conllu files", argument_is_path=True),
    ParserEntry("udpipe", "xsyn.syntax.parsing.udpipe:UDPipeParser", "UDPipe 1 (Ahmad et al.'s parser)",
                takes="MODEL", argument_help="a .udpipe model file, or a folder of them, one per language",
                argument_is_path=True),
    ParserEntry("spacy", "xsyn.syntax.parsing.spacy:SpacyParser",
                "spaCy (Li et al.'s parser), English labels mapped to UD; needs pip install 'xsyn[spacy]'",
                takes="PIPELINE", argument_help="an installed pipeline package, e.g. en_core_web_sm, or its folder",
                options=(BATCH_SIZE, WORDS)),
    ParserEntry("gold", "xsyn.syntax.parsing.gold:GoldParser",
                "the trees the task's own data carries (UD CoNLL-U input); nothing is parsed"),
)


class ParserPluginError(PluginError):
    """An installed package's `xsyn.parsers` entry point that does not give a usable parser entry."""


def _foreign_options(entry: ParserEntry) -> str | None:
    foreign = [option.setting for option in entry.options if option not in PARSER_OPTIONS]
    return (f"declares options xsyn has no run setting for: {', '.join(foreign)}; use those of "
            "xsyn.syntax.parsing.registry.PARSER_OPTIONS") if foreign else None


PARSERS: Registry[ParserEntry] = Registry(
    "parser", {entry.name: entry for entry in BUILTIN_PARSERS}, group=ENTRY_POINT_GROUP, of=ParserEntry,
    expected="xsyn.syntax.parsing.ParserEntry", name_of=lambda entry: entry.name, check=_foreign_options,
    plugin_error=ParserPluginError)


@functools.cache
def registered_parsers() -> dict[str, ParserEntry]:
    """Every usable parser by name: xsyn's own, then those installed packages register, each loaded and checked
    here (a broken plugin is left out with a warning naming it; asked for by name, it is its error); read once."""
    PARSERS.refresh()
    return dict(PARSERS.items())


def parser_forms() -> str:
    """`stanza, chain, conllu:PATH, ...`: the forms a parser choice takes."""
    return ", ".join(entry.form for entry in registered_parsers().values())


def parsers_help() -> str:
    """One phrase per parser, for the CLI's --parser help."""
    return "; ".join(f"{entry.form} = {entry.help}" + (f" ({entry.takes}: {entry.argument_help})"
                                                         if entry.takes else "")
                     for entry in registered_parsers().values())


def parser_table(entries: Sequence[ParserEntry] = BUILTIN_PARSERS) -> str:
    """The parser table of docs/parsers.md (a test keeps the page's copy equal to this)."""
    rows = ["| `--parser` | what | its options |", "|---|---|---|"]
    for entry in entries:
        what = entry.help + (f"; {entry.takes}: {entry.argument_help}" if entry.takes else "")
        options = ", ".join(f"`{option.flag}`" for option in entry.options) or "none"
        rows.append(f"| `{entry.form}` | {what} | {options} |")
    return "\n".join(rows)


@dataclass(frozen=True)
class ParserChoice:
    """A parser choice as written (`udpipe:models/en.udpipe`), resolved: the entry and its argument."""

    entry: ParserEntry
    argument: str | None

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def label(self) -> str:
        """A short name for charts and tables: `udpipe:en.udpipe`."""
        return f"{self.name}:{Path(self.argument).name}" if self.argument else self.name

    def missing_path(self) -> str | None:
        """A message when the argument should be a file or folder that does not exist; else None."""
        if self.entry.argument_is_path and not Path(self.argument or "").exists():
            return (f"parser '{self.name}:{self.argument}': {self.argument} does not exist; give "
                    f"{self.entry.argument_help}")
        return None


def resolve_parser_choice(choice: str) -> ParserChoice:
    """`stanza` -> the stanza entry, no argument; `udpipe:MODEL` -> the udpipe entry and MODEL.

    The one check of a parser choice, for every command and run setting: the name must be registered
    and take an argument exactly when its entry does (whether a path exists is `missing_path`)."""
    parsers = registered_parsers()
    name, colon, argument = choice.partition(":")
    entry = parsers.get(name)
    if entry is None and name in PARSERS:
        entry = PARSERS[name]  # a broken plugin: its error, naming its package
    if entry is None:
        raise ParserChoiceError(f"unknown parser {choice!r}; choose one of: {parser_forms()}")
    if entry.takes and not argument.strip():
        raise ParserChoiceError(f"parser {choice!r}: give {entry.argument_help} after the colon, e.g. "
                                f"{entry.form}")
    if not entry.takes and colon:
        raise ParserChoiceError(f"parser {choice!r}: {name} takes nothing after a colon; write --parser {name}")
    return ParserChoice(entry, argument if entry.takes else None)


def build_parser(choice: str, **settings: Any) -> Parser:
    """The parser a choice names, given the run settings of the parser options (`parser_device=...`):
    each parser receives those of its own options; unset ones take the option's default. The parser
    checks its argument itself (a missing file, a folder without models), saying what to give."""
    resolved = resolve_parser_choice(choice)
    unknown = set(settings) - {option.setting for option in PARSER_OPTIONS}
    if unknown:
        raise TypeError(f"not parser options: {sorted(unknown)}")
    keywords = option_keywords(resolved.entry, settings)
    try:
        cls = resolved.entry.load()
    except Exception as err:
        origin = PARSERS.origin(resolved.name)
        if origin is None:  # xsyn's own parser: a bug, with its traceback
            raise
        raise ParserPluginError(f"{origin}: its parser {resolved.entry.target} cannot be loaded "
                                f"({type(err).__name__}: {err}); fix or uninstall that package") from None
    return cls(resolved.argument, **keywords) if resolved.entry.takes else cls(**keywords)


def option_keywords(entry: ParserEntry, settings: Mapping[str, Any]) -> dict[str, Any]:
    """The keywords an entry's class is built with, from settings by run-setting name."""
    return {option.keyword: option.default if settings.get(option.setting) is None else settings[option.setting]
            for option in entry.options}
