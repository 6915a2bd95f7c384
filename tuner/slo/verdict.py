"""The SLO and its one verdict (pure): every place that asks "did this level hold?" asks
``Slo.verdict``.

A study's SLO limits percentiles of the server's latencies (p99 TTFT, ITL, TPOT, E2EL,
in ms). A level of the load ladder measured each one with an interval
(``tuner.slo.quantile.Estimate``), and its backlog: the growth of the time in system
(``latency_trend``, seconds per second) with its standard error.

Each limit gives a **margin**, the measured percentile over the limit (at most 1: met),
with the interval's ends over the limit. The backlog gives a margin too:
``(1 + trend) / (1 + tolerance)``. A queue fed ``1 + e`` times faster than it is served
grows at ``e``, so this margin is about the offered load over what the server sustains,
and it crosses 1 where the trend reaches the ladder's tolerance. Its interval is the
slope's 95 % t-interval, as guidellm's ``SlopeChecker`` judges a slope with its error.

A level **holds** when every margin's point is at most 1. Its verdict is **certain**
when every margin's interval lies below 1 (it held) or one lies wholly above 1 (it
missed); otherwise the level is **at the limit**.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

# The figures an SLO may limit, in the order they are reported.
FIGURES = ("p99_ttft_ms", "p99_itl_ms", "p99_tpot_ms", "p99_e2el_ms")
BACKLOG = "backlog"
DEFAULT_BACKLOG_TOLERANCE = 0.05


@dataclass(frozen=True)
class Margin:
    """One limit's margin at a level: ``value`` (the measured figure over its limit) and
    its interval ``[lower, upper]`` (``lower == upper == value`` when the figure came
    without one, ``upper`` inf when nothing bounds it); ``figure`` names what it judges."""

    figure: str
    value: float
    lower: float
    upper: float

    @property
    def met(self) -> bool:
        return self.value <= 1.0

    @property
    def certain(self) -> bool:
        return self.upper <= 1.0 or self.lower > 1.0

    def to_json(self) -> dict:
        return {"margin": self.value, "lower": self.lower,
                "upper": self.upper if math.isfinite(self.upper) else None}


@dataclass(frozen=True)
class Verdict:
    """The margins of a level under one SLO, worst first, and what they say."""

    margins: tuple[Margin, ...]

    @property
    def held(self) -> bool:
        """Every margin at most 1 (and at least one margin: no figure judges nothing)."""
        return bool(self.margins) and all(m.met for m in self.margins)

    @property
    def certain(self) -> bool:
        """Held with every interval below 1, or missed with one interval above it."""
        if self.held:
            return all(m.upper <= 1.0 for m in self.margins)
        return any(m.lower > 1.0 for m in self.margins)

    @property
    def worst(self) -> Margin | None:
        return self.margins[0] if self.margins else None

    def to_json(self) -> dict:
        return {m.figure: m.to_json() for m in self.margins}


@dataclass(frozen=True)
class Slo:
    """Every limit a study sets (``limits``: figure -> ms, figures of ``FIGURES``) and
    the backlog tolerance of its ladder (None: the backlog is not judged)."""

    limits: tuple[tuple[str, float], ...] = ()
    backlog_tolerance: float | None = DEFAULT_BACKLOG_TOLERANCE

    def __post_init__(self) -> None:
        for figure, limit in self.limits:
            if figure not in FIGURES:
                raise ValueError(f"an SLO limits one of {FIGURES}, not {figure!r}")
            if not (limit > 0 and math.isfinite(limit)):
                raise ValueError(f"SLO {figure} <= {limit!r}: a limit is a positive number")

    @classmethod
    def of(cls, limits: Mapping[str, float | None],
           backlog_tolerance: float | None = DEFAULT_BACKLOG_TOLERANCE) -> Slo:
        """From a figure -> limit mapping (None values and other keys are left out)."""
        return cls(tuple((f, float(limits[f])) for f in FIGURES
                         if limits.get(f) is not None), backlog_tolerance)

    @property
    def empty(self) -> bool:
        return not self.limits

    def limit(self, figure: str) -> float | None:
        return dict(self.limits).get(figure)

    def verdict(self, figures: Mapping[str, float | None],
                intervals: Mapping[str, tuple[float | None, float | None]] | None = None,
                trend: float | None = None, trend_se: float | None = None) -> Verdict:
        """The verdict on a level's ``figures`` (figure -> measured ms), with their
        ``intervals`` (figure -> (lower, upper) ms; an end None is unbounded) where known,
        and its backlog ``trend`` with ``trend_se``. A limited figure the level lacks
        counts as missed (margin inf): nothing is judged on a figure it did not measure."""
        margins = [_margin(f, lim, figures.get(f), (intervals or {}).get(f))
                   for f, lim in self.limits]
        if self.backlog_tolerance is not None and trend is not None:
            margins.append(backlog_margin(trend, trend_se, self.backlog_tolerance))
        return Verdict(tuple(sorted(margins, key=lambda m: -m.value)))


def _margin(figure: str, limit: float, value: float | None,
            interval: tuple[float | None, float | None] | None) -> Margin:
    if value is None or not math.isfinite(value):
        return Margin(figure, math.inf, math.inf, math.inf)
    v = value / limit
    if interval is None:
        return Margin(figure, v, v, v)
    lo, hi = interval
    return Margin(figure, v, min(v, 0.0 if lo is None else lo / limit),
                  max(v, math.inf if hi is None else hi / limit))


T975_LARGE = 1.96


def backlog_margin(trend: float, trend_se: float | None, tolerance: float) -> Margin:
    """The backlog's margin (module docstring); exact when ``trend_se`` is None."""
    v = (1.0 + trend) / (1.0 + tolerance)
    if trend_se is None or not math.isfinite(trend_se):
        return Margin(BACKLOG, v, v, v)
    half = T975_LARGE * trend_se / (1.0 + tolerance)
    return Margin(BACKLOG, v, v - half, v + half)
