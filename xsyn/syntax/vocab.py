"""Fixed id tables for Universal Dependencies UPOS tags and base relations.

The tables are closed (UD v2 defines them), so ids are stable across runs, tasks and checkpoints:
a model trained on one task can read another task's batches. Id 0 is padding, the last two ids
are the special tokens (`[CLS]`, `[SEP]`, ...) and anything outside the UD inventory.
"""

from __future__ import annotations

UPOS_TAGS: tuple[str, ...] = (
    "ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM",
    "PART", "PRON", "PROPN", "PUNCT", "SCONJ", "SYM", "VERB", "X",
)

DEPRELS: tuple[str, ...] = (
    "acl", "advcl", "advmod", "amod", "appos", "aux", "case", "cc", "ccomp", "clf", "compound",
    "conj", "cop", "csubj", "dep", "det", "discourse", "dislocated", "expl", "fixed", "flat",
    "goeswith", "iobj", "list", "mark", "nmod", "nsubj", "nummod", "obj", "obl", "orphan",
    "parataxis", "punct", "reparandum", "root", "vocative", "xcomp",
)

PAD_ID = 0

UPOS_IDS: dict[str, int] = {tag: i + 1 for i, tag in enumerate(UPOS_TAGS)}
UPOS_SPECIAL_ID = len(UPOS_TAGS) + 1
UPOS_UNKNOWN_ID = len(UPOS_TAGS) + 2
UPOS_VOCAB_SIZE = len(UPOS_TAGS) + 3
PUNCT_UPOS_ID = UPOS_IDS["PUNCT"]

DEPREL_IDS: dict[str, int] = {rel: i + 1 for i, rel in enumerate(DEPRELS)}
DEPREL_SPECIAL_ID = len(DEPRELS) + 1
DEPREL_UNKNOWN_ID = len(DEPRELS) + 2
DEPREL_VOCAB_SIZE = len(DEPRELS) + 3


def base_deprel(deprel: str) -> str:
    """`nsubj:pass` -> `nsubj`: xsyn keeps only the universal part of a relation."""
    return deprel.split(":", 1)[0]


def upos_id(tag: str) -> int:
    return UPOS_IDS.get(tag, UPOS_UNKNOWN_ID)


def deprel_id(rel: str) -> int:
    return DEPREL_IDS.get(base_deprel(rel), DEPREL_UNKNOWN_ID)
