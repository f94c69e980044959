"""One reader per released file format. A card's `[[local]]` layout names its reader in `format`.

A reader turns files into rows: dicts keyed by role (`id`, a segment name, `tokens`, `tags`,
`label`, `question`, `context`, `answers`), each with `where` (file and line) for messages.
`xsyn.data.loading.build_example` turns rows into `Example`s and checks them against the card.

A row a reader cannot parse goes to `BadRows`: an error naming the file and line (default), or,
with `skip_bad_rows=True` (`--skip-bad-rows`), skipped and counted in the load report; test rows are
never skipped. Nothing is dropped silently.

| format        | files                                                                         |
|---------------|-------------------------------------------------------------------------------|
| `tsv`         | tab-separated rows, with a header or positional columns, optionally csv-quoted |
| `conll`       | one token per line with its tag, blank line between sentences                 |
| `squad_json`  | SQuAD v1.1 / 2.0 JSON (SQuAD, MLQA, XQuAD)                                    |
| `mtop`        | MTOP's 8-column TSV; BIO slot tags from character offsets                     |
| `cged_sgml`   | NLPTEA CGED `<DOC><TEXT>..<ERROR ..>` files; character-level BIO over R/M/S/W |
| `cged_truth`  | NLPTEA CGED test release: `(sid=ID)<TAB>text` input plus `ID, start, end, type`|
| `conllu`      | Universal Dependencies CoNLL-U: the syntactic words and their UPOS tags       |
| `race_json`   | RACE: a folder of `{middle,high}/*.txt` JSON files, one article and its questions |
| `synth`       | no files: xsyn's synthetic typology benchmark (`xsyn.data.synth.generate_split`)   |
"""

from __future__ import annotations

from xsyn.data.readers.base import (
    BadRows,
    DataFormatError,
    Reader,
    ReadRequest,
    Row,
    file_exists,
    read_text,
)
from xsyn.data.readers.cged import CGED_TYPES, CgedSgmlReader, CgedTruthReader, errors_to_bio
from xsyn.data.readers.json_files import RaceJsonReader, SquadJsonReader
from xsyn.data.readers.synthetic import SynthReader
from xsyn.data.readers.text import ConllReader, ConlluReader, MtopReader, TsvReader, iob1_to_iob2, spans_to_bio
from xsyn.utils.registry import Registry

READERS: Registry[Reader] = Registry("data format", {
    "tsv": TsvReader(), "conll": ConllReader(), "squad_json": SquadJsonReader(), "mtop": MtopReader(),
    "cged_sgml": CgedSgmlReader(), "cged_truth": CgedTruthReader(), "conllu": ConlluReader(),
    "race_json": RaceJsonReader(),
    "synth": SynthReader(),
}, of=Reader)

__all__ = [
    "READERS", "BadRows", "DataFormatError", "Reader", "ReadRequest", "Row", "file_exists", "read_text", "CGED_TYPES",
    "CgedSgmlReader", "CgedTruthReader", "errors_to_bio", "RaceJsonReader", "SquadJsonReader", "SynthReader",
    "ConllReader", "ConlluReader", "MtopReader", "TsvReader", "iob1_to_iob2", "spans_to_bio",
]
