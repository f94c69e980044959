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
                 if path.name != "kinds.py" and test.search(path.read_text(encoding="utf-8"))]
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
