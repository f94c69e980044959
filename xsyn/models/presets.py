"""Tokenizers and the `tiny` model preset.

`load_tokenizer(spec)` takes a `vocab.txt`, a tokenizer (or model) directory, or a hub name and
returns a fast BERT tokenizer. A bare `vocab.txt` is read cased unless told otherwise (mBERT is
cased); note `BertTokenizerFast(vocab_file=...)` silently ignores the file, so the vocabulary is
passed as `vocab=`.

`tiny` is a randomly initialised small model (2 layers, hidden 128, 2 heads) of the given tokenizer's family
(a BERT, an XLM-R, ...; `tiny_config`), on its vocabulary:
what tests, the demo and CPU smoke runs use. It goes through the same code as a real checkpoint.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from transformers import AutoTokenizer, BertTokenizerFast, PretrainedConfig, PreTrainedTokenizerBase

from xsyn.models.defaults import DEFAULT_MODEL, TINY_SHAPE
from xsyn.models.families import FAMILIES, family_named, resolve, tokenizer_family
from xsyn.utils.errors import InputError, MissingInputError, first_line

log = logging.getLogger(__name__)
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def load_tokenizer(spec: str | Path | None = None, *, do_lower_case: bool | None = None
                   ) -> PreTrainedTokenizerBase:
    """A fast tokenizer from a `vocab.txt`, a directory, or a hub name (default: mBERT cased)."""
    spec = DEFAULT_MODEL if spec is None else spec
    path = Path(spec)
    if path.is_file():
        return BertTokenizerFast(vocab=str(path), do_lower_case=bool(do_lower_case))
    if path.is_dir():
        if any((path / name).is_file() for name in _TOKENIZER_FILES):
            options = {} if do_lower_case is None else {"do_lower_case": do_lower_case}
            _check_json_files(path)
            return _fast(AutoTokenizer.from_pretrained(path, **options), spec)
        if (path / "vocab.txt").is_file():
            return BertTokenizerFast(vocab=str(path / "vocab.txt"), do_lower_case=bool(do_lower_case))
        raise MissingInputError(f"{path} holds no tokenizer: expected tokenizer.json, tokenizer_config.json "
                                "or vocab.txt")
    name = str(spec)
    if do_lower_case is None and "cased" in name and "uncased" not in name:
        do_lower_case = False
    options = {} if do_lower_case is None else {"do_lower_case": do_lower_case}
    try:
        tokenizer = AutoTokenizer.from_pretrained(name, **options)
    except OSError as err:
        raise MissingInputError(f"cannot load the tokenizer {name!r}: it is neither a local file or directory nor "
                                f"reachable on the Hugging Face hub (offline?); pass a vocab.txt or a tokenizer "
                                f"directory instead (--tokenizer). Cause: {first_line(err)}") from err
    return _fast(tokenizer, name)


def _check_json_files(folder: Path) -> None:
    """The JSON files `AutoTokenizer` reads from a folder parse; else a `ValueError` naming the damaged
    one (the tokenizer libraries report only a line and column, or no fix)."""
    for name in (*_TOKENIZER_FILES, "special_tokens_map.json", "config.json"):
        file = folder / name
        if not file.is_file():
            continue
        try:
            value = json.loads(file.read_bytes())
        except ValueError as err:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            raise InputError(f"{file} cannot be read ({err}): the file is damaged (cut short by a kill or a full "
                             "disk?); restore the checkpoint, or use another one") from None
        if not isinstance(value, dict):  # the libraries would fail on it with a TypeError
            raise InputError(f"{file} holds a JSON {type(value).__name__}, not an object: the file is damaged or "
                             "not a tokenizer's; restore the checkpoint, or use another one")


def _fast(tokenizer: PreTrainedTokenizerBase, spec) -> PreTrainedTokenizerBase:
    if not tokenizer.is_fast:
        raise TypeError(f"{spec}: xsyn needs a fast tokenizer (for character offsets); got "
                        f"{type(tokenizer).__name__}")
    return tokenizer


def tiny_config(tokenizer: PreTrainedTokenizerBase, family: str | None = None) -> PretrainedConfig:
    """The `tiny` preset's shape in the tokenizer's family (a tiny XLM-R from an XLM-R tokenizer), or in
    `family` where given; a generic tokenizer of no known family gets a BERT, with a warning."""
    found = tokenizer_family(tokenizer)
    source = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
    if family is not None and found is not None and found.name != family:
        raise InputError(f"the tokenizer {source} is a {found.name} tokenizer, but tiny_family asks for a {family} "
                         f"model; drop tiny_family (tiny follows the tokenizer), or give a {family} tokenizer")
    if family is None and found is None:
        log.warning(f"the tokenizer {source} ({type(tokenizer).__name__}) names no model family; the tiny model is "
                    f"a BERT (choose one with --set tiny_family=NAME: {', '.join(FAMILIES)})")
    chosen = family_named(family) if family is not None else found or family_named("bert")
    shape = dict(TINY_SHAPE)
    if chosen.padded_positions:  # positions count from the padding index + 1 (RoBERTa): room for the full length
        shape.update(max_position_embeddings=TINY_SHAPE["max_position_embeddings"] + tokenizer.pad_token_id + 1,
                     type_vocab_size=1)
    return resolve(chosen.config)(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                                  bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, **shape)
