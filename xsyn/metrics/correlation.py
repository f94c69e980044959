"""Spearman's rank correlation with a permutation p-value, for a handful of languages.

rho is Pearson's correlation of the ranks (ties get their average rank; scipy's `spearmanr`). The
p-value is two-sided: the share of pairings of the two variables whose |rho| is at least the
observed one. With few points every pairing is enumerated (exact; n! <= `permutations`), otherwise
`permutations` random pairings drawn from a generator seeded by `seed` count, the observed one
included ((hits + 1) / (permutations + 1), never 0). Both the seed and whether it was exact are returned, so
a report can state how its p-value was made.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import rankdata

MIN_POINTS = 3
_TIE = 1e-12  # a permuted |rho| this close to the observed one counts as reaching it (float noise)


@dataclass(frozen=True)
class Correlation:
    """Spearman's rho over `n` points; `rho` and `p_value` are None where `reason` says why none."""

    n: int
    rho: float | None = None
    p_value: float | None = None
    permutations: int = 0  # pairings the p-value counts over
    exact: bool = False
    seed: int | None = None  # None for an exact p-value (nothing random)
    reason: str | None = None


def spearman_permutation(x: Sequence[float], y: Sequence[float], permutations: int, seed: int) -> Correlation:
    """Spearman's rho of `x` and `y` and its two-sided permutation p-value."""
    if len(x) != len(y):
        raise ValueError(f"x has {len(x)} values and y {len(y)}; a correlation needs them in pairs")
    n = len(x)
    if n < MIN_POINTS:
        return Correlation(n, reason=f"{n} point{'s' if n != 1 else ''}; a rank correlation needs at least "
                                     f"{MIN_POINTS}")
    centred_x = _centred(rankdata(x))
    centred_y = _centred(rankdata(y))
    scale = math.sqrt(float(centred_x @ centred_x) * float(centred_y @ centred_y))
    if scale == 0:
        which = "x" if not centred_x.any() else "y"
        return Correlation(n, reason=f"every {which} value is the same; a rank correlation needs them to vary")
    rho = float(centred_x @ centred_y) / scale
    exact = math.factorial(n) <= permutations
    if exact:
        shuffled = np.array(list(itertools.permutations(centred_y)))
    else:
        shuffled = np.random.default_rng(seed).permuted(np.tile(centred_y, (permutations, 1)), axis=1)
    reached = int(np.count_nonzero(np.abs(shuffled @ centred_x) / scale >= abs(rho) - _TIE))
    if exact:
        return Correlation(n, rho, reached / len(shuffled), len(shuffled), True)
    return Correlation(n, rho, (reached + 1) / (permutations + 1), permutations, False, seed)


def _centred(ranks):
    return ranks - ranks.mean()
