"""A server's capacity under an SLO, with an interval, from the margins of every level
of its ladder (pure).

Each level contributes its worst margin (``tuner.slo.verdict``: the largest measured
figure over its limit) with that margin's interval. Latency percentiles and the backlog
grow with the offered rate in steady state, so the margins are fitted non-decreasing in
the rate (isotonic regression, as vLLM's removed ``serve_sla.py`` fitted its margins),
once for the points, once for the intervals' lower ends and once for their upper ends.
Levels measured at the same rate are pooled first: the mean of their margins, their
intervals' half-widths shrunk by the square root of their number; where one of them
missed by an unknown amount (it failed requests or stopped on a certain miss), the rate
misses so, its lower end the largest of theirs.

The **capacity** is where the fitted points cross 1, interpolated linearly between the
two levels around the crossing. Its interval runs from where the fitted upper ends cross
1 (below it the SLO holds with confidence) to where the fitted lower ends cross 1 (above
it the SLO misses with confidence). Nothing is extrapolated: a crossing past the highest
level is read at the highest level, and when even the points never cross the capacity
is **censored**, at least the highest level's rate. When the lowest level already
missed, the capacity is 0.

Each level's interval is read alone there, so one noisy level near the edge sets the
interval. Where at least ``MIN_LOCAL`` levels lie within ``LOCAL`` of that crossing
(their margins finite), the crossing and its interval come from all of them together: a
straight line of margin against rate, weighted by each level's own uncertainty (its
interval's half-width over 1.96), its errors scaled up when the levels scatter about it
more than their intervals say (the Birge ratio), and the crossing's interval by the
delta method. It is kept only where the line rises and its interval lies within the
isotonic one.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tuner.slo.dist import isotonic
from tuner.slo.verdict import Verdict

BIG = 1e9  # an unbounded margin, as the fit's arithmetic takes it
LOCAL = 0.25  # the local line takes the levels within 25 % of the isotonic crossing
MIN_LOCAL = 3
Z975 = 1.96


@dataclass(frozen=True)
class Capacity:
    """The capacity's ``point`` (requests/s), its interval ``[lower, upper]`` (None when
    the levels came without intervals: older records), whether it is ``censored`` (every
    level held: at least ``point``), and the offered rates it rests on (``rates``)."""

    point: float
    lower: float | None
    upper: float | None
    censored: bool
    rates: tuple[float, ...]

    @property
    def width(self) -> float | None:
        """The interval's width over the point (None without an interval or a point)."""
        if self.lower is None or self.upper is None or not self.point > 0:
            return None
        return (self.upper - self.lower) / self.point

    def straddles(self, rate: float) -> bool:
        """Whether ``rate`` lies inside the interval: at the limit, neither side sure."""
        return (self.lower is not None and self.upper is not None
                and self.lower < rate < self.upper)


@dataclass(frozen=True)
class Point:
    """One level as the fit takes it: its offered ``rate`` and worst margin with its
    interval; ``exact``: the margin came without an interval."""

    rate: float
    value: float
    lower: float
    upper: float
    exact: bool = False

    @classmethod
    def of(cls, rate: float, verdict: Verdict, stopped_early: bool = False) -> Point:
        """A level's point. A level stopped once its miss was certain misses by an
        unknown amount: its margin and upper end are unbounded, its lower end at least
        past 1 (the fit then reads the crossing at the last level within the limit,
        never inside a level it could not measure whole)."""
        ms = verdict.margins
        value = max((m.value for m in ms), default=BIG)
        lower = max((m.lower for m in ms), default=BIG)
        upper = max((m.upper for m in ms), default=BIG)
        exact = all(m.lower == m.value == m.upper for m in ms)
        if stopped_early:  # a certain miss, by an unknown amount: its shortened run's
            # figures only bound the whole run's from below, so they bound the capacity
            # from above (the lower end) and say nothing of the point
            past = math.nextafter(1.0, math.inf)
            lower = max(max((m.lower for m in ms), default=0.0), past)
            value, upper, exact = math.inf, math.inf, False
        return cls(rate, value, lower, upper, exact)


def pooled(points: Sequence[Point]) -> list[Point]:
    """The points by rate, those at one rate pooled (module docstring)."""
    by_rate: dict[float, list[Point]] = defaultdict(list)
    for p in points:
        by_rate[p.rate].append(p)
    out = []
    for rate in sorted(by_rate):
        ps = by_rate[rate]
        if any(p.value >= BIG for p in ps):  # one run certainly missed: the rate misses,
            # by an unknown amount, and each run's lower end bounds its margin
            out.append(Point(rate, math.inf, max(p.lower for p in ps), math.inf))
            continue
        v = float(np.mean([_cap(p.value) for p in ps]))
        k = math.sqrt(len(ps))
        lo = v - float(np.mean([_cap(p.value) - _cap(p.lower) for p in ps])) / k
        hi = v + float(np.mean([_cap(p.upper) - _cap(p.value) for p in ps])) / k
        out.append(Point(rate, v, lo, hi, all(p.exact for p in ps)))
    return out


def _cap(x: float) -> float:
    return min(x, BIG)


def crossing(rates: np.ndarray, fit: np.ndarray) -> float | None:
    """The rate at which ``fit`` (non-decreasing over ``rates``) first exceeds 1, linear
    between the levels around it (the level below, when the one above is unbounded); 0
    when the first level exceeds it; None when no level does."""
    above = np.nonzero(fit > 1.0)[0]
    if above.size == 0:
        return None
    i = int(above[0])
    if i == 0:
        return 0.0
    r0, r1, g0, g1 = rates[i - 1], rates[i], fit[i - 1], fit[i]
    if g1 >= BIG:  # an unbounded margin: nothing to interpolate towards
        return float(r0)
    return float(r0 + (1.0 - g0) / (g1 - g0) * (r1 - r0))


def capacity(points: Sequence[Point]) -> Capacity | None:
    """The capacity the points imply (module docstring); None without a point."""
    ps = pooled(points)
    if not ps:
        return None
    rates = np.array([p.rate for p in ps])
    fits = [isotonic([getattr(p, key) for p in ps])
            for key in ("value", "upper", "lower")]
    top = float(rates[-1])
    point, lower, upper = (crossing(rates, f) for f in fits)
    censored = point is None
    exact = all(p.exact for p in ps)
    if exact:
        return Capacity(top if censored else point, None, None, censored,
                        tuple(float(r) for r in rates))
    lower = top if lower is None else lower
    upper = top if upper is None else upper
    if not censored and point > 0:
        local = local_crossing([p for p in ps if abs(p.rate / point - 1) <= LOCAL])
        whole = max((p.rate for p in ps if p.value < BIG), default=0.0)
        if (local is not None and lower <= local[1] and local[2] <= upper
                and local[0] <= whole):  # never past the highest level measured whole
            point, lower, upper = local
    return Capacity(top if censored else point, lower, upper, censored,
                    tuple(float(r) for r in rates))


def local_crossing(points: Sequence[Point]) -> tuple[float, float, float] | None:
    """The weighted line's crossing of 1 with its interval (module docstring), or None
    with fewer than ``MIN_LOCAL`` finite points or a line that does not rise."""
    ps = [p for p in points if p.upper < BIG and p.lower > -BIG and p.value < BIG]
    if len(ps) < MIN_LOCAL:
        return None
    r = np.array([p.rate for p in ps])
    y = np.array([p.value for p in ps])
    sd = np.array([max(p.upper - p.lower, 1e-6) / (2 * Z975) for p in ps])
    w = 1.0 / sd ** 2
    x = np.column_stack([np.ones_like(r), r])
    cov = np.linalg.inv(x.T @ (x * w[:, None]))
    a, b = cov @ (x.T @ (w * y))
    if not b > 0:
        return None
    resid = y - (a + b * r)
    dof = len(ps) - 2
    birge = float(resid @ (w * resid)) / dof if dof > 0 else 1.0
    cov = cov * max(1.0, birge)
    root = (1.0 - a) / b
    grad = np.array([-1.0 / b, -(1.0 - a) / b ** 2])
    half = Z975 * math.sqrt(float(grad @ cov @ grad))
    return float(root), float(root - half), float(root + half)
