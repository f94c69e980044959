"""The `tiny` model preset (tokenizers: `xsyn.models.tokenizers`).

`tiny` is a randomly initialised small model (2 layers, hidden 128, 2 heads) of the given tokenizer's family
(a BERT, an XLM-R, ...; `tiny_config`), on its vocabulary:
what tests, the demo and CPU smoke runs use. It goes through the same code as a real checkpoint.
"""

from __future__ import annotations

import logging

from transformers import PretrainedConfig, PreTrainedTokenizerBase

from xsyn.models.families import FAMILIES, family_named, resolve, tokenizer_family
from xsyn.models.names import TINY_SHAPE
from xsyn.utils.errors import InputError

log = logging.getLogger(__name__)


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
