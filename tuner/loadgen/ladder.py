"""The adaptive load ladder: which open-loop request rate to measure next (pure).

A server's capacity under SLOs is the highest request rate at which every SLO holds. The
ladder finds it with a few bounded runs: it brackets it (a rate that held and a higher one
that failed), then bisects the bracket until ``hi / lo - 1 <= tolerance`` or the level
budget is spent, as SGLang's ``auto_benchmark`` and Vidur-Search bisect the rate (vLLM's
``auto_tune.sh`` steps down one rate at a time instead).

The saturated throughput of the warm-up (a closed loop at full load, requests/s) seeds it:

- the first level is ``start_rate``, else ``first_share`` x the saturated throughput;
- while every level held, the next doubles the highest, as long as that stays below the
  saturated throughput; past it, the saturated throughput is the bracket's upper end and
  the next is the geometric mean of the highest level and it. An open loop at the
  saturated throughput is a queue at utilisation 1, whose backlog has no steady state: a
  long run there meets no TTFT SLO, and a short level there that holds is luck. So the
  saturated rate itself is never measured (unless ``start_rate`` is at or above it). Once
  a level within the tolerance below it (or above it) held, the ladder stops: capacity
  is that level, never a rate above the highest measured one;
- while every level failed, the next halves the lowest; if the budget ends so, the
  capacity is 0;
- with a bracket, the next is its geometric mean (rates span orders of magnitude).

With the default ``first_share`` of 1/2, a capacity between a quarter of the saturated
throughput and all of it is bracketed, and narrowed to within 5 %, in at most six levels
(five above a half: 1/2, then 0.71, 0.84, 0.92, 0.96 of the saturated throughput while
every level holds).

A level holds (``holds``) when its run met every SLO and the server kept up with it
(``kept_up``): a level is short, and a backlog that grows through it may still leave its
p99 latencies within the SLOs, although a longer run at that rate would not.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass

from tuner.errors import UsageError


class Verdict(str, enum.Enum):
    """Why the ladder stopped, or that it has not; equal to its text."""

    RUNNING = "running"          # more levels to measure
    BRACKETED = "bracketed"      # hi / lo - 1 <= tolerance
    SATURATED = "saturated"      # held up to the saturated throughput (or start above it)
    NONE_HELD = "none-held"      # the budget ended with no level held: capacity 0
    BUDGET = "budget"            # the budget ended before the bracket was narrow enough

    __str__ = str.__str__
    __format__ = str.__format__


@dataclass(frozen=True)
class LadderPlan:
    """How a ladder searches: relative ``tolerance`` of the bracket, at most ``max_levels``
    measured levels, the first rate (``start_rate`` requests/s, else ``first_share`` of the
    warm-up's saturated throughput) and the factor ``step`` by which it moves before it has
    a bracket. With ``stop_on_miss``, a level stops sending once its SLO miss is certain
    (``tuner.loadgen.miss``): a failed level only bounds the capacity, and its verdict
    is fixed by then."""

    tolerance: float = 0.05
    max_levels: int = 6
    start_rate: float | None = None
    first_share: float = 0.5
    step: float = 2.0
    stop_on_miss: bool = True

    def __post_init__(self) -> None:
        if not 0 < self.tolerance < 1:
            raise UsageError(f"ladder tolerance {self.tolerance} must lie in (0, 1)")
        if self.max_levels < 1:
            raise UsageError(f"ladder max_levels {self.max_levels} must be at least 1")
        if self.start_rate is not None and not 0 < self.start_rate < math.inf:
            raise UsageError(f"ladder start_rate {self.start_rate} must be a positive rate")
        if not 0 < self.first_share <= 1:
            raise UsageError(f"ladder first_share {self.first_share} must lie in (0, 1]")
        if not self.step > 1:
            raise UsageError(f"ladder step {self.step} must be above 1")


def kept_up(latency_trend: float | None, tolerance: float) -> bool:
    """Whether the server kept up with a level's arrivals: the time in system grew by at
    most ``tolerance`` seconds per second of arrivals (``latency_trend``,
    ``tuner.loadgen.window.latency_trend``). A queue fed ``1 + e`` times faster than it is
    served grows so at ``e``: with the ladder's tolerance, a level at a rate more than the
    tolerance above what the server sustains does not hold, whatever its short run's
    latencies. None (too few requests to tell) is no evidence of a backlog."""
    return latency_trend is None or latency_trend <= tolerance


def holds(*, valid: bool, slo_met: float | None, completed: int, failed: int,
          latency_trend: float | None, tolerance: float) -> bool:
    """Whether a level holds: a valid run (it measured the server, not the client) that
    completed requests, failed none, met every SLO (``slo_met`` 1) and ``kept_up``."""
    return (valid and slo_met == 1.0 and completed > 0 and failed == 0
            and kept_up(latency_trend, tolerance))


@dataclass(frozen=True)
class Outcome:
    """Where the ladder stands: ``capacity`` (the highest level that held; 0 when none did),
    the bracket's ``lo`` (= capacity, None when none held) and ``hi`` (the lowest failed
    level above it; None when none), and ``verdict``."""

    capacity: float
    lo: float | None
    hi: float | None
    verdict: Verdict


def assess(levels: Mapping[float, bool], saturated: float | None,
           plan: LadderPlan = LadderPlan()) -> Outcome:
    """The outcome of the ``levels`` measured so far (offered rate -> whether every SLO
    held), given the warm-up's ``saturated`` throughput (requests/s; None when unknown)."""
    held = [r for r, ok in levels.items() if ok]
    lo = max(held) if held else None
    above = [r for r, ok in levels.items() if not ok and (lo is None or r > lo)]
    hi = min(above) if above else None
    if lo is not None and hi is not None and hi / lo - 1 <= plan.tolerance:
        verdict = Verdict.BRACKETED
    elif lo is not None and hi is None and saturated is not None and (
            lo >= saturated * (1 - plan.tolerance)):
        verdict = Verdict.SATURATED
    elif len(levels) >= plan.max_levels:
        verdict = Verdict.NONE_HELD if lo is None else Verdict.BUDGET
    else:
        verdict = Verdict.RUNNING
    return Outcome(lo or 0.0, lo, hi, verdict)


def next_rate(levels: Mapping[float, bool], saturated: float | None,
              plan: LadderPlan = LadderPlan()) -> float | None:
    """The next rate to measure (requests/s), or None when the ladder is done (``assess``
    says why). A ValueError when there is neither a ``start_rate`` nor a positive
    ``saturated`` throughput to begin from."""
    if not levels:
        if plan.start_rate is not None:
            return plan.start_rate
        if saturated is None or not saturated > 0:
            raise ValueError("a ladder needs a start_rate or a positive saturated throughput "
                             f"from its warm-up, not {saturated!r}")
        return saturated * plan.first_share
    out = assess(levels, saturated, plan)
    if out.verdict is not Verdict.RUNNING:
        return None
    if out.lo is not None and out.hi is not None:
        return math.sqrt(out.lo * out.hi)
    if out.lo is not None:
        up = out.lo * plan.step
        return up if saturated is None or up < saturated else math.sqrt(out.lo * saturated)
    return min(levels) / plan.step


def level_requests(rate: float, level_s: float) -> int:
    """How many requests a level at ``rate`` requests/s for ``level_s`` seconds sends: a
    fixed count (at least one), as ``vllm bench serve --num-prompts``."""
    return max(1, round(rate * level_s))
