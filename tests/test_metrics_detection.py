"""FCE error detection: P/R/F0.5 of the error class over tokens, against scikit-learn."""

from __future__ import annotations

import pytest

from xsyn.metrics import MetricInputError, compute

metrics = pytest.importorskip("sklearn.metrics")


def flat(sentences):
    return [t for s in sentences for t in s]


def test_precision_recall_and_f05_of_the_error_class_over_every_token():
    predicted = [["c", "i", "i", "c"], ["i", "c"], ["c"]]
    gold = [["c", "i", "c", "c"], ["i", "i"], ["i"]]
    scores = compute("detection", predicted, gold)
    p, r, f, _ = metrics.precision_recall_fscore_support(flat(gold), flat(predicted), beta=0.5, pos_label="i",
                                                         average="binary")
    assert (scores["precision"], scores["recall"], scores["f0.5"]) == pytest.approx((100 * p, 100 * r, 100 * f))
    assert (scores["precision"], scores["recall"]) == pytest.approx((200 / 3, 50.0))  # worked out: 2/3, 2/4


def test_no_gold_error_and_no_predicted_error_score_zero_not_nan():
    assert compute("detection", [["c", "c"]], [["c", "c"]]) == {"precision": 0.0, "recall": 0.0, "f0.5": 0.0}


def test_a_tag_count_that_differs_from_the_tokens_is_refused():
    with pytest.raises(MetricInputError, match="1 predicted tags for 2 gold tokens"):
        compute("detection", [["c"]], [["c", "i"]])
