"""The adaptive load ladder: which open-loop request rate to measure next (pure).

A server's capacity under SLOs is the highest request rate at which every SLO holds. The
ladder measures a few bounded levels and reads the capacity, with an interval, from the
margins of all of them (``tuner.slo.fit``): each level's worst margin (a measured p99
over its limit, or the backlog's) with that margin's confidence interval. It brackets
the crossing (a level that held and a higher one that missed), then places each next
level where the fit crosses the limit, until the capacity's interval is within
``width`` of it or the level budget is spent, as vLLM's removed ``serve_sla.py``
bisected a continuous margin.

The saturated throughput of the warm-up (a closed loop at full load, requests/s) seeds it:

- the first level is ``start_rate``, else ``first_share`` x the saturated throughput;
- while every level held, the next is where the line through the two highest levels'
  margins reaches the limit, between ``1 + 2 tolerance`` and ``step`` times the highest
  (``step`` times it from one level, or when the margins do not rise), and at most
  ``1 - tolerance`` of the saturated throughput: an open loop at the saturated
  throughput is a queue at utilisation 1 with no steady state. Once a level there held,
  the next steps ``ceiling_step`` above the highest: the warm-up's throughput reads low
  on a short run, so the ceiling comes from a level that missed, never from the
  warm-up. If the budget ends first, the capacity is censored;
- while every level missed, the next halves the lowest; if the budget ends so, the
  capacity is 0;
- with a bracket ``[lo, hi]`` (the fitted margins' last level within the limit and first
  past it), the next is where the fit crosses the limit, kept within the middle half of
  the bracket in log-rate (a fit off by a lot still halves the bracket's log-width).
  Once the bracket is within ``tolerance``, the next repeats the end of the bracket whose
  interval straddles the limit: the fit pools repeats, and their interval narrows.

A level holds when its worst margin is at most 1 (``tuner.slo.Verdict.held``): every SLO
met by its steady requests and the backlog within the tolerance (a short level whose
backlog grows through it may still meet its p99s, although a longer run would not).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass

from tuner.errors import UsageError
from tuner.slo import Capacity, Point, capacity
from tuner.slo.dist import isotonic
from tuner.slo.fit import pooled


class Verdict(str, enum.Enum):
    """Why the ladder stopped, or that it has not; equal to its text."""

    RUNNING = "running"          # more levels to measure
    BRACKETED = "bracketed"      # bracketed, and the interval within the plan's width
    SATURATED = "saturated"      # (older curves) held up to the saturated throughput
    NONE_HELD = "none-held"      # the budget ended with no level held: capacity 0
    BUDGET = "budget"            # the budget ended before the interval was narrow enough

    __str__ = str.__str__
    __format__ = str.__format__


@dataclass(frozen=True)
class LadderPlan:
    """How a ladder searches: it stops once the capacity's interval is at most ``width``
    of its point and its bracket at most ``2 x width`` wide (the interval reads the
    levels' noise, not the error of interpolating a curved margin across a wide bracket),
    or after ``max_levels`` measured levels; ``tolerance`` is the
    bracket's relative width below which levels are repeated rather than placed between,
    and the backlog's tolerance (``tuner.slo.verdict``); the first rate is ``start_rate``
    requests/s, else ``first_share`` of the warm-up's saturated throughput; ``step`` is
    the factor by which it moves before it has a bracket, ``ceiling_step`` the one above a
    level that held at the saturated throughput. With ``stop_on_miss``, a level stops
    sending once its SLO miss is certain (``tuner.loadgen.miss``): its verdict is fixed
    by then."""

    tolerance: float = 0.05
    max_levels: int = 6
    start_rate: float | None = None
    first_share: float = 0.5
    step: float = 2.0
    stop_on_miss: bool = True
    width: float = 0.08
    ceiling_step: float = 1.2

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
        if not 0 < self.width < 2:
            raise UsageError(f"ladder width {self.width} must lie in (0, 2)")
        if not self.ceiling_step > 1:
            raise UsageError(f"ladder ceiling_step {self.ceiling_step} must be above 1")


@dataclass(frozen=True)
class Outcome:
    """Where the ladder stands: ``capacity`` (the fit's estimate, ``tuner.slo.Capacity``;
    None before any level), the bracket's ``lo`` (the highest level the fit holds below
    the crossing; None when none) and ``hi`` (the first the fit misses; None when none),
    and ``verdict``."""

    capacity: Capacity | None
    lo: float | None
    hi: float | None
    verdict: Verdict


def bracket(points: Sequence[Point]) -> tuple[float | None, float | None]:
    """The fitted points' last level within the limit before the first past it, and that
    first one (None where there is none)."""
    ps = pooled(points)
    if not ps:
        return None, None
    fit = isotonic([p.value for p in ps])
    above = [p.rate for p, g in zip(ps, fit) if g > 1.0]
    hi = above[0] if above else None
    below = [p.rate for p, g in zip(ps, fit) if g <= 1.0 and (hi is None or p.rate < hi)]
    return (below[-1] if below else None), hi


def assess(points: Sequence[Point], saturated: float | None,
           plan: LadderPlan = LadderPlan(), spent: int | None = None) -> Outcome:
    """The outcome of the levels measured so far (``points``, one per usable level, as
    ``tuner.trials.curve.Level.point`` makes them), given the warm-up's ``saturated``
    throughput (requests/s; None when unknown). ``spent``: the levels measured, usable
    or not (a level that measured the client spends the budget too; default: one per
    point)."""
    spent = len(points) if spent is None else spent
    est = capacity(points)
    lo, hi = bracket(points)
    width = None if est is None else est.width
    if (lo is not None and hi is not None and width is not None and width <= plan.width
            and hi / lo - 1 <= 2 * plan.width):
        verdict = Verdict.BRACKETED
    elif spent >= plan.max_levels:
        verdict = Verdict.NONE_HELD if lo is None else Verdict.BUDGET
    else:
        verdict = Verdict.RUNNING
    return Outcome(est, lo, hi, verdict)


def next_rate(points: Sequence[Point], saturated: float | None,
              plan: LadderPlan = LadderPlan(), spent: int | None = None) -> float | None:
    """The next rate to measure (requests/s), or None when the ladder is done (``assess``
    says why; ``spent`` as there). A ValueError when there is neither a ``start_rate``
    nor a positive ``saturated`` throughput to begin from."""
    if spent is not None and spent >= plan.max_levels:
        return None
    if not points:
        if plan.start_rate is not None:
            return plan.start_rate
        if saturated is None or not saturated > 0:
            raise ValueError("a ladder needs a start_rate or a positive saturated throughput "
                             f"from its warm-up, not {saturated!r}")
        return saturated * plan.first_share
    out = assess(points, saturated, plan, spent)
    if out.verdict is not Verdict.RUNNING:
        return None
    lo, hi = out.lo, out.hi
    if lo is not None and hi is not None:
        if hi / lo - 1 <= plan.tolerance:
            return _repeat(points, lo, hi)
        lo_k, hi_k = lo * (hi / lo) ** 0.25, lo * (hi / lo) ** 0.75
        return min(hi_k, max(lo_k, out.capacity.point))
    if lo is not None:
        return _climb(points, lo, saturated, plan)
    return min(p.rate for p in points) / plan.step


def _climb(points: Sequence[Point], lo: float, saturated: float | None,
           plan: LadderPlan) -> float:
    """The next rate while every level held: where the line through the two highest
    levels' margins reaches the limit (``step`` x the highest without two levels, or a
    line that does not rise), kept between ``1 + 2 tolerance`` and ``step`` times the
    highest, and at most ``1 - tolerance`` of the saturated rate until a level there
    held; past that, ``ceiling_step`` above it."""
    ceiling = None if saturated is None else saturated * (1 - plan.tolerance)
    if ceiling is not None and lo >= ceiling:
        return lo * plan.ceiling_step
    ps = pooled(points)
    guess = lo * plan.step
    if len(ps) >= 2 and ps[-1].value > ps[-2].value:
        (r0, g0), (r1, g1) = (ps[-2].rate, ps[-2].value), (ps[-1].rate, ps[-1].value)
        guess = r1 + (1.0 - g1) * (r1 - r0) / (g1 - g0)
    up = min(lo * plan.step, max(lo * (1 + 2 * plan.tolerance), guess))
    return up if ceiling is None or up < ceiling else max(ceiling, lo * (1 + plan.tolerance))


def _repeat(points: Sequence[Point], lo: float, hi: float) -> float:
    """The end of a narrow bracket to measure again: the one whose pooled interval
    straddles the limit more (the wider share of it on the other side of 1)."""
    by_rate = {p.rate: p for p in pooled(points)}

    def doubt(rate: float) -> float:
        p = by_rate[rate]
        return (1.0 - p.lower) if p.value > 1.0 else (min(p.upper, 2.0) - 1.0)

    return max((lo, hi), key=doubt)


def level_requests(rate: float, level_s: float) -> int:
    """How many requests a level at ``rate`` requests/s for ``level_s`` seconds sends: a
    fixed count (at least one), as ``vllm bench serve --num-prompts``."""
    return max(1, round(rate * level_s))
