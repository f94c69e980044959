"""Bad rows of the new kinds' files: each a one-line error naming file, line (or JSON path) and field;
`--skip-bad-rows` skips and counts them in training and dev data; a test row is never skipped."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from xsyn.data.loading import load_examples
from xsyn.data.readers import DataFormatError

FIXTURES = Path(__file__).parent / "fixtures"


def copy_fixture(task: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(FIXTURES / task, tmp_path / task))


def replace_line(path: Path, number: int, new: str) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[number - 1] = new
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.mark.parametrize("score, problem", [
    ("7.25", "score 7.25 is outside the card's score_range 0 to 5"), ("-0.5", "score -0.5 is outside"),
    ("high", "score 'high' is not a number"), ("nan", "score nan is outside")])
def test_an_stsb_score_outside_0_to_5_or_not_a_number_names_file_line_and_field(tmp_path, score, problem):
    data = copy_fixture("stsb", tmp_path)
    train = data / "train.tsv"
    fields = train.read_text(encoding="utf-8").splitlines()[2].split("\t")
    replace_line(train, 3, "\t".join([*fields[:-1], score]))
    with pytest.raises(DataFormatError, match=f"^{train}:3: {problem}") as err:
        load_examples("stsb", "en", "train", data_dir=data)
    assert "\n" not in str(err.value)
    examples, report = load_examples("stsb", "en", "train", data_dir=data, skip_bad_rows=True)
    assert len(examples) == 3 and len(report.skipped) == 1 and report.skipped[0].startswith(f"{train}:3: ")


def test_a_squad_v2_question_marked_impossible_but_with_answers_is_named_by_its_json_path(tmp_path):
    data = copy_fixture("squad_v2", tmp_path)
    dev = data / "dev-v2.0.json"
    release = json.loads(dev.read_text(encoding="utf-8"))
    release["data"][1]["paragraphs"][0]["qas"][1]["answers"] = [{"text": "the cat", "answer_start": 15}]
    dev.write_text(json.dumps(release), encoding="utf-8")
    where = rf"^{dev}: data\[1\]\.paragraphs\[0\]\.qas\[1\]: "
    with pytest.raises(DataFormatError, match=where + r"is_impossible is true but the question has 1 answer\(s\)"):
        load_examples("squad_v2", "en", "validation", data_dir=data)
    examples, report = load_examples("squad_v2", "en", "validation", data_dir=data, skip_bad_rows=True)
    assert [e.id for e in examples] == ["d1", "d2", "d3"] and len(report.skipped) == 1


def test_squad_v2_questions_without_answers_are_kept_as_unanswerable(tmp_path):
    examples, report = load_examples("squad_v2", "en", "train", data_dir=FIXTURES / "squad_v2")
    assert [(e.id, e.label, [a.text for a in e.answers]) for e in examples] == [
        ("t1", None, ["the cat"]), ("t2", None, ["a tree"]), ("t3", "unanswerable", []), ("t4", None, ["Berlin"]),
        ("t5", "unanswerable", [])]
    assert report.unlabelled == 0


def test_an_fce_line_without_a_label_names_its_line_and_a_test_row_is_never_skipped(tmp_path):
    data = copy_fixture("fce", tmp_path)
    train, test = data / "fce-public.train.original.tsv", data / "fce-public.test.original.tsv"
    replace_line(train, 3, "went")
    with pytest.raises(DataFormatError, match=f"^{train}:3: expected a token and a tag, got 'went'"):
        load_examples("fce", "en", "train", data_dir=data)
    examples, report = load_examples("fce", "en", "train", data_dir=data, skip_bad_rows=True)
    assert len(examples) == 3 and len(report.skipped) == 1
    replace_line(test, 2, "go\tx")
    with pytest.raises(DataFormatError, match=f"^{test}:2 \\(token 2 of the sentence at line 1\\): "
                                              "tag\\(s\\) x not in the card's tags.*never skipped"):
        load_examples("fce", "en", "test", data_dir=data, skip_bad_rows=True)


def test_a_race_file_without_options_is_named_with_the_field_and_other_files_still_load(tmp_path):
    data = copy_fixture("race", tmp_path)
    broken = data / "train" / "middle" / "1.txt"
    article = json.loads(broken.read_text(encoding="utf-8"))
    del article["options"]
    broken.write_text(json.dumps(article), encoding="utf-8")
    with pytest.raises(DataFormatError, match=f"^{broken}: no 'options' field"):
        load_examples("race", "en", "train", data_dir=data)
    examples, report = load_examples("race", "en", "train", data_dir=data, skip_bad_rows=True)
    assert [e.id for e in examples] == ["high/2.txt#0", "high/2.txt#1"] and len(report.skipped) == 1


def test_a_race_question_with_three_options_names_its_place(tmp_path):
    data = copy_fixture("race", tmp_path)
    test = data / "test" / "high" / "6.txt"
    article = json.loads(test.read_text(encoding="utf-8"))
    article["options"][1] = article["options"][1][:3]
    test.write_text(json.dumps(article), encoding="utf-8")
    with pytest.raises(DataFormatError, match=rf"^{test}: questions\[1\]: 3 options, but the card's labels name 4 "
                                              r"\(A, B, C, D\).*never skipped"):
        load_examples("race", "en", "test", data_dir=data, skip_bad_rows=True)


def test_a_capped_split_keeps_as_many_of_each_label_as_the_cap_allows_in_file_order():
    from xsyn.data.example import Example, label_balanced

    labels = ["1", "1", "0", "1", "1", "1", "0", "0"]
    examples = [Example(id=str(i), segments=[], label=label) for i, label in enumerate(labels)]
    # two of each label: "1" at 0 and 1, "0" at 2 and 6 (the first four are 3:1)
    assert [e.id for e in label_balanced(examples, 4)] == ["0", "1", "2", "6"]
    assert [e.id for e in label_balanced(examples, 5)] == ["0", "1", "2", "3", "6"]  # the first label first
    assert [e.id for e in label_balanced(examples, 7)] == ["0", "1", "2", "3", "4", "6", "7"]
    assert label_balanced(examples, 20) == examples
    tagged = [Example(id=str(i), segments=[], tags=["O"]) for i in range(5)]  # no class label: the first N
    assert label_balanced(tagged, 2) == tagged[:2]
