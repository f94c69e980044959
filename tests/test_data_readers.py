"""File formats read through their cards, on fixtures written in the released formats.

MTOP and mATIS++ cannot be copied here; tests/fixtures/mtop and tests/fixtures/matis follow the
released layouts exactly:
- MTOP `{lang}/{train,eval,test}.txt`: 8 tab-separated columns (id, intent, slots as
  `start:end:SL:NAME` character offsets joined by commas, utterance, domain, locale, decoupled
  logical form, tokens JSON `{"tokens": [...], "tokenSpans": [{"start": s, "length": n}, ...]}`).
  de/test.txt line 2 has 7 columns (a broken row).
- mATIS++ (LDC2021T04) `{train,test}_{LANG}.tsv`, no dev files: header `id utterance slot_labels
  intent`, tokens and slot labels space-separated, multi-intents joined by '#'. test_DE.tsv line 3
  has 6 tokens but 5 slot labels (a broken row, as the release has: amazon-science/multiatis#2).
"""

from __future__ import annotations

import json
import re
import shutil
import zipfile
from collections import Counter
from pathlib import Path

import pytest

from xsyn.data.example import UNANSWERABLE
from xsyn.data.loading import load_examples
from xsyn.data.readers import DataFormatError, errors_to_bio, iob1_to_iob2, spans_to_bio

FIXTURES = Path(__file__).parent / "fixtures"


def test_mtop_slots_become_bio_tags_over_the_released_tokens():
    examples, report = load_examples("mtop", "en", "test", data_dir=FIXTURES / "mtop", allow_hub=False)
    alarm, message, weather, call = examples
    assert alarm.id == "3284892387512309" and alarm.label == "IN:CREATE_ALARM"
    assert alarm.segments[0].tokens == ["Set", "an", "alarm", "for", "7", "am", "tomorrow"]
    # "13:30:SL:DATE_TIME" covers "for 7 am tomorrow"
    assert alarm.tags == ["O", "O", "O", "B-DATE_TIME", "I-DATE_TIME", "I-DATE_TIME", "I-DATE_TIME"]
    # two slots; "I'm" is two tokens, both inside CONTENT_EXACT (18:26)
    assert message.tags == ["O", "B-RECIPIENT", "O", "B-CONTENT_EXACT", "I-CONTENT_EXACT", "I-CONTENT_EXACT"]
    assert weather.tags == ["O"] * 4  # empty slot column
    # the slot "Bob" (5:8) ends inside the token "Bobs" (5:9): the token joins the slot, and it is counted
    assert call.tags == ["O", "B-CONTACT", "O"]
    assert report.notes["slot boundaries inside a token (the token joins the slot)"] == 1


def test_mtop_broken_row_is_named_or_skipped_and_counted_but_never_in_test(tmp_path):
    with pytest.raises(DataFormatError, match=r"mtop/de/test\.txt:2: expected 8 tab-separated columns, got 7"):
        load_examples("mtop", "de", "test", data_dir=FIXTURES / "mtop", allow_hub=False)
    with pytest.raises(DataFormatError, match=r"test\.txt:2: .* \(test rows are never skipped"):
        load_examples("mtop", "de", "test", data_dir=FIXTURES / "mtop", skip_bad_rows=True, allow_hub=False)
    (tmp_path / "de").mkdir()
    shutil.copy(FIXTURES / "mtop" / "de" / "test.txt", tmp_path / "de" / "eval.txt")  # the same rows as dev
    examples, report = load_examples("mtop", "de", "validation", data_dir=tmp_path, skip_bad_rows=True,
                                     allow_hub=False)
    (alarm,) = examples
    assert alarm.tags == ["O", "B-DATE_TIME", "I-DATE_TIME", "I-DATE_TIME", "I-DATE_TIME", "I-DATE_TIME", "O"]
    assert len(report.skipped) == 1 and report.skipped[0].endswith(":2: expected 8 tab-separated columns, got 7")
    assert "1 rows skipped" in report.summary()


def test_mtop_offsets_that_miss_their_tokens_are_an_error(tmp_path):
    line = ('1\tIN:X\t\tab cd\td\ten_XX\t[IN:X ab cd ]\t'
            '{"tokens": ["ab", "cd"], "tokenSpans": [{"start": 0, "length": 2}, {"start": 4, "length": 2}]}\n')
    (tmp_path / "en").mkdir()
    (tmp_path / "en" / "test.txt").write_text(line, encoding="utf-8")
    with pytest.raises(DataFormatError, match="token 1 'cd' is not at characters 4:6 of the utterance"):
        load_examples("mtop", "en", "test", data_dir=tmp_path, allow_hub=False)


def test_mtop_token_span_that_is_not_a_number_names_column_8_and_the_field(tmp_path):
    line = ('1\tIN:X\t\tab cd\td\ten_XX\t[IN:X ab cd ]\t'
            '{"tokens": ["ab", "cd"], "tokenSpans": [{"start": 0, "length": 2}, {"start": "a", "length": 2}]}\n')
    (tmp_path / "en").mkdir()
    (tmp_path / "en" / "test.txt").write_text(line, encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"test\.txt:1: column 8 \(tokens JSON\): tokenSpans\[1\]: start: "
                                              r"expected a whole number, got the string 'a' \(tokenSpans\[1\] = "):
        load_examples("mtop", "en", "test", data_dir=tmp_path, allow_hub=False)


def test_spans_to_bio_rejects_a_slot_that_covers_no_token():
    with pytest.raises(ValueError, match="span 20:25 .X. covers no token"):
        spans_to_bio([(0, 3), (4, 9)], [(20, 25, "X")])


def test_matis_reads_tokens_slot_labels_and_multi_intents():
    examples, _ = load_examples("matis", "en", "train", data_dir=FIXTURES / "matis", allow_hub=False)
    assert [e.label for e in examples] == ["atis_flight", "atis_airfare", "atis_flight#atis_airfare"]
    assert examples[2].segments[0].tokens == ["flights", "and", "fares", "from", "new", "york", "to", "atlanta"]
    assert examples[2].tags[4:6] == ["B-fromloc.city_name", "I-fromloc.city_name"]


def test_matis_row_with_fewer_slot_labels_than_tokens_is_named(tmp_path):
    with pytest.raises(DataFormatError, match=r"test_DE\.tsv:3: 5 tags for 6 tokens"):
        load_examples("matis", "de", "test", data_dir=FIXTURES / "matis", allow_hub=False)
    shutil.copy(FIXTURES / "matis" / "test_DE.tsv", tmp_path / "train_DE.tsv")
    examples, report = load_examples("matis", "de", "train", data_dir=tmp_path, skip_bad_rows=True,
                                     allow_hub=False)
    assert [e.id for e in examples] == ["0"] and len(report.skipped) == 1


def test_conll2003_german_latin1_iob1_becomes_utf8_iob2():
    examples, report = load_examples("conll_ner", "de", "validation", data_dir=FIXTURES / "conll",
                                     allow_hub=False)
    first, second = examples
    assert first.segments[0].tokens == ["Die", "Firma", "Müller", "aus", "Köln", "Bonn", "."]
    # IOB1: I- after O (or after another type) opens a chunk; B- only separates same-type neighbours
    assert first.tags == ["O", "O", "B-ORG", "O", "B-LOC", "B-LOC", "O"]
    assert second.tags == ["B-PER", "O"]
    assert report.notes == {"files decoded as latin-1": 1, "IOB1 tags rewritten as IOB2 B- tags": 3}
    # the notes reach the run's data_report.json as {note: count}
    assert json.loads(json.dumps(report.as_dict()))["notes"] == dict(report.notes)


def test_iob1_to_iob2_leaves_iob2_alone():
    assert iob1_to_iob2(["B-PER", "I-PER", "O", "B-LOC"]) == (["B-PER", "I-PER", "O", "B-LOC"], 0)
    assert iob1_to_iob2(["I-PER", "I-LOC", "I-LOC"]) == (["B-PER", "B-LOC", "I-LOC"], 2)


def test_original_panx_files_lose_their_language_prefix():
    examples, report = load_examples("panx", "de", "test", data_dir=FIXTURES / "panx", allow_hub=False)
    assert [e.segments[0].tokens for e in examples] == [["Angela", "Merkel", "besucht", "Paris"], ["Die", "UNO"]]
    assert "panx_dataset layout" in report.sources[0]


def test_a_tag_line_with_an_extra_field_is_named_not_cut(tmp_path):
    # "New York" written with a tab would otherwise load as the token "New" and lose "York"
    (tmp_path / "de-test").write_text("de:Angela\tB-PER\n\nde:New\tYork\tB-LOC\nde:ist\tO\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"de-test:3: 3 fields, but line 1 has 2: 'de:New\\tYork\\tB-LOC'; "
                                              r"the whole sentence starting at line 3 is unreadable"):
        load_examples("panx", "de", "test", data_dir=tmp_path, allow_hub=False)


def test_a_file_without_examples_is_an_error_not_an_empty_test_set(tmp_path):
    (tmp_path / "de-test").write_text("\n\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"de-test \(panx_dataset layout\): no de test examples"):
        load_examples("panx", "de", "test", data_dir=tmp_path, allow_hub=False)


def test_cged_test_release_reads_input_and_truth_files():
    examples, report = load_examples("cged", "zh", "test", data_dir=FIXTURES / "cged", allow_hub=False)
    hsk_error, hsk_correct, tocfl = examples
    assert hsk_error.id == "00038800481" and hsk_error.errors == [(7, 7, "R"), (8, 8, "M")]
    assert {i: t for i, t in enumerate(hsk_error.tags) if t != "O"} == {6: "B-R", 7: "B-M"}
    assert hsk_correct.errors == [] and set(hsk_correct.tags) == {"O"}
    # W over characters 4-6 holds S at 5: BIO keeps W, the S error stays in `errors` and is counted
    assert tocfl.tags[3:6] == ["B-W", "I-W", "I-W"] and tocfl.errors == [(4, 6, "W"), (5, 5, "S")]
    assert report.notes["CGED errors overlapping an earlier error (kept out of BIO tags)"] == 1


def test_cged_missing_character_after_the_text_marks_the_last_one():
    notes: Counter = Counter()
    assert errors_to_bio("我们", [(3, 3, "M")], notes) == ["O", "B-M"]
    assert notes["CGED M errors after the last character, marked on it"] == 1
    with pytest.raises(ValueError, match="outside the 2-character text"):
        errors_to_bio("我们", [(3, 4, "S")], Counter())


def test_cged_sgml_is_read_from_a_zip(tmp_path):
    doc = ('<DOC>\n<TEXT id="t1">\n我很喜欢吃。\n</TEXT>\n<CORRECTION>\n我很喜欢吃饭。\n</CORRECTION>\n'
           '<ERROR start_off="6" end_off="6" type="M"></ERROR>\n</DOC>\n')
    with zipfile.ZipFile(tmp_path / "CGED16_TrainingData.zip", "w") as archive:
        archive.writestr("CGED16_HSK_Train_All.txt", doc)
        archive.writestr("CGED16_TOCFL_Train_All.txt", doc.replace("t1", "t2"))
    examples, _ = load_examples("cged", "zh", "train", data_dir=tmp_path, allow_hub=False)
    assert [e.id for e in examples] == ["t1", "t2"]
    assert examples[0].segments[0].tokens == list("我很喜欢吃。") and examples[0].tags[5] == "B-M"


def test_cged_sgml_doc_left_open_at_the_end_is_named_not_lost(tmp_path):
    doc = '<DOC>\n<TEXT id="{}">\n我很好。\n</TEXT>\n<ERROR start_off="2" end_off="2" type="R"></ERROR>\n</DOC>\n'
    (tmp_path / "CGED16_HSK_Train_All.txt").write_text(doc.format("h1") + doc.format("h2")[:-7], encoding="utf-8")
    (tmp_path / "CGED16_TOCFL_Train_All.txt").write_text(doc.format("t1"), encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"CGED16_HSK_Train_All\.txt:7: a <DOC> without </DOC>"):
        load_examples("cged", "zh", "train", data_dir=tmp_path, allow_hub=False)
    examples, report = load_examples("cged", "zh", "train", data_dir=tmp_path, skip_bad_rows=True, allow_hub=False)
    assert [e.id for e in examples] == ["h1", "t1"] and len(report.skipped) == 1


def test_cged_truth_must_match_its_input_file(tmp_path):
    def write(hsk_truth: str) -> None:
        (tmp_path / "CGED16_HSK_Test_Input.txt").write_text("(sid=s1)\t我们好\n", encoding="utf-8")
        (tmp_path / "CGED16_HSK_Test_Truth.txt").write_text(hsk_truth, encoding="utf-8")
        (tmp_path / "CGED16_TOCFL_Test_Input.txt").write_text("(sid=t1)\t我們好\n", encoding="utf-8")
        (tmp_path / "CGED16_TOCFL_Test_Truth.txt").write_text("t1, correct\n", encoding="utf-8")

    write("s1, correct\ns1, 2, 2, S\n")
    with pytest.raises(DataFormatError, match=r"HSK_Test_Input\.txt:1: sentence s1 is marked correct "
                                              r"\(.*HSK_Test_Truth\.txt:1\) and has errors \(line 2\)"):
        load_examples("cged", "zh", "test", data_dir=tmp_path, allow_hub=False)
    write("s1, correct\ns9, 2, 2, S\n")  # s9 is not in the input file
    with pytest.raises(DataFormatError, match=r"HSK_Test_Truth\.txt:2: sentence s9 is not in .*HSK_Test_Input\.txt"):
        load_examples("cged", "zh", "test", data_dir=tmp_path, allow_hub=False)


def test_squad_json_of_the_wrong_shape_names_the_file_and_the_json_path(tmp_path):
    path = tmp_path / "dev-v1.1.json"
    path.write_text(json.dumps({"data": {"a": 1}}), encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"dev-v1\.1\.json: not SQuAD JSON \('data' is a dict\)"):
        load_examples("xquad", "en", "validation", data_dir=tmp_path, allow_hub=False)
    qa = {"id": "q1", "question": "Who?", "answers": [{"text": "Ann", "answer_start": 0}]}
    good = {"paragraphs": [{"context": "Ann", "qas": [qa]}]}
    articles = ["x", {"title": "t"}, {"paragraphs": [{"context": "c"}]}, good]
    path.write_text(json.dumps({"data": articles}), encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"dev-v1\.1\.json: data\[0\]: expected an object with a 'paragraphs'"):
        load_examples("xquad", "en", "validation", data_dir=tmp_path, allow_hub=False)
    examples, report = load_examples("xquad", "en", "validation", data_dir=tmp_path, skip_bad_rows=True,
                                     allow_hub=False)
    assert [e.id for e in examples] == ["q1"]
    assert [s.split(": ", 1)[1] for s in report.skipped] == [
        "data[0]: expected an object with a 'paragraphs' list, got \"x\"",
        "data[1]: expected an object with a 'paragraphs' list, got {\"title\": \"t\"}",
        "data[2].paragraphs[0]: expected an object with a 'qas' list, got {\"context\": \"c\"}"]


def _squad2(tmp_path, **fields):
    qa = {"id": "q1", "question": "Who?", "answers": [{"text": "Ann", "answer_start": 0}], **fields}
    folder = tmp_path / "squad_v2"
    folder.mkdir(exist_ok=True)
    (folder / "dev-v2.0.json").write_text(json.dumps({"data": [{"paragraphs": [{"context": "Ann", "qas": [qa]}]}]}),
                                          encoding="utf-8")
    return folder


@pytest.mark.parametrize("fields, message", [
    # issue 39, point 4: bool("false") is True, which read the question as impossible
    ({"is_impossible": "false"}, "is_impossible: expected true/false, got the string 'false'"),
    ({"is_impossible": 0}, "is_impossible: expected true/false, got the number 0"),
    ({"answers": [{"text": "Ann", "answer_start": "0"}]}, r"answers\[0\]: answer_start: expected a whole number, "
                                                          "got the string '0'"),
    ({"answers": [{"text": ["Ann"], "answer_start": 0}]}, r"answers\[0\]: text: expected a string, got a list"),
    ({"question": None}, "question: expected a string, got null"),
    ({"answers": {"text": "Ann"}}, "answers: expected a list, got an object"),
])
def test_squad_json_fields_of_the_wrong_json_type_are_named_with_what_was_found(tmp_path, fields, message):
    folder = _squad2(tmp_path, **fields)
    with pytest.raises(DataFormatError, match=r"dev-v2\.0\.json: data\[0\]\.paragraphs\[0\]\.qas\[0\]: " + message):
        load_examples("squad_v2", "en", "validation", data_dir=folder, allow_hub=False)


def test_squad_json_reads_json_booleans_as_they_are(tmp_path):
    answerable = _squad2(tmp_path, is_impossible=False)
    examples, _ = load_examples("squad_v2", "en", "validation", data_dir=answerable, allow_hub=False)
    assert [answer.text for answer in examples[0].answers] == ["Ann"] and examples[0].label is None
    impossible = _squad2(tmp_path, is_impossible=True, answers=[])
    examples, _ = load_examples("squad_v2", "en", "validation", data_dir=impossible, allow_hub=False)
    assert examples[0].answers == [] and examples[0].label == UNANSWERABLE


def test_race_fields_of_the_wrong_json_type_are_named(tmp_path):
    split = tmp_path / "RACE" / "test" / "high"
    split.mkdir(parents=True)
    article = {"article": "Ann ran.", "questions": ["Who ran?", "Why?"], "options": [list("abcd"), list("efgh")],
               "answers": ["A", 1], "id": "h1.txt"}
    (split / "1.txt").write_text(json.dumps(article), encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"1\.txt: questions\[1\]: answers\[1\]: expected a string "
                                              r"\(A, B, \.\.\.\), got the number 1"):
        load_examples("race", "en", "test", data_dir=tmp_path / "RACE", allow_hub=False)
    (split / "1.txt").write_text(json.dumps({**article, "questions": "Who ran?"}), encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"1\.txt: questions: expected a list, got the string 'Who ran\?'"):
        load_examples("race", "en", "test", data_dir=tmp_path / "RACE", allow_hub=False)


def test_tsv_row_with_an_unknown_label_is_named_by_file_and_line(tmp_path):
    (tmp_path / "dev-en.tsv").write_text("a\tb\tentailment\nc\td\tmaybe\ne\tf\tneutral\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"dev-en\.tsv:2: label 'maybe' is not one of entailment, "
                                              r"neutral, contradiction"):
        load_examples("xnli", "en", "validation", data_dir=tmp_path, allow_hub=False)
    examples, report = load_examples("xnli", "en", "validation", data_dir=tmp_path, skip_bad_rows=True,
                                     allow_hub=False)
    assert [e.id for e in examples] == ["#0", "#2"]  # row numbers stay those of the file
    assert report.skipped == [f"{tmp_path / 'dev-en.tsv'}:2: label 'maybe' is not one of entailment, "
                              "neutral, contradiction; fix the file or the card's labels / label_map"]


def test_tsv_unclosed_quote_is_named_and_swallows_no_rows(tmp_path):
    rows = "a b\tc d\t1\n\"e\tf\t0\ng\th\t1\ni\tj\t0\nk\tl\t1\n"  # line 2 opens a quote it never closes
    (tmp_path / "test-en.tsv").write_text(rows, encoding="utf-8")
    (tmp_path / "dev-en.tsv").write_text(rows, encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"test-en\.tsv:2: unclosed quote starting at line 2 "
                                              r"\(the field runs over lines 2-5\)"):
        load_examples("pawsx", "en", "test", data_dir=tmp_path, allow_hub=False)
    examples, report = load_examples("pawsx", "en", "validation", data_dir=tmp_path, skip_bad_rows=True,
                                     allow_hub=False)
    assert [e.segments[0].text for e in examples] == ["a b", "g", "i", "k"]  # only line 2 is lost
    assert [e.id for e in examples] == ["#0", "#2", "#3", "#4"]  # and the others keep their row numbers
    assert len(report.skipped) == 1 and ":2: unclosed quote" in report.skipped[0]


def test_tsv_header_without_a_named_column_says_which_columns_exist(tmp_path):
    (tmp_path / "ChnSentiCorp").mkdir()
    (tmp_path / "ChnSentiCorp" / "dev.tsv").write_text("qid\tlabel\ttext\n0\t1\t好\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="the header has no column 'text_a' .for text.; its columns are: "
                                              "qid, label, text"):
        load_examples("chnsenticorp", "zh", "validation", data_dir=tmp_path, allow_hub=False)


def test_original_xnli_file_is_filtered_by_language_and_maps_labels(tmp_path):
    (tmp_path / "XNLI-1.0").mkdir()
    header = "language\tgold_label\tsentence1\tsentence2\tpairID"
    rows = ["en\tcontradictory\tA man sleeps.\tA man runs.\t1", "de\tneutral\tEin Mann.\tEine Frau.\t1",
            "en\tentailment\tA dog.\tAn animal.\t2"]
    (tmp_path / "XNLI-1.0" / "xnli.dev.tsv").write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    examples, _ = load_examples("xnli", "en", "validation", data_dir=tmp_path, allow_hub=False)
    assert [(e.id, e.label) for e in examples] == [("1", "contradiction"), ("2", "entailment")]


def test_non_utf8_file_without_fallback_names_the_line(tmp_path):
    (tmp_path / "dev-en.tsv").write_bytes("a\tb\tneutral\nK\xf6ln\tb\tneutral\n".encode("latin-1"))
    with pytest.raises(DataFormatError, match=r"dev-en\.tsv:2: not UTF-8 .*options.encoding_fallback"):
        load_examples("xnli", "en", "validation", data_dir=tmp_path, allow_hub=False)


def test_examples_that_share_an_id_are_all_kept_under_distinct_ids(tmp_path):
    (tmp_path / "x-final" / "en").mkdir(parents=True)
    rows = ["id\tsentence1\tsentence2\tlabel", "7\ta\tb\t1", "7\tc\td\t0", "8\te\tf\t1", "7\tg\th\t0"]
    (tmp_path / "x-final" / "en" / "dev_2k.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    examples, report = load_examples("pawsx", "en", "validation", data_dir=tmp_path, allow_hub=False)
    assert [e.id for e in examples] == ["7", "7#2", "8", "7#3"]  # results and pairs are keyed by id
    assert report.notes == {"examples sharing an id with an earlier one (renamed ID#2, ID#3, ...)": 2}


def copy_with_line(source: Path, target: Path, lineno: int, line: str) -> None:
    """`source` copied to `target` with its line `lineno` (1-based) replaced by `line`."""
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[lineno - 1] = line + "\n"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(lines), encoding="utf-8")


def test_tsv_row_with_a_field_too_many_is_named_skipped_and_counted_but_never_in_test(shared_data, tmp_path):
    """The real XTREME XNLI dev file (premise, hypothesis, label; no header) with a tab typed inside
    the premise of line 7: its text would shift into a field the layout does not read."""
    source = shared_data / "xnli" / "dev-en.tsv"
    if not source.is_file():
        pytest.skip(f"{source} not found")
    premise, hypothesis, label = source.read_text(encoding="utf-8").splitlines()[6].split("\t")
    cut = premise.index(" ")
    broken = f"{premise[:cut]}\t{premise[cut + 1:]}\t{hypothesis}\t{label}"
    copy_with_line(source, tmp_path / "dev-en.tsv", 7, broken)
    copy_with_line(source, tmp_path / "test-en.tsv", 7, broken)
    with pytest.raises(DataFormatError, match=r"dev-en\.tsv:7: row has 4 tab-separated fields, but the layout reads "
                                              r"3; .* \(fix the row, or pass --skip-bad-rows") as caught:
        load_examples("xnli", "en", "validation", data_dir=tmp_path, allow_hub=False)
    assert "skip_bad_rows" not in str(caught.value)  # the hint names the flag a user types
    examples, report = load_examples("xnli", "en", "validation", data_dir=tmp_path, skip_bad_rows=True,
                                     allow_hub=False)
    ids = [e.id for e in examples]  # rows without ids are numbered: the skipped row shifts no later id, so
    assert len(ids) == 2489 and ids[5:7] == ["#5", "#7"] and ids[-1] == "#2489"  # the languages still pair up
    assert len(report.skipped) == 1 and report.skipped[0].startswith(f"{tmp_path / 'dev-en.tsv'}:7: row has 4")
    with pytest.raises(DataFormatError, match=r"test-en\.tsv:7: row has 4 .*\(test rows are never skipped"):
        load_examples("xnli", "en", "test", data_dir=tmp_path, skip_bad_rows=True, allow_hub=False)


def test_tsv_row_longer_than_its_header_is_bad_but_a_trailing_empty_field_is_not(tmp_path):
    rows = ["id\tsentence1\tsentence2\tlabel", "1\ta\tb\t1\t", "2\tc\td\t0\tstray note", "3\te\tf\t1"]
    (tmp_path / "x-final" / "en").mkdir(parents=True)
    (tmp_path / "x-final" / "en" / "dev_2k.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"dev_2k\.tsv:3: row has 5 tab-separated fields, but the header has "
                                              r"4; the extra text 'stray note' would be lost"):
        load_examples("pawsx", "en", "validation", data_dir=tmp_path, allow_hub=False)
    examples, report = load_examples("pawsx", "en", "validation", data_dir=tmp_path, skip_bad_rows=True,
                                     allow_hub=False)
    assert [e.id for e in examples] == ["1", "3"] and len(report.skipped) == 1


@pytest.mark.parametrize("invisible", ["\u200b", "\u200c\u200d", "\u200e\u200f", "\u2060", "\ufeff", " \u200b \u00ad"])
def test_a_segment_of_invisible_format_characters_is_empty(tmp_path, invisible):
    rows = ["id\tsentence1\tsentence2\tlabel", "1\ta\tb\t1", f"2\tc\t{invisible}\t0", "3\te\tf\t1"]
    for name in ("dev_2k", "test_2k"):
        (tmp_path / "x-final" / "en").mkdir(parents=True, exist_ok=True)
        (tmp_path / "x-final" / "en" / f"{name}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"dev_2k\.tsv:3: sentence2 is empty: it holds only invisible characters"):
        load_examples("pawsx", "en", "validation", data_dir=tmp_path, allow_hub=False)
    examples, report = load_examples("pawsx", "en", "validation", data_dir=tmp_path, skip_bad_rows=True,
                                     allow_hub=False)
    assert [e.id for e in examples] == ["1", "3"] and len(report.skipped) == 1
    with pytest.raises(DataFormatError, match=r"test_2k\.tsv:3: sentence2 is empty"):
        load_examples("pawsx", "en", "test", data_dir=tmp_path, skip_bad_rows=True, allow_hub=False)


def test_a_tagged_sentence_of_invisible_tokens_is_empty(tmp_path):
    (tmp_path / "dev-en.tsv").write_text("Paris\tB-LOC\n\n\u200b\tO\n\u2060\tO\n\nBob\tB-PER\n", encoding="utf-8")
    examples, report = load_examples("panx", "en", "validation", data_dir=tmp_path, skip_bad_rows=True,
                                     allow_hub=False)
    assert [e.segments[0].tokens for e in examples] == [["Paris"], ["Bob"]]
    assert len(report.skipped) == 1 and "only invisible characters" in report.skipped[0]


def test_conllu_rows_are_the_syntactic_words_with_their_upos_and_a_bad_sentence_names_its_line(tmp_path):
    from xsyn.data.readers import READERS, BadRows, DataFormatError, ReadRequest

    path = tmp_path / "x-ud-train.conllu"
    path.write_text("# sent_id = s1\n# text = Zum Haus.\n1-2\tZum\t_\t_\t_\t_\t_\t_\t_\t_\n"
                    "1\tZu\tzu\tADP\t_\t_\t3\tcase\t_\t_\n2\tdem\tder\tDET\t_\t_\t3\tdet\t_\t_\n"
                    "3\tHaus\tHaus\tNOUN\t_\t_\t0\troot\t_\tSpaceAfter=No\n3.1\tx\t_\t_\t_\t_\t_\t_\t_\t_\n"
                    "4\t.\t.\tPUNCT\t_\t_\t3\tpunct\t_\t_\n\n"
                    "# sent_id = s2\n1\tA\ta\tDET\t_\t_\t5\tdet\t_\t_\n\n", encoding="utf-8")
    skipping = ReadRequest([path], "de", "train", {}, BadRows(skip=True))
    rows = list(READERS["conllu"].read(skipping))
    tree = rows[0].values.pop("tree")  # the sentence's tree on its words, for --parser gold
    assert [r.values for r in rows] == [{"id": "s1", "tokens": ["Zu", "dem", "Haus", "."],
                                         "tags": ["ADP", "DET", "NOUN", "PUNCT"]}]
    assert (tree.heads, tree.deprels, tree.token_index) == ([3, 3, 0, 3], ["case", "det", "root", "punct"],
                                                            [0, 1, 2, 3])
    assert len(skipping.bad.skipped) == 1 and skipping.bad.skipped[0].startswith(f"{path}:10: ")
    with pytest.raises(DataFormatError, match=f"^{path}:10: .*never skipped"):
        list(READERS["conllu"].read(ReadRequest([path], "de", "test", {}, BadRows(skip=True, test=True))))


def _conllu_word(k: int, form: str, upos: str, head: int) -> str:
    return f"{k}\t{form}\t{form.lower()}\t{upos}\t_\t_\t{head}\t{'root' if head == 0 else 'dep'}\t_\t_"


def test_a_conllu_error_names_the_file_and_the_word_line_without_a_sent_id(tmp_path):
    """Issue 39, point 5: a file without `# sent_id` lines was named as 'sentence None'."""
    folder = tmp_path / "UD_English-EWT"
    folder.mkdir()
    lines = ["# text = Ann ran", _conllu_word(1, "Ann", "PROPN", 2), _conllu_word(2, "ran", "VERB", 0), "",
             "# text = Bo sat .", _conllu_word(1, "Bo", "PROPN", 2), _conllu_word(2, "sat", "VRB", 0),
             _conllu_word(3, ".", "PUNCT", 2), ""]
    path = folder / "en_ewt-ud-test.conllu"
    path.write_text("\n".join(lines), encoding="utf-8")  # "VRB" (line 7) is not a UPOS tag
    with pytest.raises(DataFormatError) as caught:
        load_examples("udpos", "en", "test", data_dir=tmp_path, allow_hub=False)
    assert str(caught.value).startswith(f"{path}:7 (token 2 of the sentence at line 5): tag(s) VRB not in the "
                                        "card's tags")
    assert "None" not in str(caught.value)
    path.write_text("\n".join(["# sent_id = s2", *lines[4:]]), encoding="utf-8")
    with pytest.raises(DataFormatError, match=rf"^{re.escape(str(path))}:4 \(token 2 of the sentence at line 1, "
                                              r"sentence s2\): tag\(s\) VRB"):
        load_examples("udpos", "en", "test", data_dir=tmp_path, allow_hub=False)


def test_an_fce_label_error_names_the_bad_tokens_line_not_the_sentences(tmp_path):
    """Issue 39, point 6: the error named the line where the sentence starts (496), not the token's (504)."""
    sentence = [f"w{k}\tc" for k in range(12)]
    sentence[8] = "w8\tx"  # the ninth token of the sentence that starts at line 3: line 11
    path = tmp_path / "fce-public.test.original.tsv"
    path.write_text("\n".join(["Hi\tc", "", *sentence, ""]), encoding="utf-8")
    with pytest.raises(DataFormatError, match=rf"^{re.escape(str(path))}:11 \(token 9 of the sentence at line 3\): "
                                              r"tag\(s\) x not in the card's tags"):
        load_examples("fce", "en", "test", data_dir=tmp_path, allow_hub=False)
