"""The papers' significance test: a two-sided t-test over seeds (Li et al. 2021; Ahmad et al. 2021, p < 0.05).

`seed_ttest(system, baseline)` takes each side's score per seed. Where both sides have the same seeds the
test is paired by seed (scipy's `ttest_rel`: a one-sample t-test of the per-seed differences); otherwise
it is Welch's unequal-variance test (`ttest_ind(equal_var=False)`). Fewer than two seeds leave no
variance to estimate: the result then has no p-value and says why.

The forms are chosen for scores that differ in the last digits or sit on a large offset: paired
differences are taken seed by seed before anything is summed, Welch's samples are shifted by a common
value first (exact for scores within a factor of two of it), sums are `math.fsum`, the variance is
the two-pass form, and Welch's degrees of freedom are computed from the shares of the variance so
that tiny variances do not underflow when squared. Zero variance with a non-zero difference is
t = ±inf, p = 0 (scipy's limit); zero variance with no difference has no test. A spread within the
rounding of the scores themselves counts as zero (64 ulps of the largest score: 80.0 - 80.2 and
81.0 - 81.2 differ in the 15th digit, and scipy would call that a t of 1e14).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scipy.stats import t

PAIRED = "paired"
WELCH = "welch"
KIND_NAMES = {PAIRED: "paired t-test by seed", WELCH: "Welch's t-test"}


@dataclass(frozen=True)
class SeedTest:
    """A t-test over seeds; `p_value` is None when none was possible and `reason` says why."""

    kind: str | None  # PAIRED, WELCH, or None (no test)
    n_system: int
    n_baseline: int
    statistic: float | None = None
    df: float | None = None
    p_value: float | None = None
    reason: str | None = None

    def significant(self, alpha: float) -> bool:
        return self.p_value is not None and self.p_value < alpha and self.statistic != 0

    @property
    def kind_name(self) -> str:
        return KIND_NAMES.get(self.kind, "no t-test")


def seed_ttest(system: Mapping[Any, float], baseline: Mapping[Any, float]) -> SeedTest:
    """Two-sided t-test of `system` against `baseline`, each {seed: score}: paired by seed where the
    seeds are the same, Welch's otherwise."""
    n_system, n_baseline = len(system), len(baseline)
    if set(system) == set(baseline):
        if n_system < 2:
            return SeedTest(None, n_system, n_baseline,
                            reason=f"{_seeds(n_system)} on each side; a t-test needs at least 2")
        return _paired([system[seed] - baseline[seed] for seed in system], n_system,
                       _rounding(*system.values(), *baseline.values()))
    if min(n_system, n_baseline) < 2:
        side = "the system" if n_system < 2 else "the baseline"
        return SeedTest(None, n_system, n_baseline,
                        reason=f"{side} has {_seeds(min(n_system, n_baseline))} and the seeds differ; "
                               "Welch's t-test needs at least 2 on each side")
    return _welch(list(system.values()), list(baseline.values()))


def _rounding(*values: float) -> float:
    """The spread that float rounding of these values alone can produce."""
    return 64 * sys.float_info.epsilon * max(abs(value) for value in values)


def _seeds(n: int) -> str:
    return f"{n} seed" if n == 1 else f"{n} seeds"


def _paired(differences: list[float], n: int, rounding: float) -> SeedTest:
    mean, variance = _mean_variance(differences, rounding)
    statistic = _ratio(mean, math.sqrt(variance / n))
    if statistic is None:
        return SeedTest(PAIRED, n, n, df=n - 1, reason="the two systems score the same on every seed")
    return SeedTest(PAIRED, n, n, statistic, n - 1, _two_sided_p(statistic, n - 1))


def _welch(system: Sequence[float], baseline: Sequence[float]) -> SeedTest:
    shift, rounding = baseline[0], _rounding(*system, *baseline)
    mean_s, var_s = _mean_variance([value - shift for value in system], rounding)
    mean_b, var_b = _mean_variance([value - shift for value in baseline], rounding)
    n_s, n_b = len(system), len(baseline)
    share_s, share_b = var_s / n_s, var_b / n_b
    spread = share_s + share_b
    statistic = _ratio(mean_s - mean_b, math.sqrt(spread))
    if statistic is None:
        return SeedTest(WELCH, n_s, n_b, reason="every seed of both systems has the same score")
    if spread == 0:  # no variance on either side: df is undefined, the limit of p is 0
        return SeedTest(WELCH, n_s, n_b, statistic, None, 0.0)
    df = 1.0 / ((share_s / spread) ** 2 / (n_s - 1) + (share_b / spread) ** 2 / (n_b - 1))
    return SeedTest(WELCH, n_s, n_b, statistic, df, _two_sided_p(statistic, df))


def _mean_variance(values: Sequence[float], rounding: float) -> tuple[float, float]:
    """Mean and sample variance (n - 1), two-pass with exact sums; a spread within `rounding` is 0."""
    mean = math.fsum(values) / len(values)
    variance = math.fsum((value - mean) ** 2 for value in values) / (len(values) - 1)
    return mean, 0.0 if math.sqrt(variance) <= rounding else variance


def _ratio(difference: float, error: float) -> float | None:
    """t = difference / standard error; ±inf for no error, None where both are zero (nothing to test)."""
    if error == 0:
        return None if difference == 0 else math.copysign(math.inf, difference)
    return difference / error


def _two_sided_p(statistic: float, df: float) -> float:
    return 0.0 if math.isinf(statistic) else float(min(1.0, 2.0 * t.sf(abs(statistic), df)))
