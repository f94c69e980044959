"""The t-test over seeds (`xsyn.metrics.seeds`) and Spearman's rho with a permutation p-value
(`xsyn.metrics.correlation`), against scipy at awkward scales."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from xsyn.metrics.correlation import spearman_permutation
from xsyn.metrics.seeds import PAIRED, WELCH, seed_ttest

SYSTEM = [71.2, 70.4, 72.9, 71.8]
BASELINE = [70.1, 70.6, 71.0, 70.2]


def by_seed(values, seeds=None):
    return dict(zip(seeds or range(1, len(values) + 1), values, strict=True))


def test_same_seeds_give_scipys_paired_test():
    result = seed_ttest(by_seed(SYSTEM), by_seed(BASELINE))
    expected = stats.ttest_rel(SYSTEM, BASELINE)
    assert result.kind == PAIRED and result.df == 3
    assert result.statistic == pytest.approx(expected.statistic, rel=1e-12)
    assert result.p_value == pytest.approx(expected.pvalue, rel=1e-10)


def test_pairing_follows_the_seed_not_the_order():
    """{1: a, 2: b} against {2: c, 1: d} pairs a with d: listing order must not decide the pairs."""
    result = seed_ttest({1: 71.2, 2: 70.4, 3: 72.9}, {3: 71.0, 1: 70.1, 2: 70.6})
    expected = stats.ttest_rel([71.2, 70.4, 72.9], [70.1, 70.6, 71.0])
    assert result.statistic == pytest.approx(expected.statistic, rel=1e-12)


def test_different_seeds_give_welchs_test():
    result = seed_ttest(by_seed(SYSTEM), by_seed(BASELINE[:3], seeds=[7, 8, 9]))
    expected = stats.ttest_ind(SYSTEM, BASELINE[:3], equal_var=False)
    assert result.kind == WELCH and (result.n_system, result.n_baseline) == (4, 3)
    assert result.statistic == pytest.approx(expected.statistic, rel=1e-12)
    assert result.df == pytest.approx(expected.df, rel=1e-12)
    assert result.p_value == pytest.approx(expected.pvalue, rel=1e-10)


@pytest.mark.parametrize("offset", [1e6, 1e9, 1e12])
def test_a_large_offset_leaves_the_statistic_unchanged(offset):
    """t is shift-invariant: scores on a large offset (values in the last digits) test like the
    unshifted ones, which scipy computes without cancellation."""
    differences = [0.11, -0.02, 0.19, 0.07]
    base = [0.5, 1.25, 0.75, 1.0]
    paired = seed_ttest(by_seed([offset + b + d for b, d in zip(base, differences)]),
                        by_seed([offset + b for b in base]))
    exact = stats.ttest_rel([b + d for b, d in zip(base, differences)], base)
    assert paired.statistic == pytest.approx(exact.statistic, rel=1e-3 if offset >= 1e12 else 1e-6)
    welch = seed_ttest(by_seed([offset + v for v in [0.5, 0.75, 1.0]]), by_seed([offset + v for v in [0.25, 0.5]],
                                                                                [8, 9]))
    exact = stats.ttest_ind([0.5, 0.75, 1.0], [0.25, 0.5], equal_var=False)
    assert welch.statistic == pytest.approx(exact.statistic, rel=1e-9)  # quarter steps: exact at any offset
    assert welch.p_value == pytest.approx(exact.pvalue, rel=1e-9)


def test_tiny_differences_and_tiny_variances():
    """Differences of 1e-9 with variances near 1e-20 (their squares would underflow in a naive df)."""
    system = [1e-9 * v for v in (3.0, 4.0, 6.0)]
    baseline = [1e-160 * v for v in (1.0, 2.0)]
    result = seed_ttest(by_seed(system), by_seed(baseline, [5, 6]))
    expected = stats.ttest_ind(system, baseline, equal_var=False)
    assert result.statistic == pytest.approx(expected.statistic, rel=1e-9)
    assert result.df == pytest.approx(2.0, rel=1e-9)  # the baseline's share of the variance is ~0
    paired = seed_ttest(by_seed([5.0 + 1e-12, 5.0 + 3e-12, 5.0 + 2.5e-12]), by_seed([5.0, 5.0, 5.0]))
    assert paired.statistic == pytest.approx(stats.ttest_rel([1e-12, 3e-12, 2.5e-12], [0, 0, 0]).statistic,
                                             rel=1e-3)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # scipy warns of the zero variance it is given
def test_zero_variance():
    """A constant non-zero difference is scipy's limit (t = inf, p = 0); no difference at all has no test."""
    constant = seed_ttest(by_seed([71.0, 72.0, 73.0]), by_seed([70.0, 71.0, 72.0]))
    assert constant.statistic == math.inf and constant.p_value == 0.0
    assert stats.ttest_rel([71.0, 72.0, 73.0], [70.0, 71.0, 72.0]).pvalue == 0.0
    same = seed_ttest(by_seed([71.0, 72.0]), by_seed([71.0, 72.0]))
    assert same.p_value is None and "same on every seed" in same.reason
    rounded = seed_ttest(by_seed([58.0, 57.2]), by_seed([58.2, 57.4]))  # -0.2 each, 4e-15 apart in floats
    assert rounded.statistic == -math.inf and rounded.p_value == 0.0
    flat = seed_ttest(by_seed([72.0, 72.0, 72.0]), by_seed([70.0, 70.0], [8, 9]))
    assert flat.kind == WELCH and flat.statistic == math.inf and flat.p_value == 0.0
    assert stats.ttest_ind([72.0, 72.0, 72.0], [70.0, 70.0], equal_var=False).pvalue == 0.0


def test_fewer_than_two_seeds_say_why():
    one = seed_ttest({1: 71.0}, {1: 70.0})
    assert one.kind is None and one.p_value is None and "1 seed on each side" in one.reason
    lopsided = seed_ttest({1: 71.0, 2: 72.0}, {3: 70.0})
    assert lopsided.p_value is None and "the baseline has 1 seed" in lopsided.reason
    assert not lopsided.significant(0.05)


@pytest.mark.parametrize("n", [3, 5, 6])
def test_exact_permutation_p_matches_scipys_permutation_test(n):
    rng = np.random.default_rng(n)
    x = rng.normal(size=n)
    y = x + rng.normal(scale=0.8, size=n)
    y[0] = y[1]  # a tie: average ranks
    result = spearman_permutation(x, y, 10000, 0)
    assert result.rho == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
    # one sample under "pairings" permutes it against the fixed x: all n! pairings, none drawn at random
    expected = stats.permutation_test((y,), lambda b: abs(stats.spearmanr(x, b).statistic),
                                      permutation_type="pairings", alternative="greater", n_resamples=np.inf)
    assert result.exact and result.seed is None and result.permutations == math.factorial(n)
    assert result.p_value == pytest.approx(expected.pvalue, abs=1e-12)


def test_sampled_permutation_p_is_seeded_and_near_the_exact_one():
    x = [0.05, 0.12, 0.08, 0.30, 0.22, 0.41, 0.35, 0.18, 0.27, 0.50, 0.44]
    y = [0.1, -0.3, 0.4, 0.9, 0.2, 1.1, 0.6, 0.5, -0.1, 1.4, 0.8]
    first = spearman_permutation(x, y, permutations=4000, seed=3)
    assert not first.exact and first.seed == 3 and first.permutations == 4000
    assert spearman_permutation(x, y, permutations=4000, seed=3) == first
    assert first.rho == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
    # rho ~ 0.75 over 11 points: the exact two-sided p (t approximation as reference) is ~0.008
    reference = stats.spearmanr(x, y).pvalue
    assert first.p_value == pytest.approx(reference, abs=0.006)
    assert first.p_value >= 1 / 4001


def test_large_offsets_do_not_change_rho():
    x = [1e12 + v for v in (0.1, 0.2, 0.3, 0.4, 0.5)]
    y = [3.0, 1.0, 4.0, 1.5, 5.0]
    assert spearman_permutation(x, y, 100, 0).rho == pytest.approx(stats.spearmanr([1, 2, 3, 4, 5], y).statistic)


def test_too_few_or_constant_points_say_why():
    assert "at least 3" in spearman_permutation([1.0, 2.0], [2.0, 1.0], 100, 0).reason
    flat = spearman_permutation([1.0, 2.0, 3.0], [0.5, 0.5, 0.5], 100, 0)
    assert flat.rho is None and "every y value is the same" in flat.reason
