"""Parsers: text or gold tokens in, syntax records out, found by name in one registry.

| module         | parser                                                                          |
|----------------|---------------------------------------------------------------------------------|
| base.py        | the `Parser` protocol, its errors, helpers several parsers share (no parser)     |
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

from xsyn.syntax.parsing.base import Parser, ParserChoiceError, ParserUnavailable
from xsyn.syntax.parsing.registry import (
    ParserChoice,
    ParserEntry,
    ParserOption,
    build_parser,
    registered_parsers,
    resolve_parser_choice,
)

__all__ = ["Parser", "ParserChoice", "ParserChoiceError", "ParserEntry", "ParserOption", "ParserUnavailable",
           "build_parser", "registered_parsers", "resolve_parser_choice"]
