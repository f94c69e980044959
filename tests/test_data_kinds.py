"""The task-kind registry: every card's kind is one `TaskKind`, which alone knows its name."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import xsyn
from xsyn.data.cards import CardError, list_tasks, load_card, parse_card
from xsyn.data.example import Answer, Example
from xsyn.data.kinds import KINDS
from xsyn.syntax.segment import Segment


def test_every_card_kind_is_in_the_registry_and_an_unknown_kind_is_a_card_error():
    assert {load_card(name).kind for name in list_tasks()} <= set(KINDS)
    with pytest.raises(CardError, match=r"my\.toml: kind: 'ranking' is not one of single-classification"):
        parse_card({"name": "x", "version": 1, "kind": "ranking", "languages": ["en"], "splits": ["test"],
                    "metric": "accuracy"}, "my.toml")


def test_no_module_outside_the_registry_tests_a_kind_by_name():
    package = Path(xsyn.__file__).parent
    name = "[\"'](" + "|".join(re.escape(name) for name in KINDS) + ")[\"']"
    test = re.compile(f"(==|!=)\\s*{name}|{name}\\s*(==|!=|:)|\\bin \\([^)]*{name}")  # comparisons, table keys
    offenders = [str(path.relative_to(package)) for path in package.rglob("*.py")
                 if "kinds" not in path.relative_to(package).parts and test.search(path.read_text(encoding="utf-8"))]
    assert offenders == []


def test_every_head_is_a_model_head():
    from xsyn.models.heads import HEAD_CLASSES

    assert {k.head for k in KINDS.values()} == set(HEAD_CLASSES)


def tokens(*words: str) -> Example:
    return Example("s", [Segment("en", tokens=list(words))])


def test_prediction_files_take_each_benchmarks_layout(tmp_path):
    two = [tokens("a"), tokens("b")]
    path = KINDS["token-classification"].write_predictions(tmp_path / "test-en", two, [["B-PER", "O"], ["O"]],
                                                           "seqeval")
    assert path.name == "test-en.tsv" and path.read_text() == "B-PER\nO\n\nO\n\n"
    cged = [Example("d1", []), Example("d2", [])]
    path = KINDS["token-classification"].write_predictions(tmp_path / "test-zh", cged, [{(3, 4, "S"), (1, 1, "R")},
                                                                                       set()], "cged")
    assert path.read_text() == "d1, 1, 1, R\nd1, 3, 4, S\nd2, correct\n"
    path = KINDS["intent-slot"].write_predictions(tmp_path / "test-de", [tokens("x")], [("play", ["B-song"])],
                                                  "intent_slot")
    assert path.read_text() == "play\tB-song\n"
    qa = [Example("q1", [], answers=[Answer("Ann", 0)])]
    path = KINDS["extractive-qa"].write_predictions(tmp_path / "test-en-de", qa, ["Ann"], "squad")
    assert path.name == "test-en-de.json" and json.loads(path.read_text()) == {"q1": "Ann"}
    path = KINDS["single-classification"].write_predictions(tmp_path / "dev", two, ["1", "0"], "accuracy")
    assert path.read_text() == "1\n0\n"


README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_names_the_squad_v2_na_prob_file_that_evaluation_writes(tmp_path):
    """The official SQuAD 2.0 script's second input: the README gives the name evaluation writes it under."""
    qa = [Example("q1", [], answers=[]), Example("q2", [], answers=[Answer("Ann", 0)])]
    kind = KINDS["extractive-qa-v2"]  # SQuAD 2.0's kind: answers, or none
    path = kind.write_predictions(tmp_path / "validation-en", qa, [("", 3.5), ("Ann", -2.0)], "squad_v2")
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == ["validation-en-na_prob.json", "validation-en.json"] and path.name == "validation-en.json"
    assert json.loads((tmp_path / "validation-en-na_prob.json").read_text()) == {"q1": 3.5, "q2": -2.0}
    text = README.read_text(encoding="utf-8")
    assert "`<split>-<lang>-na_prob.json`" in text and "--na-prob-file validation-en-na_prob.json" in text


def test_races_data_dir_is_the_release_folder_itself_as_the_readme_says(tmp_path):
    """`--data-dir RACE/` (the release's folder, holding dev/high/...) loads; the README's task table says so."""
    from xsyn.data.loading import load_examples

    article = {"article": "Tom went home.", "questions": ["Who went home?"], "options": [["Tom", "Ann", "Bo", "Cy"]],
               "answers": ["A"], "id": "high1.txt"}
    (tmp_path / "RACE" / "dev" / "high").mkdir(parents=True)
    (tmp_path / "RACE" / "dev" / "high" / "1.txt").write_text(json.dumps(article), encoding="utf-8")
    examples, _report = load_examples("race", "en", "validation", data_dir=tmp_path / "RACE")
    assert [(e.id, e.label) for e in examples] == [("high/1.txt#0", "A")]
    row = next(line for line in README.read_text(encoding="utf-8").splitlines() if line.startswith("| `race` |"))
    assert "`--data-dir` is the release's `RACE/` folder itself" in row
