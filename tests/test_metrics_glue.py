"""GLUE's MCC, accuracy + F1 and Pearson/Spearman against scikit-learn and scipy, edge cases included."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from xsyn.metrics import compute, get_metric, resample_fn

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


def _sts_like(scale: float, offset: float, n: int = 1500) -> tuple[np.ndarray, np.ndarray]:
    """Gold scores 0-5 and predictions offset + scale*(gold + noise): a model whose outputs vary little
    (small scale) or sit far from zero (large offset), where raw-sum Pearson cancels (issue 39, point 9)."""
    rng = np.random.default_rng(0)
    gold = rng.uniform(0, 5, n)
    return offset + scale * (gold + rng.normal(0, 1.5, n)), gold


@pytest.mark.parametrize("scale, offset", [(1e-4, 2.7), (1e-6, 2.7), (1.0, 1e5), (1e-3, 1e5)])
def test_pearson_stays_scipys_where_predictions_vary_little_or_sit_far_from_zero(scale, offset):
    predicted, gold = _sts_like(scale, offset)
    expected = 100 * stats.pearsonr(predicted, gold)[0]
    assert 40 < expected < 80  # the test data is correlated: a 0 would be a failure, not a match
    assert compute("correlation", list(predicted), list(gold))["pearson"] == pytest.approx(expected, abs=1e-8)


@pytest.mark.parametrize("scale, offset", [(1e-6, 2.7), (1.0, 1e5)])
def test_pearson_of_a_resample_is_scipys_on_the_drawn_rows(scale, offset):
    predicted, gold = _sts_like(scale, offset, n=400)
    rows = np.random.default_rng(1).integers(0, len(gold), len(gold))
    expected = 100 * stats.pearsonr(predicted[rows], gold[rows])[0]
    assert resample_fn("correlation", list(predicted), list(gold))(rows) == pytest.approx(expected, abs=1e-8)


def test_only_a_constant_prediction_scores_zero_however_small_the_variation():
    gold = [0.0, 1.0, 4.0, 5.0]
    assert compute("correlation", [2.7] * 4, gold)["pearson"] == 0.0
    nearly = [2.7, 2.7, 2.7, float(np.nextafter(2.7, 3.0))]  # varies by one ulp: the correlation of 0,0,0,1
    # with 0,1,4,5: covariance 2.5, centred squares 0.75 and 17 (scipy itself gives 35 here)
    assert compute("correlation", nearly, gold)["pearson"] == pytest.approx(100 * 2.5 / math.sqrt(0.75 * 17))
    fn = resample_fn("correlation", [1.0, 2.0, 3.0, 4.0], gold)
    assert fn(np.array([1, 1, 1, 1])) == 0.0  # a resample that draws one example is constant


def test_the_bootstrap_sd_of_pearson_is_the_sd_of_scipys_pearson_over_the_same_resamples():
    from xsyn.metrics.bootstrap import RESAMPLE_CHUNK, bootstrap_sd, resample_counts
    predicted, gold = _sts_like(1e-6, 2.7, n=300)
    metric = get_metric("correlation")
    rng = np.random.default_rng(0)  # bootstrap_sd's seed 0 draws these resamples, RESAMPLE_CHUNK at a time
    counts = np.concatenate([resample_counts(rng, len(gold), RESAMPLE_CHUNK) for _ in range(2)]).astype(int)
    by_scipy = [100 * stats.pearsonr(np.repeat(predicted, row), np.repeat(gold, row))[0] for row in counts]
    assert np.std(by_scipy, ddof=1) > 1.0
    table = metric.count_table(list(predicted), list(gold))
    sd = bootstrap_sd(metric, table, resamples=2 * RESAMPLE_CHUNK)
    assert sd == pytest.approx(np.std(by_scipy, ddof=1), rel=1e-9)
