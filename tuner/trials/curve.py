"""A server's latency-vs-load curve: the levels of its load ladder and what they imply.

Each ``Level`` is one bounded open-loop run at an offered request rate; the ``Curve`` holds
them with the warm-up's saturated throughput and answers, from the measurements only:

- ``capacity_rps``: the highest offered rate whose level held (every SLO met); 0 when
  none held; None with no level;
- ``capacity_output_throughput``: the output throughput (tok/s) measured at that level;
- ``at(metric, rate)``: a level figure at a reference rate, interpolated linearly between
  the two measured levels that bracket it; None outside the measured range (the curve is
  never extrapolated).

Goodput is ``vllm bench serve --goodput``'s ``request_goodput``: requests per second that
met every per-request objective (``tuner.loadgen.metrics.meets_slo``). SLO attainment is
the share of the level's requests (failed ones included) that met them. Both are parts
(``tuner.trials.parts``): stored as JSON objects, unknown keys kept, so an older or newer
tuner's curve reads and writes back as it was. All times are the server's (simulated time
on a simulator).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tuner.trials.parts import Part

# The figures of a level that ``Curve.at`` interpolates.
LEVEL_FIGURES = ("achieved_rps", "output_throughput", "p50_ttft_ms", "p99_ttft_ms",
                 "p50_itl_ms", "p99_itl_ms", "slo_attainment", "goodput_rps",
                 "judged_p99_ttft_ms", "judged_p99_itl_ms")


@dataclass(frozen=True)
class Level(Part):
    """One rung of the ladder: the ``offered_rps`` of its arrivals and what the server did.
    ``held``: every study SLO held over the run's steady requests (the whole run where it
    had none; ``tuner.capacity.run.level_of``), the server kept up (``latency_trend``
    within the ladder's tolerance, ``tuner.loadgen.ladder.kept_up``), and the run was a
    valid measurement (``invalid_reason`` says why not). A level ``stopped_early`` stopped
    sending once its SLO miss was certain (``tuner.loadgen.miss``): it never holds, and its
    figures, of a shortened run, bound the full run's from below; ``Curve.at`` and the
    answers from stored curves pass over it."""

    offered_rps: float | None = None
    achieved_rps: float | None = None           # completed requests / run duration
    output_throughput: float | None = None      # tok/s
    p50_ttft_ms: float | None = None
    p99_ttft_ms: float | None = None
    p50_itl_ms: float | None = None
    p99_itl_ms: float | None = None
    steady_p99_ttft_ms: float | None = None     # over the steady requests, judged by held
    steady_p99_itl_ms: float | None = None
    slo_attainment: float | None = None         # share of requests meeting every SLO
    goodput_rps: float | None = None            # vLLM's request_goodput
    latency_trend: float | None = None          # time in system's growth, s per s
    held: bool | None = None
    requests: int | None = None
    failed: int | None = None
    invalid_reason: str | None = None
    stopped_early: bool | None = None           # True: stopped once its miss was certain

    @property
    def judged_p99_itl_ms(self) -> float | None:
        """The p99 ITL that ``held`` was judged on: the steady requests', else the run's."""
        return self.p99_itl_ms if self.steady_p99_itl_ms is None else self.steady_p99_itl_ms

    @property
    def judged_p99_ttft_ms(self) -> float | None:
        """The p99 TTFT that ``held`` was judged on: the steady requests', else the run's."""
        return self.p99_ttft_ms if self.steady_p99_ttft_ms is None else self.steady_p99_ttft_ms


def _levels(value: Sequence[Mapping[str, Any]]) -> tuple[Level, ...]:
    return tuple(Level.from_json(v) for v in value)


@dataclass(frozen=True)
class Curve(Part):
    """A ladder's levels in the order measured, the warm-up's ``saturated_rps``, the
    ladder's ``tolerance`` and why it stopped (``verdict``, ``tuner.loadgen.ladder``)."""

    levels: tuple[Level, ...] = field(default=(), metadata={"read": _levels})
    saturated_rps: float | None = None
    tolerance: float | None = None
    verdict: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "levels", tuple(Level.of(v) for v in self.levels))

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
    def capacity_level(self) -> Level | None:
        held = [lv for lv in self.measured if lv.held]
        return held[-1] if held else None

    @property
    def capacity_rps(self) -> float | None:
        if not self.measured:
            return None
        level = self.capacity_level
        return 0.0 if level is None else level.offered_rps

    @property
    def capacity_output_throughput(self) -> float | None:
        level = self.capacity_level
        if level is None:
            return 0.0 if self.measured else None
        return level.output_throughput

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
    """What a trial tells from its curve: ``capacity_rps`` and ``capacity_output_throughput``,
    and at ``reference_rate`` the ``reference_p99_itl_ms`` / ``reference_p99_ttft_ms``;
    a figure the curve cannot give (no level, the rate outside the measured ones) is left
    out."""
    out = {"capacity_rps": curve.capacity_rps,
           "capacity_output_throughput": curve.capacity_output_throughput}
    if reference_rate is not None:
        out["reference_p99_itl_ms"] = curve.at("p99_itl_ms", reference_rate)
        out["reference_p99_ttft_ms"] = curve.at("p99_ttft_ms", reference_rate)
    return {k: float(v) for k, v in out.items() if v is not None}
