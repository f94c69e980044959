"""The synthetic typology benchmark: parallel paraphrase pairs whose label the tree shows the same
way in every language while the word order shows it differently."""

from __future__ import annotations

import pytest

from xsyn.data.synth import (
    GRAMMARS,
    LABELS,
    LANGUAGES,
    NOUNS,
    ROLES,
    Meaning,
    generate_split,
    realise,
    vocabulary,
    write_vocab,
)
from xsyn.syntax.record import SyntaxRecord
from xsyn.syntax.vocab import DEPRELS, UPOS_TAGS

PARTICLES = {r.particle for r in ROLES}


def tree_facts(record: SyntaxRecord) -> frozenset:
    """Who did what to whom, read off the tree: each noun with its relation and its particle."""
    facts = set()
    for i, word in enumerate(record.words):
        if record.upos[i] == "NOUN":
            kids = {record.deprels[j]: record.words[j] for j, h in enumerate(record.heads) if h == i + 1}
            facts.add((word, record.deprels[i], kids.get("case")))
    return frozenset(facts | {record.words[record.heads.index(0)]})


def svo_surface_facts(words: list[str]) -> frozenset:
    """The same facts read with svo's surface order: a noun takes the particle right before it."""
    return frozenset((w, words[i - 1] if i and words[i - 1] in PARTICLES else None)
                     for i, w in enumerate(words) if w in NOUNS)


def accuracy(rule, pairs) -> float:
    """How often `rule(s1) == rule(s2)` agrees with the label over (s1, s2, label) triples."""
    return sum((rule(a) == rule(b)) == (label == "1") for a, b, label in pairs) / len(pairs)


def signature(record: SyntaxRecord, node: int = 0) -> tuple:
    """An order-free description of the tree under `node` (0 = the root's parent)."""
    kids = [i + 1 for i, h in enumerate(record.heads) if h == node]
    below = tuple(sorted(signature(record, k) for k in kids))
    if node == 0:
        return below
    return (record.words[node - 1], record.upos[node - 1], record.deprels[node - 1], below)


def test_hand_worked_sentences_in_every_order():
    meaning = Meaning("meeks", agent="dax", patient="wug")
    svo = realise(meaning, GRAMMARS["svo"], ("S", "O"))
    assert svo.text == "ka dax meeks po wug ."
    assert svo.heads == [2, 3, 0, 5, 3, 3]
    assert svo.deprels == ["case", "nsubj", "root", "case", "obj", "punct"]
    assert svo.upos == ["ADP", "NOUN", "VERB", "ADP", "NOUN", "PUNCT"]
    sov = realise(meaning, GRAMMARS["sov"], ("S", "O"))
    assert sov.text == "dax ka wug po meeks ."
    assert sov.heads == [5, 1, 5, 3, 0, 5]
    scrambled = realise(meaning, GRAMMARS["vso"], ("O", "S"))  # the patient fills the first slot
    assert scrambled.text == "meeks po wug ka dax ."
    assert scrambled.heads == [0, 3, 1, 5, 1, 1]
    assert realise(meaning, GRAMMARS["ovs"], GRAMMARS["ovs"].canonical).text == "wug po meeks dax ka ."


def test_generation_is_deterministic_and_seeded():
    first = generate_split("sov", "train", 50, seed=3)
    again = generate_split("sov", "train", 50, seed=3)
    other = generate_split("sov", "train", 50, seed=4)
    texts = [[s.text for s in e.segments] + [e.label] for e in first]
    assert texts == [[s.text for s in e.segments] + [e.label] for e in again]
    assert [e.segments[0].record.heads for e in first] == [e.segments[0].record.heads for e in again]
    assert texts != [[s.text for s in e.segments] + [e.label] for e in other]


def test_every_record_is_a_valid_ud_tree_matching_its_text():
    for lang in LANGUAGES:
        for example in generate_split(lang, "dev", 200):
            assert [s.lang for s in example.segments] == [lang, lang]
            for segment in example.segments:
                record = segment.record
                record.validate()
                assert record.text == segment.text == " ".join(record.words)
                assert set(record.upos) <= set(UPOS_TAGS)
                assert set(record.deprels) - {"root"} <= set(DEPRELS)
                assert record.upos[record.heads.index(0)] == "VERB"


def test_examples_are_parallel_across_languages():
    by_lang = {lang: generate_split(lang, "test", 100, seed=7) for lang in LANGUAGES}
    first = by_lang[LANGUAGES[0]]
    for examples in by_lang.values():
        assert [e.id for e in examples] == [e.id for e in first]
        assert [e.label for e in examples] == [e.label for e in first]
        for ours, theirs in zip(examples, first, strict=True):
            for a, b in zip(ours.segments, theirs.segments, strict=True):
                assert signature(a.record) == signature(b.record)
                assert sorted(a.record.words) == sorted(b.record.words)
    assert any(a.segments[0].text != b.segments[0].text
               for a, b in zip(by_lang["svo"], by_lang["sov"], strict=True))


def test_labels_are_balanced_and_every_pair_is_scrambled():
    examples = generate_split("svo", "train", 301)
    labels = [e.label for e in examples]
    assert labels.count("0") == 151 and labels.count("1") == 150 and set(labels) == set(LABELS)
    for example in examples:
        s1, s2 = (s.record.words for s in example.segments)
        assert s1 != s2 and sorted(s1) == sorted(s2)  # word order differs, the bag of words does not


def test_surface_order_learned_on_svo_does_not_transfer_but_the_tree_does():
    pairs = {lang: [(e.segments[0].record, e.segments[1].record, e.label)
                    for e in generate_split(lang, "test", 600)] for lang in LANGUAGES}
    surface = {lang: accuracy(lambda r: svo_surface_facts(r.words), p) for lang, p in pairs.items()}
    assert surface["svo"] == surface["vso"] == 1.0  # particle before the noun in both
    # There the particle follows its noun: the svo reading binds particles to the wrong nouns
    # (in sov it misjudges every scrambled paraphrase; in ovs it finds no particle at all).
    assert surface["sov"] < 0.8 and surface["ovs"] < 0.8
    for lang, p in pairs.items():
        assert accuracy(tree_facts, p) == 1.0, lang


def test_generalized_pairs_keep_the_label():
    by_lang = {lang: generate_split(lang, "test", 200) for lang in LANGUAGES}
    for a in LANGUAGES:
        for b in LANGUAGES:
            mixed = [(x.segments[0].record, y.segments[1].record, x.label)
                     for x, y in zip(by_lang[a], by_lang[b], strict=True)]
            assert accuracy(tree_facts, mixed) == 1.0, (a, b)


def test_vocab_makes_every_word_one_wordpiece(tmp_path):
    from transformers import BertTokenizerFast

    from xsyn.trees.wordpiece import WordpieceAligner

    path = write_vocab(tmp_path / "vocab.txt")
    assert path.read_text(encoding="utf-8").splitlines() == vocabulary()
    assert vocabulary()[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert len(set(vocabulary())) == len(vocabulary())
    tokenizer = BertTokenizerFast(vocab=str(path), do_lower_case=False)
    example = generate_split("ovs", "dev", 1)[0]
    tree = WordpieceAligner(tokenizer, max_length=64).encode([s.record for s in example.segments])[0]
    words = [w for s in example.segments for w in s.record.words]
    assert len(tree) == len(words) + 3  # [CLS] s1 [SEP] s2 [SEP]: one piece per word
    assert tokenizer.unk_token_id not in tree.input_ids.tolist()
    assert tree.unaligned == 0 and tree.wordless == 0


@pytest.mark.parametrize(("args", "message"), [
    (("xyz", "train", 3), "available: svo, sov, vso, ovs"),
    (("svo", "validation", 3), "available: train, dev, test"),
    (("svo", "train", -1), "n must be >= 0"),
])
def test_bad_arguments_name_the_choices(args, message):
    with pytest.raises(ValueError, match=message):
        generate_split(*args)
