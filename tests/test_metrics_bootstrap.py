"""The metric registry, resampling by counts, and the paired bootstrap against exact probabilities."""

import math

import numpy as np
import pytest

from xsyn.metrics import METRIC_IDS, METRICS, compute, get_metric, primary_name, resample_fn
from xsyn.metrics.bootstrap import paired_bootstrap


def test_registry_lists_every_metric_and_explains_unknown_ids():
    assert METRIC_IDS == ("accuracy", "seqeval", "squad", "mlqa", "intent_slot", "cged", "word_accuracy", "mcc",
                          "accuracy_f1", "correlation", "detection", "squad_v2", "subset_accuracy")
    primaries = ["accuracy", "f1", "f1", "f1", "exact_match", "position_f1", "accuracy", "mcc", "accuracy",
                 "pearson", "f0.5", "f1", "accuracy"]
    assert [primary_name(m) for m in METRIC_IDS] == primaries
    assert METRICS.names() == METRIC_IDS  # no package has added one here
    with pytest.raises(ValueError, match="unknown metric 'bleu'; choose one of accuracy, seqeval, squad, mlqa"):
        compute("bleu", [], [])
    with pytest.raises(ValueError, match="unknown metric 'acuracy'; .*; did you mean 'accuracy'"):
        compute("acuracy", [], [])
    with pytest.raises(ValueError, match="metric 'accuracy' takes no options"):
        get_metric("accuracy", mode="strict")
    with pytest.raises(ValueError, match="accuracy: no examples to score"):
        compute("accuracy", [], [])
    with pytest.raises(ValueError, match="accuracy: 2 predictions but 1 references"):
        compute("accuracy", ["a", "b"], ["a"])


def test_a_resample_recomputes_f1_from_counts_instead_of_averaging_example_f1():
    gold = [["B-PER", "O"], ["B-LOC", "B-ORG"], ["O", "O"]]
    pred = [["B-PER", "O"], ["B-LOC", "O"], ["B-PER", "O"]]
    indices = np.array([0, 1, 1, 2])
    fn = resample_fn("seqeval", pred, gold)
    expected = compute("seqeval", [pred[i] for i in indices], [gold[i] for i in indices])["f1"]
    # counts on the resample: tp 1+1+1, predicted 1+1+1+1, gold 1+2+2 -> F1 = 2*3/(4+5) = 2/3
    assert fn(indices) == pytest.approx(expected) == pytest.approx(200 / 3)


def accuracy_tables(system_correct, baseline_correct):
    metric = get_metric("accuracy")
    table = lambda correct: metric.count_table(correct, [True] * len(correct))  # noqa: E731
    return metric, table(system_correct), table(baseline_correct)


def test_p_value_matches_the_exact_probability_that_the_gain_disappears():
    # n = 10 examples: the system alone is right on 2, the baseline alone on 1, both on the rest.
    # A resample's delta is (A - B)/n with (A, B, rest) ~ Multinomial(10; 0.2, 0.1, 0.7), so
    # p = P(A <= B), summed exactly below.
    n = 10
    system = [True, True, False] + [True] * 7
    baseline = [False, False, True] + [True] * 7
    exact = sum(math.comb(n, a) * math.comb(n - a, b) * 0.2**a * 0.1**b * 0.7 ** (n - a - b)
                for a in range(n + 1) for b in range(n + 1 - a) if a <= b)
    metric, sys_table, base_table = accuracy_tables(system, baseline)
    result = paired_bootstrap(metric, [sys_table], [base_table], resamples=4000, rng=np.random.default_rng(3))
    assert result.delta == pytest.approx(10.0)  # 100% - 90% accuracy
    assert result.p_value == pytest.approx(exact, abs=0.025)  # 4000 resamples: sd about 0.007
    assert result.n_examples == n and result.resamples == 4000


def test_a_loss_is_tested_in_its_own_direction_and_no_difference_is_never_significant():
    better = [True] * 40
    worse = [True] * 20 + [False] * 20
    metric, good, bad = accuracy_tables(better, worse)
    losing = paired_bootstrap(metric, [bad], [good], resamples=200)
    assert losing.delta == pytest.approx(-50.0) and losing.p_value == 0.0
    tie = paired_bootstrap(metric, [good], [good], resamples=200)
    assert tie.delta == 0.0 and tie.p_value == 1.0


def test_seed_groups_are_compared_by_their_mean_score():
    metric, seed_a, baseline = accuracy_tables([True, True, False, False], [True, False, False, False])
    _, seed_b, _ = accuracy_tables([True, True, True, True], [True] * 4)
    result = paired_bootstrap(metric, [seed_a, seed_b], [baseline], resamples=50)
    assert result.delta == pytest.approx((50 + 100) / 2 - 25)
    with pytest.raises(ValueError, match="same examples"):
        paired_bootstrap(metric, [seed_a], [seed_a.take([0, 1])])


def test_bootstrap_sd_of_accuracy_is_the_binomial_standard_error():
    from xsyn.metrics import get_metric
    from xsyn.metrics.bootstrap import bootstrap_sd

    metric = get_metric("accuracy")
    table = metric.count_table(["a"] * 700 + ["b"] * 300, ["a"] * 1000)  # p = 0.7 on n = 1000
    expected = 100 * (0.7 * 0.3 / 1000) ** 0.5  # 1.449 points
    assert bootstrap_sd(metric, table, resamples=2000) == pytest.approx(expected, rel=0.08)
    assert bootstrap_sd(metric, table, seed=1) == bootstrap_sd(metric, table, seed=1)  # seeded
