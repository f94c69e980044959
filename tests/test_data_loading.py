"""Every card loads its real data from ../shared/data with the counts MANIFEST.md states."""

from __future__ import annotations

import re
import zipfile
from collections import Counter

import pytest

from xsyn.data.loading import DataNotFoundError, load_examples


def load(shared_data, task, lang, split):
    examples, report = load_examples(task, lang, split, data_dir=shared_data / task, allow_hub=False)
    assert report.origin == "local" and report.examples == len(examples) and not report.skipped
    return examples, report


# -- PAWS-X (MANIFEST section 2) --------------------------------------------------------------------

@pytest.mark.parametrize("lang", ["de", "en", "es", "fr", "ja", "ko", "zh"])
def test_pawsx_dev_files_hold_2000_labelled_pairs(shared_data, lang):
    examples, report = load(shared_data, "pawsx", lang, "validation")
    assert len(examples) == 2000 and report.sources[0].endswith(f"dev-{lang}.tsv (xtreme layout)")
    assert {e.label for e in examples} == {"0", "1"}
    assert [e.id for e in examples[:3]] == ["#0", "#1", "#2"]  # row numbers: parallel files pair by line


def test_pawsx_german_test_is_the_labelled_x_final_file(shared_data):
    examples, _ = load(shared_data, "pawsx", "de", "test")
    assert Counter(e.label for e in examples) == {"0": 1105, "1": 895}
    angel = next(e for e in examples if e.id == "68")
    # x-final files are not csv-quoted: the quotes are part of the sentence
    assert angel.segments[0].text.startswith('"Angel Eyes" ist ein beliebter Song')


def test_pawsx_xtreme_files_are_csv_quoted(shared_data):
    examples, _ = load(shared_data, "pawsx", "zh", "validation")
    sentence2 = examples[81].segments[1].text  # the file has "...罗山的 ""La Casa"" 书房中混合。"
    assert sentence2 == "该专辑由阿尼贝尔·科佩尔在洛杉矶录制，并且在加利福尼亚州罗山的 \"La Casa\" 书房中混合。"


def test_pawsx_chinese_test_comes_from_the_hub_export(shared_data):
    examples, report = load(shared_data, "pawsx", "zh", "test")
    assert len(examples) == 2000 and "hub export layout" in report.sources[0]
    assert examples[0].id == "10" and examples[0].label == "1"


# -- XNLI (section 3) -------------------------------------------------------------------------------

@pytest.mark.parametrize("lang", ["en", "de", "es", "fr", "zh", "ar", "hi", "ru", "tr", "vi", "bg", "el", "ur"])
def test_xnli_dev_has_830_pairs_per_class(shared_data, lang):
    examples, _ = load(shared_data, "xnli", lang, "validation")
    assert Counter(e.label for e in examples) == {"entailment": 830, "neutral": 830, "contradiction": 830}


def test_xnli_german_test_is_labelled(shared_data):
    examples, report = load(shared_data, "xnli", "de", "test")
    assert Counter(e.label for e in examples) == {"entailment": 1670, "neutral": 1670, "contradiction": 1670}
    assert "xglue layout" in report.sources[0]
    assert examples[0].segments[1].text == "Ich habe nicht wieder mit ihm gesprochen."


def test_missing_data_names_the_files_layouts_and_hub(shared_data):
    with pytest.raises(DataNotFoundError) as err:
        load_examples("xnli", "sw", "validation", data_dir=shared_data / "xnli", allow_hub=False)
    message = str(err.value)
    assert "no data for task 'xnli' (premise sw, hypothesis sw), split 'validation'" in message
    assert f"{shared_data / 'xnli' / 'dev-sw.tsv'}   (xtreme layout)" in message
    assert "XNLI-1.0/xnli.dev.tsv   (XNLI-1.0 layout)" in message
    assert "Download: https://dl.fbaipublicfiles.com/XNLI/XNLI-1.0.zip" in message


# -- MLQA and XQuAD (sections 4, 5) -----------------------------------------------------------------

@pytest.mark.parametrize("lang, questions", [("en", 1148), ("de", 512), ("es", 500), ("zh", 504),
                                             ("ar", 517), ("hi", 507), ("vi", 511)])
def test_mlqa_dev_question_counts(shared_data, lang, questions):
    examples, _ = load(shared_data, "mlqa", lang, "validation")
    assert len(examples) == questions
    for e in examples:
        (answer,) = e.answers  # MLQA dev: one answer per question, at its offset
        assert e.segments[1].text[answer.start:answer.start + len(answer.text)] == answer.text
        assert e.langs == [lang, lang]


@pytest.mark.parametrize("lang", ["en", "de", "es", "zh", "ar", "hi", "ru", "tr", "vi", "el"])
def test_xquad_has_1190_questions(shared_data, lang):
    examples, _ = load(shared_data, "xquad", lang, "test")
    assert len(examples) == 1190
    assert len({e.segments[1].text for e in examples}) == 240  # 48 articles, 240 paragraphs


def test_xquad_english_first_question(shared_data):
    examples, _ = load(shared_data, "xquad", "en", "test")
    first = examples[0]
    assert (first.id, first.segments[0].text) == ("56beb4343aeaaa14008c925b",
                                                  "How many points did the Panthers defense surrender?")
    assert (first.answers[0].text, first.answers[0].start) == ("308", 34)


# -- PAN-X (section 6) ------------------------------------------------------------------------------

PANX = [("en", "validation", 10000, 80536), ("en", "test", 10000, 80326), ("de", "validation", 10000, 97805),
        ("de", "test", 10000, 97646), ("es", "validation", 10000, 64329), ("es", "test", 10000, 64727),
        ("fr", "validation", 10000, 68220), ("fr", "test", 10000, 68754), ("zh", "validation", 10000, 213682),
        ("zh", "test", 10000, 207505), ("ar", "validation", 10000, 64291), ("ar", "test", 10000, 64347),
        ("hi", "validation", 1000, 5808), ("hi", "test", 1000, 6005), ("en", "train", 20000, 160394)]


@pytest.mark.parametrize("lang, split, sentences, tokens", PANX)
def test_panx_sentence_and_token_counts(shared_data, lang, split, sentences, tokens):
    examples, _ = load(shared_data, "panx", lang, split)
    assert len(examples) == sentences
    assert sum(len(e.segments[0].tokens) for e in examples) == tokens
    assert all(len(e.tags) == len(e.segments[0].tokens) for e in examples)


def test_panx_first_sentence(shared_data):
    examples, _ = load(shared_data, "panx", "en", "validation")
    assert examples[0].segments[0].tokens[:5] == ["Sioux", "Falls", "Arena", "(", "Sioux"]
    assert examples[0].tags[:5] == ["B-ORG", "I-ORG", "I-ORG", "O", "B-LOC"]


# -- Chinese benchmarks (section 8) -----------------------------------------------------------------

@pytest.mark.parametrize("split, ones, zeros", [("train", 4799, 4801), ("validation", 593, 607)])
def test_chnsenticorp_labelled_splits(shared_data, split, ones, zeros):
    examples, _ = load(shared_data, "chnsenticorp", "zh", split)
    assert Counter(e.label for e in examples) == {"1": ones, "0": zeros}


def test_chnsenticorp_test_is_released_without_labels(shared_data):
    examples, report = load(shared_data, "chnsenticorp", "zh", "test")
    assert len(examples) == 1200 and report.unlabelled == 1200
    assert examples[0].id == "0"
    assert examples[0].segments[0].text == "这个宾馆比较陈旧了，特价的房间也很一般。总体来说一般"


def test_msra_ner_test_matches_the_readme(shared_data):
    examples, _ = load(shared_data, "msra_ner", "zh", "test")
    assert len(examples) == 3442
    assert sum(len(e.segments[0].tokens) for e in examples) == 172601
    begins = Counter(t[2:] for e in examples for t in e.tags if t.startswith("B-"))
    assert begins == {"LOC": 2886, "ORG": 1331, "PER": 1973}  # the readme's entity counts


@pytest.fixture(scope="module")
def cged_train(shared_data):
    return load(shared_data, "cged", "zh", "train")


def test_cged_training_zip_is_read_without_losing_an_error(shared_data, cged_train):
    examples, report = cged_train
    assert len(examples) == 10072 + 10693  # HSK + TOCFL documents
    with zipfile.ZipFile(shared_data / "cged" / "CGED16_TrainingData.zip") as archive:
        raw = [archive.read(name).decode("utf-8") for name in archive.namelist()]
    gold = sum(len(re.findall(r"<ERROR start_off", text)) for text in raw)
    assert sum(len(e.errors) for e in examples) == gold  # every error kept for the NLPTEA scores
    overlapping = report.notes["CGED errors overlapping an earlier error (kept out of BIO tags)"]
    tagged = sum(t.startswith("B-") for e in examples for t in e.tags)
    assert tagged + overlapping == gold and overlapping > 0


def test_cged_tags_follow_the_nlptea_offsets(cged_train):
    examples, _ = cged_train
    doc = next(e for e in examples if e.id == "A2-0005-1")
    assert "".join(doc.segments[0].tokens) == "你開一個慶祝會的時候我不能會參加，是因為我在外國做工作"
    assert doc.errors == [(3, 4, "R"), (14, 14, "R"), (25, 25, "R")]  # 1-based, inclusive
    marked = {i: t for i, t in enumerate(doc.tags) if t != "O"}
    assert marked == {2: "B-R", 3: "I-R", 13: "B-R", 24: "B-R"}


# -- synthetic benchmark -----------------------------------------------------------------------------

def test_synth_card_generates_parallel_splits_with_gold_trees():
    examples, report = load_examples("synth", "sov", "validation")
    assert report.examples == 400 and report.sources == ["generated"]
    assert all(s.record is not None for e in examples for s in e.segments)
    svo, _ = load_examples("synth", "svo", "validation")
    assert [e.label for e in svo] == [e.label for e in examples]
