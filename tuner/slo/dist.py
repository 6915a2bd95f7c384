"""The few distribution functions the SLO's statistics need, on numpy and the standard
library only (pure): tuner's runtime does not depend on scipy (the offline GPU kit and
wheels carry none), and these four are short. The tests check them against scipy.

- ``isotonic``: the non-decreasing least-squares fit of a sequence (pool adjacent
  violators, as ``scipy.optimize.isotonic_regression``);
- ``binom_ppf``: the binomial quantile, exact (the cumulative sum of the pmf in logs);
- ``chi2_ppf``: the chi-square quantile, by bisection on the regularised lower
  incomplete gamma function (its power series);
- ``norm_ppf``: the standard normal quantile (``statistics.NormalDist``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

import numpy as np


def isotonic(values: Sequence[float], weights: Sequence[float] | None = None) -> np.ndarray:
    """The non-decreasing sequence nearest ``values`` in weighted least squares."""
    y = np.asarray(values, dtype=float)
    w = np.ones_like(y) if weights is None else np.asarray(weights, dtype=float)
    blocks: list[list[float]] = []  # [weighted mean, weight, count]
    for v, wt in zip(y, w):
        blocks.append([float(v), float(wt), 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, w2, n2 = blocks.pop()
            m1, w1, n1 = blocks.pop()
            total = w1 + w2
            blocks.append([(m1 * w1 + m2 * w2) / total, total, n1 + n2])
    return np.concatenate([np.full(n, m) for m, _, n in blocks]) if blocks else y


def norm_ppf(q: float) -> float:
    return NormalDist().inv_cdf(q)


def binom_ppf(q: float, n: int, p: float) -> int:
    """The least k with P(X <= k) >= q for X ~ Binomial(n, p) (0 < p < 1, n >= 0)."""
    k = np.arange(n + 1, dtype=float)
    lgam = np.frompyfunc(math.lgamma, 1, 1)
    logpmf = (math.lgamma(n + 1) - lgam(k + 1).astype(float) - lgam(n - k + 1).astype(float)
              + k * math.log(p) + (n - k) * math.log1p(-p))
    cdf = np.cumsum(np.exp(logpmf - logpmf.max()))
    cdf /= cdf[-1]
    return int(np.searchsorted(cdf, q - 1e-12))


def gamma_p(a: float, x: float) -> float:
    """The regularised lower incomplete gamma function P(a, x) (a > 0, x >= 0), from its
    power series, which converges for every x (in about x terms)."""
    if x <= 0:
        return 0.0
    term = total = 1.0 / a
    n = 0
    while abs(term) > 1e-15 * abs(total) and n < 100_000:
        n += 1
        term *= x / (a + n)
        total += term
    return min(1.0, math.exp(a * math.log(x) - x - math.lgamma(a)) * total)


def chi2_ppf(q: float, df: float) -> float:
    """The ``q`` quantile (0 < q < 1) of a chi-square with ``df`` > 0 degrees of freedom."""
    lo, hi = 0.0, df + 40.0 * math.sqrt(2.0 * df) + 40.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if gamma_p(df / 2.0, mid / 2.0) < q:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)
