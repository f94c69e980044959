"""A synthetic typology benchmark: paraphrase pairs in artificial languages with gold UD trees.

All languages share one lexicon and one grammar of meaning; they differ only in word order.
A sentence says that an agent does something to a patient. Each argument is a noun phrase of a
case particle and a noun; the particle marks the role (`ka` agent, `po` patient), so arguments
may come in either order ("scrambling") without changing what the sentence means.

Gold tree (the same in every language): the verb is the root; each noun hangs from the verb as
`nsubj` or `obj`; its particle hangs from the noun (`case`); the final "." is `punct` of the verb.

Word order per language:

| code | clause (canonical) | noun phrase      | like                        |
|------|--------------------|------------------|-----------------------------|
| svo  | S V O              | particle noun    | English with prepositions   |
| sov  | S O V              | noun particle    | Japanese, Korean, Turkish   |
| vso  | V S O              | particle noun    | Irish, Arabic               |
| ovs  | O V S              | noun particle    | Hixkaryana-like             |

The task is PAWS-style paraphrase identification. `sentence1` uses the canonical clause order and
`sentence2` the other order of its two arguments, with the same words. It is a paraphrase
(label "1") iff it says who did what to whom exactly as `sentence1` does; otherwise the two
nouns have exchanged roles. Only which noun each case particle attaches to tells them apart.
That is read off the surface differently in every language (the next word in `svo`, the previous
one in `sov`) but off the tree the same way everywhere, so a model that learns the binding from
word order on `svo` reads it wrongly elsewhere.

Examples are parallel: the same id has the same meaning pair and label in every language, so
sentence1 in one language and sentence2 in another (generalized transfer) keep the label.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from xsyn.data.example import Example
from xsyn.syntax.record import SyntaxRecord
from xsyn.syntax.segment import Segment
from xsyn.utils.io import atomic_write_text

LABELS = ("0", "1")  # not a paraphrase, paraphrase (as in PAWS-X)
SPLITS = ("train", "dev", "test")

NOUNS = ("dax", "wug", "blick", "fep", "toma", "zib", "kiki", "bouba", "lorp", "mib", "nazz", "pilk")
VERBS = ("meeks", "tazes", "pomes", "dribs", "gulls", "sneps")
PUNCT = "."


@dataclass(frozen=True)
class Role:
    slot: str  # S or O in a clause template
    deprel: str
    particle: str


ROLES = (Role("S", "nsubj", "ka"), Role("O", "obj", "po"))
_ROLE = {r.slot: r for r in ROLES}


@dataclass(frozen=True)
class Grammar:
    """One language's word order: the clause template and whether the particle precedes the noun."""

    code: str
    clause: tuple[str, ...]  # "V", "S" and "O" in canonical order
    particle_first: bool

    @property
    def canonical(self) -> tuple[str, ...]:
        return tuple(slot for slot in self.clause if slot != "V")


GRAMMARS = {g.code: g for g in (
    Grammar("svo", ("S", "V", "O"), particle_first=True),
    Grammar("sov", ("S", "O", "V"), particle_first=False),
    Grammar("vso", ("V", "S", "O"), particle_first=True),
    Grammar("ovs", ("O", "V", "S"), particle_first=False),
)}
LANGUAGES: tuple[str, ...] = tuple(GRAMMARS)  # the first is the training language


@dataclass(frozen=True)
class Meaning:
    """Who did what to whom: the verb and the noun filling each role."""

    verb: str
    agent: str
    patient: str

    def noun(self, slot: str) -> str:
        return self.agent if slot == "S" else self.patient


def vocabulary() -> list[str]:
    """The BERT vocabulary of the benchmark: the special tokens, then every word of the lexicon."""
    words = [*NOUNS, *VERBS, *(r.particle for r in ROLES), PUNCT]
    return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]


def write_vocab(path: str | Path) -> Path:
    """Write `vocab.txt` (one token per line) for `BertTokenizerFast(vocab=path, do_lower_case=False)`."""
    path = Path(path)
    atomic_write_text(path, "\n".join(vocabulary()) + "\n")
    return path


def generate_split(lang: str, split: str, n: int, seed: int = 0) -> list[Example]:
    """`n` sentence pairs of language `lang`, with gold trees; ids and labels equal across languages."""
    if lang not in GRAMMARS:
        raise ValueError(f"unknown synthetic language {lang!r}; available: {', '.join(LANGUAGES)}")
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; available: {', '.join(SPLITS)}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    grammar = GRAMMARS[lang]
    labels = [LABELS[i % 2] for i in range(n)]
    random.Random(f"xsyn-synth/{seed}/{split}/labels").shuffle(labels)
    examples = []
    for i, label in enumerate(labels):
        rng = random.Random(f"xsyn-synth/{seed}/{split}/{i}")
        agent, patient = rng.sample(NOUNS, 2)
        meaning1 = Meaning(rng.choice(VERBS), agent, patient)
        meaning2 = meaning1 if label == "1" else Meaning(meaning1.verb, patient, agent)
        segments = [_segment(realise(meaning1, grammar, grammar.canonical), lang),
                    _segment(realise(meaning2, grammar, grammar.canonical[::-1]), lang)]
        examples.append(Example(id=f"synth-{split}-{i:06d}", segments=segments, label=label))
    return examples


def _segment(record: SyntaxRecord, lang: str) -> Segment:
    # the tree is the data's own (`--parser gold` names it so); attached as the record too, so any parser keeps it
    return Segment(lang=lang, text=record.text, record=record, gold_tree=record)


def realise(meaning: Meaning, grammar: Grammar, order: tuple[str, ...]) -> SyntaxRecord:
    """The sentence of `meaning` in `grammar`, the roles in `order` filling the argument slots."""
    roles = iter(order)
    words: list[str] = []
    upos: list[str] = []
    deprels: list[str] = []
    heads: list[int | None] = []  # 1-based; None = the verb, filled in once its position is known
    verb = 0
    for slot in grammar.clause:
        if slot == "V":
            words.append(meaning.verb)
            upos.append("VERB")
            deprels.append("root")
            heads.append(0)
            verb = len(words)
            continue
        role = _ROLE[next(roles)]
        noun = len(words) + (2 if grammar.particle_first else 1)
        phrase = [(role.particle, "ADP", "case", noun), (meaning.noun(role.slot), "NOUN", role.deprel, None)]
        for word, tag, rel, head in phrase if grammar.particle_first else reversed(phrase):
            words.append(word)
            upos.append(tag)
            deprels.append(rel)
            heads.append(head)
    words.append(PUNCT)
    upos.append("PUNCT")
    deprels.append("punct")
    heads.append(None)
    return SyntaxRecord.from_words(words, [verb if h is None else h for h in heads], upos, deprels,
                                   lang=grammar.code)
