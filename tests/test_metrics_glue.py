"""GLUE's MCC, accuracy + F1 and Pearson/Spearman against scikit-learn and scipy, edge cases included."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from xsyn.metrics import compute, resample_fn

metrics = pytest.importorskip("sklearn.metrics")
stats = pytest.importorskip("scipy.stats")


@pytest.mark.parametrize("predicted, gold", [
    (["a", "b", "a", "a", "b", "b", "a"], ["a", "b", "b", "a", "b", "a", "a"]),
    (["x", "y", "z", "x", "z", "y", "y"], ["x", "y", "y", "z", "z", "y", "x"]),  # three classes
    (["a", "a", "a", "a"], ["a", "b", "a", "b"]),  # constant predictions: 0, as scikit-learn says
    (["b", "a"], ["b", "a"]),
])
def test_mcc_is_scikit_learns_matthews_corrcoef(predicted, gold):
    assert compute("mcc", predicted, gold)["mcc"] == pytest.approx(100 * metrics.matthews_corrcoef(gold, predicted))


def test_mcc_resamples_from_the_confusion_counts():
    predicted, gold = ["a", "b", "a", "b", "b"], ["a", "b", "b", "b", "a"]
    fn = resample_fn("mcc", predicted, gold)
    rows = [0, 0, 1, 2, 4]
    assert fn(np.array(rows)) == pytest.approx(
        100 * metrics.matthews_corrcoef([gold[i] for i in rows], [predicted[i] for i in rows]))


def test_accuracy_f1_scores_f1_of_the_positive_label():
    predicted = ["equivalent", "equivalent", "not_equivalent", "equivalent", "not_equivalent"]
    gold = ["equivalent", "not_equivalent", "not_equivalent", "equivalent", "equivalent"]
    scores = compute("accuracy_f1", predicted, gold, positive="equivalent")
    assert scores["accuracy"] == pytest.approx(60.0)
    assert scores["f1"] == pytest.approx(100 * metrics.f1_score(gold, predicted, pos_label="equivalent"))
    assert compute("accuracy_f1", ["no"], ["no"], positive="yes")["f1"] == 0.0  # no positive anywhere


@pytest.mark.parametrize("predicted, gold", [
    ([0.1, 2.5, 3.3, 4.9, 1.0, 2.5], [0.0, 2.0, 3.8, 5.0, 1.2, 3.0]),
    ([1.0, 1.0, 2.0, 3.0, 3.0, 3.0], [0.5, 2.0, 2.0, 4.0, 1.0, 4.0]),  # ties on both sides (average ranks)
    ([3.0, 2.0, 1.0], [1.0, 2.0, 3.0]),
])
def test_pearson_and_spearman_are_scipys(predicted, gold):
    scores = compute("correlation", predicted, gold)
    assert scores["pearson"] == pytest.approx(100 * stats.pearsonr(predicted, gold)[0])
    assert scores["spearman"] == pytest.approx(100 * stats.spearmanr(predicted, gold)[0])


def test_a_constant_prediction_has_no_correlation_reported_as_zero_where_scipy_gives_nan():
    predicted, gold = [2.5, 2.5, 2.5, 2.5], [0.0, 1.0, 4.0, 5.0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert math.isnan(stats.pearsonr(predicted, gold)[0]) and math.isnan(stats.spearmanr(predicted, gold)[0])
    assert compute("correlation", predicted, gold) == {"pearson": 0.0, "spearman": 0.0}
