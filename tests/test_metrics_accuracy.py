"""Accuracy metrics against independent computations (scikit-learn where installed)."""

from __future__ import annotations

import pytest

from xsyn.metrics import MetricInputError, compute


def test_word_accuracy_counts_every_word_of_the_corpus_not_a_mean_over_sentences():
    predicted = [["NOUN", "VERB", "NOUN", "PUNCT"], ["DET"]]
    gold = [["NOUN", "VERB", "ADJ", "PUNCT"], ["PRON"]]
    # 3 of 5 words: a mean of the sentences' accuracies would say (75 + 0) / 2 = 37.5
    assert compute("word_accuracy", predicted, gold)["accuracy"] == pytest.approx(60.0)
    metrics = pytest.importorskip("sklearn.metrics")
    flat = [t for s in predicted for t in s], [t for s in gold for t in s]
    assert compute("word_accuracy", predicted, gold)["accuracy"] == pytest.approx(
        100 * metrics.accuracy_score(flat[1], flat[0]))


def test_word_accuracy_refuses_a_sentence_whose_tag_count_differs_from_its_words():
    with pytest.raises(MetricInputError, match="example 1: 1 predicted tags for 2 gold words"):
        compute("word_accuracy", [["NOUN"], ["NOUN"]], [["NOUN"], ["NOUN", "VERB"]])


def test_subset_accuracy_scores_each_subset_apart_and_all_together():
    predicted = ["A", "B", "C", "D", "A"]
    gold = [("A", "middle"), ("C", "middle"), ("C", "high"), ("D", "high"), ("B", "high")]
    assert compute("subset_accuracy", predicted, gold) == pytest.approx(
        {"accuracy": 60.0, "accuracy_middle": 50.0, "accuracy_high": 100 * 2 / 3})
