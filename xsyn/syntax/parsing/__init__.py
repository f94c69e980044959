"""Parsers: text or gold tokens in, syntax records out, found by name in one registry.

| module         | parser                                                                          |
|----------------|---------------------------------------------------------------------------------|
| base.py        | `Parser`, its errors, `support_of` (a parser's languages), shared helpers       |
| registry.py    | every parser's name, argument, help and options; `build_parser(choice)`         |
| stanza.py      | `stanza`: Stanza's neural pipeline                                              |
| chain.py       | `chain`: a model-free linear-order control tree                                 |
| preparsed.py   | `conllu:PATH`: the trees of a pre-parsed CoNLL-U file or folder                 |
| udpipe.py      | `udpipe:MODEL`: UDPipe 1                                                        |
| spacy.py       | `spacy:PIPELINE`: a spaCy pipeline, labels mapped to UD                         |
| gold.py        | `gold`: the trees the task's data carries                                       |

Adding a parser: its module, and one `ParserEntry` in `registry.BUILTIN_PARSERS` (or, from another
package, an `xsyn.parsers` entry point). Importing this package imports no parser library.
"""

from xsyn.syntax.parsing.base import (
    LanguageSupport,
    Parser,
    ParserChoiceError,
    ParserUnavailable,
    Readiness,
    require_languages,
    support_of,
)
from xsyn.syntax.parsing.registry import (
    ParserChoice,
    ParserEntry,
    ParserOption,
    build_parser,
    registered_parsers,
    resolve_parser_choice,
)

__all__ = ["LanguageSupport", "Parser", "ParserChoice", "ParserChoiceError", "ParserEntry", "ParserOption",
           "ParserUnavailable", "Readiness", "build_parser", "registered_parsers", "require_languages",
           "resolve_parser_choice", "support_of"]
