"""Intent-slot scores (MTOP, mATIS++): exact match needs the intent and every slot tag right."""

import pytest

from xsyn.metrics import MetricInputError, compute, primary_score

GOLD = [
    ("play_music", ["B-SL:ARTIST", "I-SL:ARTIST", "O"]),
    ("play_music", ["B-SL:ARTIST", "I-SL:ARTIST", "O"]),
    ("set_alarm", ["O", "B-SL:DATE"]),
    ("set_alarm", ["B-SL:DATE", "O"]),
]
PRED = [
    ("play_music", ["B-SL:ARTIST", "I-SL:ARTIST", "O"]),  # all right
    ("play_music", ["B-SL:ARTIST", "O", "O"]),  # intent right, slot boundary wrong
    ("get_weather", ["O", "B-SL:DATE"]),  # intent wrong, slots right
    ("set_alarm", ["I-SL:DATE", "O"]),  # an I- tag after O: the same slot, but not the same tags
]


def test_exact_match_intent_accuracy_and_slot_f1_by_hand():
    result = compute("intent_slot", PRED, GOLD)
    assert result["exact_match"] == pytest.approx(25.0)  # only the first example
    assert result["intent_accuracy"] == pytest.approx(75.0)
    # slots: gold 4, predicted 4, right 3 (all but the short ARTIST); the lenient I-SL:DATE counts
    assert result["slot_precision"] == pytest.approx(75.0)
    assert result["slot_recall"] == pytest.approx(75.0)
    assert result["slot_f1"] == pytest.approx(75.0)
    assert result["slot_SL:DATE_f1"] == pytest.approx(100.0)
    assert primary_score("intent_slot", result) == pytest.approx(25.0)


def test_strict_slots_do_not_count_an_i_tag_after_o():
    result = compute("intent_slot", PRED, GOLD, mode="strict")
    assert result["slot_precision"] == pytest.approx(100 * 2 / 3)  # 3 well-formed slots predicted, 2 right
    assert result["slot_recall"] == pytest.approx(50.0)
    assert result["exact_match"] == pytest.approx(25.0)


def test_json_lists_are_accepted_and_malformed_pairs_rejected():
    assert compute("intent_slot", [["a", ["O"]]], [["a", ["O"]]])["exact_match"] == 100.0
    with pytest.raises(MetricInputError, match=r"example 0: the prediction must be a pair \(intent, slot"):
        compute("intent_slot", ["a"], [("a", ["O"])])
