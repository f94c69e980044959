"""A parser per language: a run's parser, and the languages that name their own, each choice built once.

    parsers = LanguageParsers("stanza", {"sw": "udpipe:models/sw.udpipe"}, build)
    parsers.choice("sw")              # 'udpipe:models/sw.udpipe'
    parsers["sw"]                     # its parser, built at first use; every language of that choice shares it
    parsers.require(["en", "sw"])     # each language checked by its own parser (`require_languages`)

Each language's segments are parsed, and cached, by its own parser (`xsyn.syntax.parse.parse_by_language`): the
parse cache keys a segment by the parser that parsed it, so a language parsed again by another is parsed anew.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from xsyn.syntax.parsing.base import LanguageSupport, Parser, ParserUnavailable, require_languages, support_of


class LanguageParsers:
    """The parser of each language: `own` choices (language -> choice) over the `default` one, built by `build`
    (a choice -> its parser) once per choice, when a language first asks for it."""

    def __init__(self, default: str, own: Mapping[str, str], build: Callable[[str], Parser]):
        self.default, self.own, self._build = default, dict(own), build
        self._built: dict[str, Parser] = {}

    def choice(self, lang: str) -> str:
        return self.own.get(lang, self.default)

    def choices(self, langs: Iterable[str]) -> dict[str, str]:
        """Each language (once, in order) and its parser choice: the plain mapping a run records."""
        return {lang: self.choice(lang) for lang in dict.fromkeys(langs)}

    def __getitem__(self, lang: str) -> Parser:
        choice = self.choice(lang)
        if choice not in self._built:
            self._built[choice] = self._build(choice)
        return self._built[choice]

    def by_choice(self, langs: Iterable[str]) -> dict[str, list[str]]:
        """The languages of each choice among `langs`, in order of first use."""
        groups: dict[str, list[str]] = {}
        for lang, choice in self.choices(langs).items():
            groups.setdefault(choice, []).append(lang)
        return groups

    def support(self, langs: Sequence[str], online: bool | None = None) -> list[LanguageSupport]:
        """Each language as its own parser can serve it (`support_of`), in the order of `langs`."""
        found = {s.lang: s for langs_of in self.by_choice(langs).values()
                 for s in support_of(self[langs_of[0]], langs_of, online)}
        return [found[lang] for lang in dict.fromkeys(langs)]

    def require(self, langs: Sequence[str], online: bool | None = None) -> list[LanguageSupport]:
        """`support`, or one `ParserUnavailable` naming every language its parser cannot serve; where languages
        have parsers of their own, each parser's part says which languages it parses, and by which setting."""
        support: dict[str, LanguageSupport] = {}
        failed: list[ParserUnavailable] = []
        for choice, group in self.by_choice(langs).items():
            try:
                support.update((s.lang, s) for s in require_languages(self[group[0]], group, online))
            except ParserUnavailable as err:
                failed.append(err if not self.own else ParserUnavailable(
                    f"{', '.join(group)}: parser {choice} ({self._setting(group)}); {err}", err.support))
        if failed:
            raise ParserUnavailable("\n".join(map(str, failed)), [s for err in failed for s in err.support])
        return [support[lang] for lang in dict.fromkeys(langs)]

    def _setting(self, group: Sequence[str]) -> str:
        own = [lang for lang in group if lang in self.own]
        return ", ".join(f"parsers.{lang}" for lang in own) if own else "--parser"
