"""Model outputs -> predictions per example, worked out by hand; and oracle outputs on real data
score 100 through the card's metric."""

from __future__ import annotations

import numpy as np
import pytest
from test_data_features import PANX_TAGS, qa_example, rows, tagged

from xsyn.data.cards import load_card
from xsyn.data.decode import decode, metric_options, references
from xsyn.data.example import Answer, Example
from xsyn.data.features import IGNORE, prepare_features
from xsyn.data.loading import load_examples, tag_names
from xsyn.metrics import compute
from xsyn.syntax.parse import parse_segments
from xsyn.syntax.parsing import build_parser
from xsyn.syntax.segment import Segment


def decode_card(card, *args, **kwargs):
    """Decode with the card's kind and metric."""
    return decode(card.task_kind, *args, metric=card.metric, **kwargs)


def card_references(card, examples):
    return references(card.task_kind, examples, card.metric, task=card.name)


def test_each_token_takes_its_tag_from_the_window_where_it_has_most_context(small_tokenizer):
    card = load_card("panx")
    example = tagged(["the", "dog", "chased", "a", "cat", "."], ["O"] * 6)
    features, _ = prepare_features(card, [example], small_tokenizer, 6, tags=PANX_TAGS)
    # windows over pieces [0,4) [2,6) [4,7) (see test_data_features); each window votes one tag everywhere
    votes = {0: "B-ORG", 1: "I-ORG", 2: "B-LOC"}
    logits = [np.eye(len(PANX_TAGS))[[PANX_TAGS.index(votes[w])] * len(f["input_ids"])]
              for w, f in enumerate(rows(features))]
    (predicted,), report = decode_card(card, [example], features, {"logits": logits}, tags=PANX_TAGS)
    # first pieces: the 0, dog 1, chase 2, a 4, cat 5, . 6. Context = distance to the nearer window edge:
    # "chase" 1 in window 0 vs 0 in window 1; "a" 1 in window 1 vs 0 in window 2; "cat" 0 in window 1 vs 1 in 2
    assert predicted == ["B-ORG", "B-ORG", "B-ORG", "I-ORG", "B-LOC", "B-LOC"]
    assert (report.examples, report.features, report.tokens_without_piece) == (1, 3, 0)


def test_a_token_without_pieces_is_predicted_o_and_counted(small_tokenizer):
    card = load_card("panx")
    example = tagged(["dog", "\u200b", "cat"], ["B-PER", "B-LOC", "B-LOC"])  # the tokenizer drops U+200B
    features, _ = prepare_features(card, [example], small_tokenizer, 16, tags=PANX_TAGS)
    assert rows(features)[0]["labels"] == [IGNORE, 1, 5, IGNORE]
    logits = [np.eye(len(PANX_TAGS))[[0, 1, 5, 0]]]
    (predicted,), report = decode_card(card, [example], features, {"logits": logits}, tags=PANX_TAGS)
    assert predicted == ["B-PER", "O", "B-LOC"] and report.tokens_without_piece == 1


def qa_logits(features, start: dict, end: dict):
    """Per window: logit 0 everywhere except {(window, position): value}."""
    out = {"start_logits": [], "end_logits": []}
    for w, f in enumerate(rows(features)):
        for name, values in (("start_logits", start), ("end_logits", end)):
            array = np.zeros(len(f["input_ids"]))
            for (window, position), value in values.items():
                if window == w:
                    array[position] = value
            out[name].append(array)
    return out


def test_qa_picks_the_best_span_over_windows_and_maps_it_to_characters(small_tokenizer):
    card = load_card("xquad")
    example = qa_example(Answer("today", 25))
    features, _ = prepare_features(card, [example], small_tokenizer, 12, doc_stride=2)
    # window 0 holds context pieces 0-4 at positions 6-10 (the hearing is scheduled today),
    # window 1 pieces 2-5 at positions 6-9 (is scheduled today .)
    start = {(0, 9): 5.0, (1, 6): 100.0}  # "scheduled" in window 0; "is" in window 1
    end = {(0, 10): 5.0, (0, 9): 2.0, (1, 6): 100.0}
    outputs = qa_logits(features, start, end)
    # "is" has more context in window 0 (2) than in window 1 (0): window 1 may not start a span there
    (answer,), _ = decode_card(card, [example], features, outputs)
    assert answer == "scheduled today"  # 5 + 5 beats "scheduled" alone (5 + 2)
    (answer,), _ = decode_card(card, [example], features, outputs, max_answer_length=1)
    assert answer == "scheduled"
    (answer,), report = decode_card(card, [example], features, outputs, max_answer_length=0)
    assert answer == "" and report.empty_answers == 1


def test_classification_and_intent_slot_decoding(small_tokenizer):
    card = load_card("mtop")
    tokens = ["the", "dog", "chased", "a", "cat"]
    example = Example("m", [Segment("en", tokens=tokens, record=tagged(tokens, ["O"] * 5).segments[0].record)],
                      label="IN:GET", tags=["O"] * 5)
    features, _ = prepare_features(card, [example], small_tokenizer, 6, labels=["IN:FIND", "IN:GET"],
                                   tags=["O", "B-ANIMAL"])
    n = len(features)
    assert n == 2  # 6 pieces, 4 a window
    # intent: the windows' logits are averaged, (3 + -1) / 2 = 1 > 0.5
    intents = [np.array([3.0, 0.0]), np.array([-1.0, 1.0])]
    slots = [np.tile([0.0, 1.0], (len(f["input_ids"]), 1)) for f in rows(features)]
    ((intent, slot_tags),), _ = decode_card(card, [example], features, {"intent_logits": intents, "slot_logits": slots},
                                       labels=["IN:FIND", "IN:GET"], tags=["O", "B-ANIMAL"])
    assert intent == "IN:FIND" and slot_tags == ["B-ANIMAL"] * 5
    pawsx = load_card("pawsx")
    pair = Example("p", [Segment("en", text="a", record=None), Segment("en", text="b", record=None)], label="1")
    feature = {"example_index": 0, "window_start": 0, "window_end": 1, "tree_segment": [-1, 0, -1, 1, -1],
               "source_start": [-1, 0, -1, 0, -1], "source_end": [-1, 1, -1, 1, -1]}
    predicted, _ = decode_card(pawsx, [pair], [feature], {"logits": [np.array([0.2, 0.9])]}, labels=["0", "1"])
    assert predicted == ["1"]


def test_references_and_metric_options_follow_the_card():
    cged = load_card("cged")
    doc = Example("d", [Segment("zh", tokens=list("我聽說你"))], tags=["O", "B-W", "I-W", "O"],
                  errors=[(2, 3, "W"), (3, 3, "S")])
    assert card_references(cged, [doc]) == [{(2, 3, "W"), (3, 3, "S")}]  # the errors BIO could not hold too
    mlqa = load_card("mlqa")
    qa = Example("q", [Segment("de", text="Wer?"), Segment("en", text="Ann ran.")], answers=[Answer("Ann", 0)])
    assert card_references(mlqa, [qa]) == [["Ann"]] and metric_options(mlqa.metric, [qa]) == {"lang": "en"}
    unlabelled = Example("u", [Segment("zh", text="好")])
    with pytest.raises(ValueError, match="1 of 1 examples have no gold labels"):
        card_references(load_card("chnsenticorp"), [unlabelled])


def oracle_tag_logits(features, n_labels):
    out = []
    for f in rows(features):
        logits = np.zeros((len(f["input_ids"]), n_labels))
        for position, label in enumerate(f["labels"]):
            if label != IGNORE:
                logits[position, label] = 1.0
        out.append(logits)
    return out


def test_oracle_outputs_on_real_panx_windows_score_100(shared_data, mbert_tokenizer):
    card = load_card("panx")
    examples, _ = load_examples(card, "de", "validation", data_dir=shared_data / "panx", allow_hub=False)
    examples = examples[:300]
    parse_segments([s for e in examples for s in e.segments], build_parser("chain"))
    features, report = prepare_features(card, examples, mbert_tokenizer, 16, tags=tag_names(card))
    assert report.windowed_examples > 0  # max_length 16 forces windows
    predicted, decoded = decode_card(card, examples, features, {"logits": oracle_tag_logits(features, 7)},
                                tags=tag_names(card))
    assert predicted == [e.tags for e in examples] and decoded.tokens_without_piece == 0
    assert compute(card.metric, predicted, card_references(card, examples))["f1"] == 100.0


def test_oracle_outputs_on_real_mlqa_recover_every_chinese_answer(shared_data, mbert_tokenizer):
    card = load_card("mlqa")
    examples, _ = load_examples(card, "zh", "validation", data_dir=shared_data / "mlqa", allow_hub=False)
    examples = examples[:60]
    parse_segments([s for e in examples for s in e.segments], build_parser("chain"))
    # windows of ~110 context pieces advance 16, so every piece sits within 8 pieces of some window's
    # middle; in that window (the only one where a span may start there) the whole answer fits
    features, report = prepare_features(card, examples, mbert_tokenizer, 128, doc_stride=16)
    assert report.windowed_examples > 0
    outputs = {"start_logits": [], "end_logits": []}
    for f in rows(features):
        for name, position in (("start_logits", f["start_positions"]), ("end_logits", f["end_positions"])):
            logits = np.zeros(len(f["input_ids"]))
            logits[position] = 1.0 if position else 0.0
            outputs[name].append(logits)
    # every Chinese character is one piece, so each gold span maps back exactly; the longest answer
    # here has 44 characters, so the 30-piece limit of XTREME is raised
    predicted, _ = decode_card(card, examples, features, outputs, max_answer_length=64)
    assert predicted == [e.answers[0].text for e in examples]
    scores = compute(card.metric, predicted, card_references(card, examples), **metric_options(card.metric, examples))
    assert scores["exact_match"] == 100.0
