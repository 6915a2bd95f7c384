"""The load ladder's choice of rates (tuner.loadgen.ladder), against simulated servers whose
margin at each rate, and its interval, are known."""

from __future__ import annotations

import math

import pytest

from tuner.errors import UsageError
from tuner.loadgen.ladder import LadderPlan, Verdict, assess, next_rate
from tuner.slo import Point

pytestmark = pytest.mark.unit
SATURATED = 40.0


def server(c: float, k: float = 1.0, half: float = 0.05):
    """A server whose level at rate r reads margin (r / c) ** k +- ``half``: its capacity
    is c."""
    def at(r: float) -> Point:
        v = (r / c) ** k
        return Point(r, v, v - half, v + half)
    return at


def climb(at, saturated: float | None = SATURATED, plan: LadderPlan = LadderPlan()):
    """Drive the ladder against ``at`` until it is done: its points and outcome."""
    points: list[Point] = []
    while (rate := next_rate(points, saturated, plan)) is not None:
        points.append(at(rate))
        assert len(points) <= plan.max_levels, "the ladder ran past its budget"
    return points, assess(points, saturated, plan)


@pytest.mark.parametrize("half", [0.03, 0.05])
@pytest.mark.parametrize("share", [0.2, 0.26, 0.37, 0.5, 0.55, 0.62, 0.75, 0.85, 0.93,
                                   0.97, 1.0, 1.1])
def test_lands_with_the_true_capacity_inside_a_narrow_interval_within_the_budget(share, half):
    """Shares above 1: the warm-up's saturated throughput read low."""
    c = share * SATURATED
    plan = LadderPlan()
    points, out = climb(server(c, half=half), plan=plan)
    cap = out.capacity
    assert out.verdict is Verdict.BRACKETED
    assert cap.lower <= c <= cap.upper and cap.width <= plan.width
    assert not cap.censored
    assert len(points) <= plan.max_levels


def test_a_capacity_above_what_the_budget_reaches_is_found_with_a_larger_budget():
    c = 2.2 * SATURATED
    _, short = climb(server(c))
    assert short.verdict is Verdict.BUDGET and short.capacity.censored
    assert short.capacity.point < c  # at least the highest level, never above it
    plan = LadderPlan(max_levels=10)
    _, out = climb(server(c), plan=plan)
    assert out.verdict is Verdict.BRACKETED
    assert out.capacity.lower <= c <= out.capacity.upper


@pytest.mark.parametrize("share", [0.3, 0.37])
def test_lands_with_the_true_capacity_inside_the_interval_for_a_curved_margin(share):
    """A bracket wider than twice the plan's width never ends the ladder: interpolating a
    curved margin across it would read the crossing off by more than the interval."""
    c = share * SATURATED
    _, out = climb(server(c, k=2.0, half=0.05))
    assert out.capacity.lower <= c <= out.capacity.upper


def test_a_wide_bracket_is_not_a_narrow_capacity():
    """[10, 40] with tight ends fits any monotone margin between them: not a capacity
    known within 1 %."""
    points = [Point(10.0, 0.99, 0.985, 0.995), Point(40.0, 5.0, 4.9, 5.1)]
    assert next_rate(points, SATURATED) is not None


def test_every_level_held_steps_past_the_saturated_rate_and_ends_censored():
    plan = LadderPlan(max_levels=8)
    points, out = climb(lambda r: Point(r, 0.5, 0.45, 0.55), plan=plan)
    rates = [p.rate for p in points]
    # flat margins: a step, capped at 1 - tolerance of the saturated rate, never it itself
    assert rates[:2] == pytest.approx([0.5 * SATURATED, 0.95 * SATURATED])
    assert SATURATED not in rates
    # a level there held: each next level is ceiling_step above the highest held
    assert rates[2:] == pytest.approx([rates[1] * 1.2 ** i for i in range(1, 7)])
    assert max(rates) > SATURATED
    assert out.verdict is Verdict.BUDGET and len(points) == 8 and out.hi is None
    assert out.capacity.censored and out.capacity.point == max(rates)


def test_a_start_rate_above_saturation_that_holds_steps_up_by_the_ceiling_step():
    plan = LadderPlan(start_rate=2 * SATURATED, ceiling_step=1.5, max_levels=2)
    points, out = climb(lambda r: Point(r, 0.5, 0.45, 0.55), plan=plan)
    assert [p.rate for p in points] == [2 * SATURATED, 3 * SATURATED]
    assert out.capacity.censored and out.capacity.point == 3 * SATURATED


def test_every_level_missed_halves_down_to_capacity_zero():
    points, out = climb(lambda r: Point(r, 2.0, 1.9, 2.1))
    assert out.verdict is Verdict.NONE_HELD and out.lo is None
    assert out.capacity.point == 0.0 and len(points) == 6
    assert min(p.rate for p in points) == pytest.approx(SATURATED / 2 / 2 ** 5)


def test_a_start_rate_is_the_first_level_and_replaces_the_saturated_seed():
    plan = LadderPlan(start_rate=7.0)
    assert next_rate([], None, plan) == 7.0
    assert next_rate([], SATURATED, plan) == 7.0
    points, out = climb(server(9.3), saturated=None, plan=plan)
    assert points[0].rate == 7.0 and out.verdict is Verdict.BRACKETED
    assert out.capacity.lower <= 9.3 <= out.capacity.upper


def test_without_a_saturated_rate_a_held_level_doubles():
    assert next_rate([Point(7.0, 0.5, 0.45, 0.55)], None, LadderPlan(start_rate=7.0)) == 14.0


def test_no_seed_is_refused():
    with pytest.raises(ValueError, match="start_rate or a positive saturated"):
        next_rate([], 0.0)
    with pytest.raises(ValueError, match="start_rate or a positive saturated"):
        next_rate([], None)


@pytest.mark.parametrize("kwargs", [{"tolerance": 0}, {"tolerance": 1.5}, {"max_levels": 0},
                                    {"start_rate": -1.0}, {"start_rate": math.inf},
                                    {"first_share": 0}, {"step": 1.0}, {"width": 0.0},
                                    {"width": 2.0}, {"width": -0.1}, {"ceiling_step": 1.0},
                                    {"ceiling_step": 0.5}])
def test_bad_plans_are_usage_errors(kwargs):
    name = next(iter(kwargs))
    with pytest.raises(UsageError, match=name):
        LadderPlan(**kwargs)


def test_a_narrow_bracket_with_a_straddling_level_measures_that_level_again():
    """10 held but its interval reaches past 1; 10.3 missed surely; hi / lo - 1 = 3 % is
    within the tolerance: a level between them would tell less than a repeat."""
    points = [Point(10.0, 0.98, 0.93, 1.03), Point(10.3, 1.2, 1.15, 1.25)]
    out = assess(points, SATURATED)
    assert (out.lo, out.hi, out.verdict) == (10.0, 10.3, Verdict.RUNNING)
    assert next_rate(points, SATURATED) == 10.0
    # 10.3 missed but may hold: the interval runs on to where 20's lower end takes over
    straddling_miss = [Point(10.0, 0.5, 0.45, 0.55), Point(10.3, 1.02, 0.9, 1.14),
                       Point(20.0, 2.0, 1.9, 2.1)]
    assert assess(straddling_miss, SATURATED).verdict is Verdict.RUNNING
    assert next_rate(straddling_miss, SATURATED) == 10.3


def test_in_a_wide_bracket_the_next_level_stays_in_its_middle_half():
    """The fit crosses just above 10 (or just below 40): the next level still cuts the
    bracket's log-width, at 10 x 4 ** 0.25 (or 10 x 4 ** 0.75)."""
    near_lo = [Point(10.0, 0.99, 0.5, 1.5), Point(40.0, 5.0, 4.0, 6.0)]
    assert next_rate(near_lo, 80.0) == pytest.approx(10.0 * 4 ** 0.25)
    near_hi = [Point(10.0, 0.2, 0.1, 1.5), Point(40.0, 1.01, 0.5, 1.6)]
    assert next_rate(near_hi, 80.0) == pytest.approx(10.0 * 4 ** 0.75)
    middle = [Point(10.0, 0.5, 0.1, 1.5), Point(40.0, 2.0, 0.5, 3.5)]
    assert next_rate(middle, 80.0) == pytest.approx(20.0)  # where the fit crosses 1


def test_a_noisy_miss_below_a_held_level_does_not_end_the_bracket():
    points = [Point(20.0, 0.8, 0.75, 0.85), Point(10.0, 1.2, 1.15, 1.25),
              Point(40.0, 2.0, 1.9, 2.1)]
    out = assess(points, SATURATED)
    assert (out.lo, out.hi) == (20.0, 40.0)
    assert 20.0 * 2 ** 0.25 <= next_rate(points, SATURATED) <= 20.0 * 2 ** 0.75


def test_the_ladder_is_done_once_bracketed_within_the_width():
    points = [Point(30.0, 0.857, 0.827, 0.887), Point(40.0, 1.143, 1.113, 1.173),
              Point(35.0, 1.0, 0.97, 1.03)]
    out = assess(points, SATURATED)
    assert out.verdict is Verdict.BRACKETED and out.capacity.width <= LadderPlan().width
    assert next_rate(points, SATURATED) is None
    loose = LadderPlan(width=0.01)
    assert assess(points, SATURATED, loose).verdict is Verdict.RUNNING
    assert next_rate(points, SATURATED, loose) is not None
