"""Paired bootstrap significance of a system's gain over a baseline on the same examples.

One-sided test in the direction of the observed difference (Koehn 2004; the test behind the bold
numbers of Ahmad et al. 2021, Tables 2-3): resample the examples with replacement, the same resample
for every run; a group's score is the mean over its seeds of the metric recomputed on the resample;
p is the share of resamples in which the difference is zero or has the other sign.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from xsyn.metrics.base import CountTable, Metric

DEFAULT_RESAMPLES = 1000
RESAMPLE_CHUNK = 100  # resamples whose weights are held in memory at once


@dataclass(frozen=True)
class BootstrapResult:
    delta: float  # system minus baseline on the paired examples, each the mean over its seeds
    p_value: float
    resamples: int
    n_examples: int


def paired_bootstrap(metric: Metric, system: Sequence[CountTable], baseline: Sequence[CountTable],
                     resamples: int = DEFAULT_RESAMPLES,
                     rng: np.random.Generator | None = None) -> BootstrapResult:
    """Compare two groups of runs (seeds) whose count tables list the same examples in the same order."""
    tables = [*system, *baseline]
    n = len(tables[0])
    if any(len(table) != n for table in tables):
        raise ValueError("paired bootstrap needs every run's counts over the same examples, in one order")
    if n == 0:
        raise ValueError("paired bootstrap needs at least one example")
    rng = rng if rng is not None else np.random.default_rng(0)
    full = np.ones((1, n))
    observed = float(_group_delta(metric, system, baseline, full)[0])
    against = 0
    for start in range(0, resamples, RESAMPLE_CHUNK):
        size = min(RESAMPLE_CHUNK, resamples - start)
        weights = resample_counts(rng, n, size)
        deltas = _group_delta(metric, system, baseline, weights)
        against += int(np.count_nonzero(deltas <= 0 if observed > 0 else deltas >= 0))
    p_value = 1.0 if observed == 0 else against / resamples
    return BootstrapResult(delta=observed, p_value=p_value, resamples=resamples, n_examples=n)


def bootstrap_sd(metric: Metric, table: CountTable, resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> float:
    """Sample standard deviation of the primary score over resamples of the examples (with replacement):
    the uncertainty one run's score carries from the choice of test examples."""
    rng = np.random.default_rng(seed)
    scores = [metric.primary_scores(table, resample_counts(rng, len(table), min(RESAMPLE_CHUNK, resamples - start)))
              for start in range(0, resamples, RESAMPLE_CHUNK)]
    return float(np.std(np.concatenate(scores), ddof=1))


def resample_counts(rng: np.random.Generator, n: int, size: int) -> np.ndarray:
    """How often each of n examples is drawn in each of `size` resamples of n draws with replacement."""
    draws = rng.integers(0, n, size=(size, n)) + np.arange(size)[:, None] * n
    return np.bincount(draws.ravel(), minlength=size * n).reshape(size, n).astype(float)


def _group_delta(metric: Metric, system: Sequence[CountTable], baseline: Sequence[CountTable],
                 weights: np.ndarray) -> np.ndarray:
    def mean_score(group: Sequence[CountTable]) -> np.ndarray:
        return np.mean([metric.primary_scores(table, weights) for table in group], axis=0)

    return mean_score(system) - mean_score(baseline)
