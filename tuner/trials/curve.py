"""A server's latency-vs-load curve: the levels of its load ladder and what they imply.

Each ``Level`` is one bounded open-loop run at an offered request rate; the ``Curve`` holds
them with the warm-up's saturated throughput and answers, from the measurements only:

- ``estimate(slo)``: the capacity under ``slo`` (the curve's own SLO by default) with its
  interval, fitted over the margins of every level (``tuner.slo.fit``): where the SLO's
  one verdict (``tuner.slo.Slo.verdict``) crosses from held to missed. A curve stored
  before curves kept their SLO and intervals answers as it was read then: the highest
  offered rate whose level held (by the verdict at ``slo`` where one is given), with no
  interval;
- ``capacity_rps``: the estimate's point; 0 when no level held; None with no level;
- ``capacity_output_throughput``: the output throughput (tok/s) at that point;
- ``at(metric, rate)``: a level figure at a reference rate, interpolated linearly between
  the two measured levels that bracket it; None outside the measured range (the curve is
  never extrapolated).

A stored curve is read back only when it is one a ladder could have measured: at most
``tuner.limits.MAX_CURVE_LEVELS`` levels, offered rates above 0, every rate, throughput
and latency a finite number within ``tuner.limits``' bounds, shares within 0..1 (``check``
refuses the rest with a ``ValueError``, and the record's read skips the trial).

Goodput is ``vllm bench serve --goodput``'s ``request_goodput``: requests per second that
met every per-request objective (``tuner.loadgen.metrics.meets_slo``). SLO attainment is
the share of the level's requests (failed ones included) that met them. Both are parts
(``tuner.trials.parts``): stored as JSON objects, unknown keys kept, so an older or newer
tuner's curve reads and writes back as it was. All times are the server's (simulated time
on a simulator).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tuner.limits import (MAX_CURVE_LEVELS, MAX_DURATION_MS, MAX_RELATIVE, MAX_REQUEST_RATE,
                          MAX_REQUESTS, MAX_THROUGHPUT)
from tuner.slo import FIGURES, Capacity, Point, Slo, Verdict, capacity
from tuner.trials.parts import Part

# The figures of a level that ``Curve.at`` interpolates.
DEFAULT_TOLERANCE = 0.05  # the ladder's backlog tolerance when a curve does not say

LEVEL_FIGURES = ("achieved_rps", "output_throughput", "p50_ttft_ms", "p99_ttft_ms",
                 "p50_itl_ms", "p99_itl_ms", "slo_attainment", "goodput_rps",
                 "judged_p99_ttft_ms", "judged_p99_itl_ms")


@dataclass(frozen=True)
class Level(Part):
    """One rung of the ladder: the ``offered_rps`` of its arrivals and what the server did.
    ``held``: the SLO's verdict held (``verdict``: every limit met by the run's steady
    requests, the whole run's where it had none, and the backlog within the ladder's
    tolerance; ``tuner.capacity.run.level_of``), no request failed, and the run was a
    valid measurement (``invalid_reason`` says why not). ``estimates``: each figure's
    steady p99 with its interval; ``margins``: the verdict at the curve's SLO. A level
    ``stopped_early`` stopped sending once its SLO miss was certain
    (``tuner.loadgen.miss``): it never holds, and its figures, of a shortened run, bound
    the full run's from below; ``Curve.at`` and the answers from stored curves pass over
    it."""

    offered_rps: float | None = None
    achieved_rps: float | None = None           # completed requests / run duration
    output_throughput: float | None = None      # tok/s
    p50_ttft_ms: float | None = None
    p99_ttft_ms: float | None = None
    p50_itl_ms: float | None = None
    p99_itl_ms: float | None = None
    p99_tpot_ms: float | None = None
    p99_e2el_ms: float | None = None
    steady_p99_ttft_ms: float | None = None     # over the steady requests, judged by held
    steady_p99_itl_ms: float | None = None
    steady_p99_tpot_ms: float | None = None
    steady_p99_e2el_ms: float | None = None
    # figure -> the steady p99 with its interval (tuner.slo.Estimate's JSON, ms)
    estimates: Mapping[str, Any] | None = None
    latency_trend_se: float | None = None       # the trend's standard error
    margins: Mapping[str, Any] | None = None    # the verdict at the curve's SLO (JSON)
    slo_attainment: float | None = None         # share of requests meeting every SLO
    goodput_rps: float | None = None            # vLLM's request_goodput
    latency_trend: float | None = None          # time in system's growth, s per s
    held: bool | None = None
    requests: int | None = None
    failed: int | None = None
    invalid_reason: str | None = None
    stopped_early: bool | None = None           # True: stopped once its miss was certain

    def check(self) -> None:
        """A level a ladder could have measured (the module docstring)."""
        _within(self.offered_rps, "offered_rps", MAX_REQUEST_RATE, above_zero=True)
        for name in ("achieved_rps", "goodput_rps"):
            _within(getattr(self, name), name, MAX_REQUEST_RATE)
        _within(self.output_throughput, "output_throughput", MAX_THROUGHPUT)
        _within(self.slo_attainment, "slo_attainment", 1.0)
        _within(self.latency_trend_se, "latency_trend_se", MAX_RELATIVE)
        _within(None if self.latency_trend is None else abs(self.latency_trend),
                "latency_trend", MAX_RELATIVE)
        for name in ("requests", "failed"):
            _within(getattr(self, name), name, MAX_REQUESTS)
        for name in LATENCIES:
            _within(getattr(self, name), name, MAX_DURATION_MS)
        for figure, est in (self.estimates or {}).items():
            if not isinstance(est, Mapping):
                raise TypeError(f"Level.estimates.{figure}: an object was expected")
            for end in ("value", "lower", "upper"):
                _within(est.get(end), f"estimates.{figure}.{end}", MAX_DURATION_MS)

    def judged(self, figure: str) -> float | None:
        """The figure (one of ``tuner.slo.FIGURES``) the verdict judges: the steady
        requests' where the level had a steady state, else the whole run's."""
        steady = getattr(self, "steady_" + figure)
        return getattr(self, figure) if steady is None else steady

    def verdict(self, slo: Slo) -> Verdict:
        """``slo``'s verdict on this level's judged figures, with their intervals where the
        level recorded them (a level that recorded intervals but none for a figure has it
        unbounded), and its backlog."""
        figures = {f: self.judged(f) for f in FIGURES}
        if self.estimates is None:
            intervals = None
        else:
            intervals = {f: ((self.estimates.get(f) or {}).get("lower"),
                             (self.estimates.get(f) or {}).get("upper")) for f in FIGURES}
        return slo.verdict(figures, intervals, self.latency_trend, self.latency_trend_se)

    @property
    def usable(self) -> bool:
        """A valid measurement at an offered rate (a client that lagged measured itself)."""
        return self.offered_rps is not None and self.invalid_reason is None

    def point(self, slo: Slo) -> Point:
        """This level as the capacity fit takes it. One whose requests failed (or that
        completed none) misses by an unknown amount, as one stopped on a certain miss
        does (``tuner.slo.Point.of``)."""
        if self.failed or self.requests == 0:
            return Point.of(self.offered_rps, Verdict(()), stopped_early=True)
        return Point.of(self.offered_rps, self.verdict(slo), bool(self.stopped_early))

    @property
    def judged_p99_itl_ms(self) -> float | None:
        """The p99 ITL that ``held`` was judged on: the steady requests', else the run's."""
        return self.p99_itl_ms if self.steady_p99_itl_ms is None else self.steady_p99_itl_ms

    @property
    def judged_p99_ttft_ms(self) -> float | None:
        """The p99 TTFT that ``held`` was judged on: the steady requests', else the run's."""
        return self.p99_ttft_ms if self.steady_p99_ttft_ms is None else self.steady_p99_ttft_ms


LATENCIES = ("p50_ttft_ms", "p99_ttft_ms", "p50_itl_ms", "p99_itl_ms", "p99_tpot_ms",
             "p99_e2el_ms", "steady_p99_ttft_ms", "steady_p99_itl_ms", "steady_p99_tpot_ms",
             "steady_p99_e2el_ms")


def _within(value: Any, name: str, most: float, above_zero: bool = False) -> None:
    """Refuse a stored figure that is no finite number in [0, most] ((0, most])."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name}: {value!r:.40} is not a number")
    low_ok = value > 0 if above_zero else value >= 0
    if not (math.isfinite(value) and low_ok and value <= most):
        low = "above 0" if above_zero else "0"
        raise ValueError(f"{name}: {value!r} is not a finite number from {low} to {most:g}")


def _levels(value: Sequence[Mapping[str, Any]]) -> tuple[Level, ...]:
    """The stored levels; more than ``MAX_CURVE_LEVELS`` are refused before any is read."""
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"Curve.levels: {value!r:.40} is not a list")
    if len(value) > MAX_CURVE_LEVELS:
        raise ValueError(f"Curve.levels: {len(value)} levels, more than a ladder measures "
                         f"(at most {MAX_CURVE_LEVELS})")
    out = []
    for i, v in enumerate(value):
        try:
            out.append(Level.from_json(v))
        except (TypeError, ValueError) as e:
            raise type(e)(f"Curve.levels[{i}]: {e}") from e
    return tuple(out)


@dataclass(frozen=True)
class Curve(Part):
    """A ladder's levels in the order measured, the warm-up's ``saturated_rps``, the
    ladder's ``tolerance`` and why it stopped (``verdict``, ``tuner.loadgen.ladder``)."""

    levels: tuple[Level, ...] = field(default=(), metadata={"read": _levels})
    saturated_rps: float | None = None
    tolerance: float | None = None
    verdict: str | None = None
    slo: Mapping[str, float] | None = None      # the limits the levels were judged at

    def __post_init__(self) -> None:
        object.__setattr__(self, "levels", tuple(Level.of(v) for v in self.levels))

    def check(self) -> None:
        """A curve a ladder could have measured (the module docstring)."""
        _within(self.saturated_rps, "saturated_rps", MAX_REQUEST_RATE)
        _within(self.tolerance, "tolerance", MAX_RELATIVE)
        for figure, limit in (self.slo or {}).items():
            _within(limit, f"slo.{figure}", MAX_DURATION_MS, above_zero=True)

    def to_json(self) -> dict[str, Any]:
        out = super().to_json()
        if "levels" not in self.extra:  # a stored null stays null
            out["levels"] = [lv.to_json() for lv in self.levels]
        return out

    @property
    def measured(self) -> tuple[Level, ...]:
        """The levels with an offered rate, by offered rate."""
        return tuple(sorted((lv for lv in self.levels if lv.offered_rps is not None),
                            key=lambda lv: lv.offered_rps))

    @property
    def own_slo(self) -> Slo | None:
        """The SLO the ladder judged its levels at (None: stored before curves kept it)."""
        if not self.slo:
            return None
        tol = DEFAULT_TOLERANCE if self.tolerance is None else self.tolerance
        return Slo.of(self.slo, tol)

    def estimate(self, slo: Slo | None = None) -> Capacity | None:
        """The capacity under ``slo`` (the curve's own by default) with its interval
        (module docstring); None with no usable level, or with neither SLO."""
        usable = [lv for lv in self.measured if lv.usable]
        if not usable:
            return None
        if self.own_slo is None:  # stored before curves kept their SLO: the rule of then
            return self._highest_held(usable, slo)
        return capacity([lv.point(slo or self.own_slo) for lv in usable])

    def _highest_held(self, usable: Sequence[Level], slo: Slo | None) -> Capacity:
        """A curve stored before intervals, as its capacity was read then: the highest
        level that held (at ``slo``: whose verdict holds, no request failed and it ran
        whole; without one, as the ladder judged it), with no interval."""
        if slo is None:
            held = [lv for lv in usable if lv.held]
        else:
            held = [lv for lv in usable if not lv.failed and not lv.stopped_early
                    and lv.requests != 0 and lv.verdict(slo).held]
        rate = held[-1].offered_rps if held else 0.0
        return Capacity(rate, None, None, bool(held) and held[-1] is usable[-1],
                        tuple(lv.offered_rps for lv in usable))

    @property
    def capacity_level(self) -> Level | None:
        """The highest level that held."""
        held = [lv for lv in self.measured if lv.held]
        return held[-1] if held else None

    @property
    def capacity_rps(self) -> float | None:
        est = self.estimate()
        return None if est is None else est.point

    @property
    def capacity_output_throughput(self) -> float | None:
        """The output throughput at the capacity's point: interpolated between the levels
        around it, else the highest held level's; 0 at a capacity of 0."""
        est = self.estimate()
        if est is None:
            return None
        if est.point <= 0:
            return 0.0
        at = self.at("output_throughput", est.point)
        if at is not None:
            return at
        level = self.capacity_level
        return None if level is None else level.output_throughput

    def at(self, metric: str, rate: float) -> float | None:
        """``metric`` (one of ``LEVEL_FIGURES``) at offered ``rate``: a measured level's own
        figure at its rate, else interpolated between the measured levels that bracket it
        (levels ``stopped_early`` passed over); None outside them or where one lacks it."""
        if metric not in LEVEL_FIGURES:
            raise ValueError(f"no level figure {metric!r}: use one of {LEVEL_FIGURES}")
        levels = [lv for lv in self.measured if not lv.stopped_early]
        for lv in levels:  # exactly, not through the interpolation's rounding
            if lv.offered_rps == rate:
                value = getattr(lv, metric)
                return None if value is None else float(value)
        for a, b in zip(levels, levels[1:] or levels):
            lo, hi = a.offered_rps, b.offered_rps
            if lo <= rate <= hi:
                va, vb = getattr(a, metric), getattr(b, metric)
                if va is None or vb is None:
                    return None
                if hi == lo:
                    return float(va)
                return float(va + (vb - va) * (rate - lo) / (hi - lo))
        return None


def objective_figures(curve: Curve, reference_rate: float | None) -> dict[str, float]:
    """What a trial tells from its curve: ``capacity_rps`` (the estimate's point) with
    ``capacity_rps_lower`` / ``capacity_rps_upper`` (its interval) and
    ``capacity_censored`` (1: every level held), ``capacity_output_throughput``, and at
    ``reference_rate`` the ``reference_p99_itl_ms`` / ``reference_p99_ttft_ms``; a figure
    the curve cannot give (no level, no interval, the rate outside the measured ones) is
    left out."""
    est = curve.estimate()
    out = {"capacity_rps": None if est is None else est.point,
           "capacity_rps_lower": None if est is None else est.lower,
           "capacity_rps_upper": None if est is None else est.upper,
           "capacity_censored": None if est is None else float(est.censored),
           "capacity_output_throughput": curve.capacity_output_throughput}
    if reference_rate is not None:
        out["reference_p99_itl_ms"] = curve.at("p99_itl_ms", reference_rate)
        out["reference_p99_ttft_ms"] = curve.at("p99_ttft_ms", reference_rate)
    return {k: float(v) for k, v in out.items() if v is not None}
