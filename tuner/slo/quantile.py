"""A percentile of a latency sample with a confidence interval (pure).

``percentile_estimate`` returns the sample's percentile exactly as vLLM reports it
(numpy's linear interpolation) and a two-sided interval for the percentile of the
distribution the sample came from:

- **order statistics** (distribution-free) where the sample is large enough: the
  interval is ``[X_(r), X_(s)]`` with ``r``, ``s`` the binomial quantiles of the count of
  samples below the percentile. A p99 needs a few hundred samples for an upper bound;
- else an **exponential tail** fitted to the excesses over the sample's 90th percentile
  (peaks over a threshold, the generalised Pareto tail with shape 0, as an M/M/1
  queue's waiting time has): the p99 is ``u + beta ln 10`` and ``beta``'s interval is the
  chi-square interval of a mean of exponentials. It gives a finite bound from a short
  level, where order statistics cannot, at the price of a model of the tail.

Latency samples are not independent: the tokens of one engine step stall together, and
the requests that arrive in a burst queue together. Either interval counts an effective
sample ``n (1 - rho) / (1 + rho)``, where ``rho`` is the lag-1 autocorrelation of the
indicator "above the estimate" over the samples in time order (the AR(1) variance
inflation of a mean of indicators), so that clustered exceedances count about once per
cluster.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tuner.slo.dist import binom_ppf, chi2_ppf

CONFIDENCE = 0.95
TAIL_FROM = 90.0   # the threshold of the tail model: the sample's 90th percentile
MAX_RHO = 0.98     # an indicator series correlated past this is one cluster per 100 samples
MIN_SAMPLES = 10   # fewer: no interval at all


@dataclass(frozen=True)
class Estimate:
    """A percentile ``value`` and its interval ``[lower, upper]`` (the sample's units;
    ``upper`` may be ``inf`` when nothing bounds it), from ``n`` samples worth
    ``n_eff`` independent ones, by ``method`` ("order" or "tail")."""

    value: float
    lower: float
    upper: float
    n: int
    n_eff: float
    method: str

    def to_json(self) -> dict:
        """JSON-safe: an unbounded end is None."""
        return {"value": self.value, "lower": _finite(self.lower),
                "upper": _finite(self.upper), "n": self.n, "n_eff": round(self.n_eff, 1),
                "method": self.method}


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def lag1(series: np.ndarray) -> float:
    """The lag-1 autocorrelation of ``series``, within [0, MAX_RHO] (0 when constant)."""
    dev = series - series.mean()
    denom = float(dev @ dev)
    if denom <= 0 or series.size < 3:
        return 0.0
    return min(MAX_RHO, max(0.0, float(dev[1:] @ dev[:-1]) / denom))


def effective_size(in_time_order: np.ndarray, threshold: float) -> float:
    """How many independent samples ``in_time_order`` is worth for the share above
    ``threshold`` (at least 1)."""
    rho = lag1((in_time_order > threshold).astype(float))
    return max(1.0, in_time_order.size * (1.0 - rho) / (1.0 + rho))


def percentile_estimate(in_time_order: Sequence[float], q: float = 99.0,
                        confidence: float = CONFIDENCE) -> Estimate | None:
    """The ``q``-th percentile of the samples (given in the order they were observed) and
    its ``confidence`` interval, as the module docstring says; None with fewer than
    ``MIN_SAMPLES`` finite samples."""
    x = np.asarray(in_time_order, dtype=float)
    x = x[np.isfinite(x)]
    if x.size < MIN_SAMPLES:
        return None
    value = float(np.percentile(x, q))
    ordered = np.sort(x)
    alpha, p = 1.0 - confidence, q / 100.0
    m = int(effective_size(x, value))
    r = int(binom_ppf(alpha / 2, m, p))
    s = int(binom_ppf(1 - alpha / 2, m, p)) + 1
    lo_rank, hi_rank = math.floor(r * x.size / m), math.ceil(s * x.size / m)
    if lo_rank >= 1 and hi_rank <= x.size:
        return Estimate(value, float(ordered[lo_rank - 1]), float(ordered[hi_rank - 1]),
                        int(x.size), float(m), "order")
    return _tail(x, value, q, confidence)


def _tail(x: np.ndarray, value: float, q: float, confidence: float) -> Estimate:
    """The exponential-tail interval (module docstring) for ``q`` above ``TAIL_FROM``."""
    u = float(np.percentile(x, TAIL_FROM))
    excess = x[x > u] - u
    if excess.size == 0 or q <= TAIL_FROM:
        return Estimate(value, value, math.inf, int(x.size), float(x.size), "tail")
    k = effective_size(x, u) * excess.size / x.size  # exceedances worth independent ones
    beta = float(excess.mean())
    alpha = 1.0 - confidence
    lo_beta = 2 * k * beta / chi2_ppf(1 - alpha / 2, 2 * k)
    hi_beta = 2 * k * beta / chi2_ppf(alpha / 2, 2 * k)
    share = (100.0 - q) / (100.0 - TAIL_FROM)  # P(X > x_q | X > u)
    scale = -math.log(share)
    return Estimate(value, float(min(value, u + lo_beta * scale)),
                    float(max(value, u + hi_beta * scale)), int(x.size),
                    float(k * x.size / max(excess.size, 1)), "tail")
