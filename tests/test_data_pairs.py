"""Generalized (cross-language) examples: released cross files as they are, others joined by id."""

from __future__ import annotations

import csv

import pytest

from xsyn.data.cards import CardError, load_card
from xsyn.data.example import Example
from xsyn.data.pairs import PairReport, join_by_id, load_pair_examples
from xsyn.syntax.segment import Segment


def pair(uid, lang, label):
    return Example(uid, [Segment(lang, text=f"{uid}-1-{lang}"), Segment(lang, text=f"{uid}-2-{lang}")], label=label)


def test_join_takes_each_segment_from_its_language_and_drops_label_disagreements():
    card = load_card("pawsx")
    per_lang = {"en": [pair("a", "en", "1"), pair("b", "en", "0"), pair("c", "en", "1")],
                "de": [pair("a", "de", "1"), pair("b", "de", "1"), pair("d", "de", "0")]}
    report = PairReport("pawsx", "test", {"sentence1": "en", "sentence2": "de"})
    (joined,) = join_by_id(card, report.langs, per_lang, report)
    assert (joined.id, joined.label) == ("a", "1")
    assert [s.text for s in joined.segments] == ["a-1-en", "a-2-de"] and joined.langs == ["en", "de"]
    assert report.label_mismatches == 1  # b: 0 in English, 1 in German
    assert report.unmatched == {"en": 1, "de": 1}  # c, d
    from xsyn.run.evaluation import dropped_by_reason

    # what results.json counts as not scored, per reason: b and c without a counterpart, d's labels disagree
    assert dropped_by_reason({"load": report.as_dict()}) == {"no_counterpart": 2, "labels_disagree": 1}


def test_join_refuses_files_that_share_no_id():
    card = load_card("pawsx")
    report = PairReport("pawsx", "test", {"sentence1": "en", "sentence2": "de"})
    with pytest.raises(ValueError, match="no example id is shared by en, de"):
        join_by_id(card, report.langs, {"en": [pair("0", "en", "1")], "de": [pair("10", "de", "1")]}, report)


def test_pair_requests_name_every_segment_of_a_two_segment_task():
    with pytest.raises(CardError, match="name a language for each segment of 'pawsx': sentence1, sentence2"):
        load_pair_examples("pawsx", "test", {"premise": "en", "hypothesis": "de"})
    with pytest.raises(CardError, match="has one segment"):
        load_pair_examples("panx", "test", {"tokens": "en"})


def read_xtreme(path):
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh, delimiter="\t"))


def test_pawsx_dev_pairs_english_sentence1_with_german_sentence2(shared_data):
    examples, report = load_pair_examples("pawsx", "validation", {"sentence1": "en", "sentence2": "de"},
                                          data_dir=shared_data / "pawsx", allow_hub=False)
    en, de = read_xtreme(shared_data / "pawsx" / "dev-en.tsv"), read_xtreme(shared_data / "pawsx" / "dev-de.tsv")
    agree = [i for i in range(2000) if en[i][2] == de[i][2]]  # the files are parallel line by line
    assert report.examples == len(agree) and report.label_mismatches == 2000 - len(agree) > 0
    first = examples[0]
    assert first.segments[0].text == en[agree[0]][0] and first.segments[1].text == de[agree[0]][1]
    assert report.method == "joined by id" and report.unmatched == {"en": 0, "de": 0}


def test_mlqa_cross_language_comes_from_the_released_file(shared_data):
    examples, report = load_pair_examples("mlqa", "validation", {"question": "de", "context": "en"},
                                          data_dir=shared_data / "mlqa", allow_hub=False)
    assert len(examples) == 512  # MANIFEST addendum: dev-context-en-question-de.json
    assert report.method == "released file"
    assert report.loads[0].sources[0].endswith("dev-context-en-question-de.json (MLQA_V1 layout)")
    assert examples[0].segments[0].text == "Wie viele Scanlinien hat NTSC als Kompromiss ausgewählt?"
    assert examples[0].answers[0].text == "525" and examples[0].langs == ["de", "en"]


def test_xquad_question_from_one_language_context_and_answers_from_the_other(shared_data):
    examples, report = load_pair_examples("xquad", "test", {"question": "de", "context": "en"},
                                          data_dir=shared_data / "xquad", allow_hub=False)
    assert len(examples) == 1190 and report.label_mismatches == 0 and report.unmatched == {"de": 0, "en": 0}
    first = examples[0]
    assert first.id == "56beb4343aeaaa14008c925b" and first.langs == ["de", "en"]
    assert first.segments[0].text.startswith("Wie viele Punkte")
    assert (first.answers[0].text, first.answers[0].start) == ("308", 34)  # the English answer


def test_same_language_pairs_are_the_plain_examples(shared_data):
    examples, report = load_pair_examples("xnli", "validation", {"premise": "fr", "hypothesis": "fr"},
                                          data_dir=shared_data / "xnli", allow_hub=False)
    assert len(examples) == 2490 and report.method == "released file"
