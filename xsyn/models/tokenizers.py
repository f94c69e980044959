"""Tokenizers: `load_tokenizer(spec)` takes a `vocab.txt`, a tokenizer (or model) directory, or a hub name and
returns a fast tokenizer (xsyn needs character offsets)."""

from __future__ import annotations

import json
from pathlib import Path

from transformers import AutoTokenizer, BertTokenizerFast, PreTrainedTokenizerBase

from xsyn.models.names import DEFAULT_MODEL, TINY
from xsyn.utils.errors import InputError, MissingInputError, first_line

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def load_tokenizer(spec: str | Path | None = None, *, do_lower_case: bool | None = None, config=None
                   ) -> PreTrainedTokenizerBase:
    """A fast tokenizer from a `vocab.txt`, a directory, or a hub name (default: mBERT cased). `config`: the
    model's configuration where it is read already (its config.json is then not read again)."""
    spec = DEFAULT_MODEL if spec is None else spec
    path = Path(spec)
    if path.is_file():  # a bare vocab.txt: read cased unless told otherwise (mBERT is cased)
        # as `vocab=`: `BertTokenizerFast(vocab_file=...)` silently ignores the file
        return BertTokenizerFast(vocab=str(path), do_lower_case=bool(do_lower_case))
    if path.is_dir():
        if any((path / name).is_file() for name in _TOKENIZER_FILES):
            options = {} if do_lower_case is None else {"do_lower_case": do_lower_case}
            try:
                loaded = AutoTokenizer.from_pretrained(path, **options, **({"config": config} if config else {}))
            except Exception:  # noqa: BLE001 - name the damaged file, where the library says a line and column or nothing
                _check_json_files(path)
                raise
            return _fast(loaded, spec)
        if (path / "vocab.txt").is_file():
            return BertTokenizerFast(vocab=str(path / "vocab.txt"), do_lower_case=bool(do_lower_case))
        raise MissingInputError(f"{path} holds no tokenizer: expected tokenizer.json, tokenizer_config.json "
                                "or vocab.txt")
    name = str(spec)
    if do_lower_case is None and "cased" in name and "uncased" not in name:
        do_lower_case = False
    options = {} if do_lower_case is None else {"do_lower_case": do_lower_case}
    try:
        tokenizer = AutoTokenizer.from_pretrained(name, **options, **({"config": config} if config else {}))
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


def model_tokenizer(model: str, tokenizer: str | None = None, config=None) -> PreTrainedTokenizerBase:
    """The tokenizer a model is run with: `tokenizer` if given, else the model's (for `tiny`: mBERT's, and where
    that is not here, an error naming the local vocabularies that serve instead); `config`, the model's
    configuration read already, serves the model's own tokenizer."""
    if model != TINY or tokenizer:
        return load_tokenizer(tokenizer or model, config=config if tokenizer is None else None)
    try:
        return load_tokenizer(DEFAULT_MODEL, config=config)
    except MissingInputError as err:
        raise MissingInputError(
            f"--model {TINY} takes {DEFAULT_MODEL}'s tokenizer unless --tokenizer names one, and that is not on this "
            f"machine (offline, and not in the hub cache): give a local vocabulary with --tokenizer FILE. For the "
            f"synthetic task (--task synth) its own: `xsyn demo` writes it to xsyn-demo/vocab.txt, or write it with "
            f"python -c \"from xsyn.data.synth import write_vocab; write_vocab('vocab.txt')\"; for another task a "
            f"vocab.txt that covers its languages (mBERT's, fetched where the network is). ({err})") from None
