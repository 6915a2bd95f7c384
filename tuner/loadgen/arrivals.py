"""Arrival schedules, computed in full before the first request is sent (pure).

As vLLM's serving benchmark: gaps are gamma-distributed with shape ``burstiness`` and mean
``1/rate`` (burstiness 1 is a Poisson process, below 1 burstier, above 1 more regular,
infinite a constant gap); for a fixed count the cumulative times are rescaled so that the
last arrival falls exactly at ``n / rate``. An infinite rate sends everything at time 0.
"""

from __future__ import annotations

import math

import numpy as np


def arrival_times(n: int, rate: float, burstiness: float = 1.0, seed: int = 0) -> list[float]:
    """Offsets in seconds from the start of the run of ``n`` arrivals."""
    if n <= 0:
        return []
    if math.isinf(rate):
        return [0.0] * n
    gaps = _gaps(n, rate, burstiness, seed)
    times = np.cumsum(gaps)
    if times[-1] > 0:
        times *= (n / rate) / times[-1]
    return times.tolist()


def arrivals_within(duration_s: float, rate: float, burstiness: float = 1.0,
                    seed: int = 0) -> list[float]:
    """Arrival offsets in ``[0, duration_s)`` for a run bounded by time (no rescaling)."""
    if math.isinf(rate):
        raise ValueError("an infinite rate has no schedule within a duration")
    n = max(16, math.ceil(rate * duration_s * 1.5 + 10 * math.sqrt(rate * duration_s)))
    while True:
        times = np.cumsum(_gaps(n, rate, burstiness, seed))
        if times[-1] >= duration_s:
            return times[times < duration_s].tolist()
        n *= 2


def _gaps(n: int, rate: float, burstiness: float, seed: int) -> np.ndarray:
    if math.isinf(burstiness):
        return np.full(n, 1.0 / rate)
    rng = np.random.default_rng(seed)
    return rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=n)


def shard(items: list, k: int, n: int) -> list:
    """The ``k``-th of ``n`` interleaved shares (request i goes to process i mod n)."""
    return items[k::n]


def share_of(total: int | None, k: int, n: int) -> int | None:
    """Process ``k``'s share of a concurrency limit split over ``n`` processes."""
    if total is None:
        return None
    return total // n + (1 if k < total % n else 0)
