"""The load ladder's choice of rates (tuner.loadgen.ladder), against toy servers whose SLOs
hold exactly up to a known rate."""

from __future__ import annotations

import math

import pytest

from tuner.errors import UsageError
from tuner.loadgen.ladder import LadderPlan, Verdict, assess, holds, kept_up, next_rate

pytestmark = pytest.mark.unit
SATURATED = 40.0


def climb(threshold: float, saturated: float | None = SATURATED,
          plan: LadderPlan = LadderPlan()) -> tuple[dict[float, bool], object]:
    """Run the ladder against a server whose SLOs hold at rates <= ``threshold``."""
    levels: dict[float, bool] = {}
    while (rate := next_rate(levels, saturated, plan)) is not None:
        assert rate not in levels, "the ladder measured a rate twice"
        levels[rate] = rate <= threshold
        assert len(levels) <= plan.max_levels
    return levels, assess(levels, saturated, plan)


@pytest.mark.parametrize("share", [0.26, 0.3, 0.37, 0.5, 0.51, 0.62, 0.75, 0.9, 0.97])
def test_lands_within_tolerance_in_the_budget(share):
    threshold = share * SATURATED
    levels, out = climb(threshold)
    if share < 0.95:
        assert out.verdict is Verdict.BRACKETED
        assert out.lo <= threshold < out.hi
        assert out.hi / out.lo - 1 <= 0.05
    else:  # within the tolerance of the saturated throughput, never measured itself
        assert out.verdict is Verdict.SATURATED and out.lo >= 0.95 * SATURATED
    assert out.capacity == out.lo and threshold / out.capacity - 1 <= 0.05
    assert len(levels) <= 6 and max(levels) < SATURATED


def test_a_tighter_tolerance_needs_a_larger_budget():
    plan = LadderPlan(tolerance=0.01, max_levels=9)
    levels, out = climb(0.61 * SATURATED, plan=plan)
    assert out.verdict is Verdict.BRACKETED and out.hi / out.lo - 1 <= 0.01
    short, cut = climb(0.61 * SATURATED, plan=LadderPlan(tolerance=0.01))
    assert cut.verdict is Verdict.BUDGET and len(short) == 6
    assert cut.lo <= 0.61 * SATURATED < cut.hi  # still a true bracket, only wider


def test_every_level_holding_stops_within_the_tolerance_below_the_saturated_rate():
    levels, out = climb(math.inf)
    assert out.verdict is Verdict.SATURATED
    assert out.capacity == max(levels)  # never above the highest measured level
    assert 0.95 * SATURATED <= out.capacity < SATURATED  # a queue at utilisation 1: unmeasured
    assert out.hi is None and len(levels) == 5


def test_even_the_lowest_rate_failing_gives_capacity_zero():
    levels, out = climb(0.0)
    assert out.verdict is Verdict.NONE_HELD
    assert out.capacity == 0.0 and out.lo is None
    assert len(levels) == 6 and not any(levels.values())
    assert min(levels) == pytest.approx(SATURATED / 2 / 2 ** 5)


def test_a_capacity_far_below_saturation_runs_out_of_budget_with_a_true_bracket():
    threshold = 0.1 * SATURATED
    levels, out = climb(threshold)
    assert out.verdict is Verdict.BUDGET and len(levels) == 6
    assert out.lo <= threshold < out.hi


def test_a_start_rate_replaces_the_saturated_seed():
    plan = LadderPlan(start_rate=7.0)
    assert next_rate({}, None, plan) == 7.0
    levels, out = climb(9.3, saturated=None, plan=plan)
    assert min(levels) == 7.0 and out.verdict is Verdict.BRACKETED
    assert out.lo <= 9.3 < out.hi


def test_a_start_rate_above_saturation_that_holds_is_the_capacity():
    levels, out = climb(math.inf, plan=LadderPlan(start_rate=2 * SATURATED))
    assert out.verdict is Verdict.SATURATED and list(levels) == [2 * SATURATED]


def test_a_noisy_failure_below_a_held_level_does_not_end_the_bracket():
    out = assess({20.0: True, 10.0: False, 40.0: False}, SATURATED)
    assert (out.lo, out.hi, out.capacity) == (20.0, 40.0, 20.0)
    assert next_rate({20.0: True, 10.0: False, 40.0: False}, SATURATED) == pytest.approx(
        math.sqrt(800.0))


def test_no_seed_is_refused():
    with pytest.raises(ValueError, match="start_rate or a positive saturated"):
        next_rate({}, 0.0)
    with pytest.raises(ValueError, match="start_rate or a positive saturated"):
        next_rate({}, None)


@pytest.mark.parametrize("kwargs", [{"tolerance": 0}, {"tolerance": 1.5}, {"max_levels": 0},
                                    {"start_rate": -1.0}, {"start_rate": math.inf},
                                    {"first_share": 0}, {"step": 1.0}])
def test_bad_plans_are_usage_errors(kwargs):
    with pytest.raises(UsageError):
        LadderPlan(**kwargs)


@pytest.mark.parametrize(("trend", "kept"), [(None, True), (-0.03, True), (0.0, True),
                                              (0.05, True), (0.051, False), (1.0, False)])
def test_a_server_keeps_up_while_the_time_in_system_grows_within_the_tolerance(trend, kept):
    assert kept_up(trend, 0.05) is kept


GOOD = {"valid": True, "slo_met": 1.0, "completed": 100, "failed": 0, "latency_trend": 0.01,
        "tolerance": 0.05}


def test_a_level_holds_when_valid_within_every_slo_and_kept_up():
    assert holds(**GOOD)


@pytest.mark.parametrize("why", [{"valid": False}, {"slo_met": 0.0}, {"slo_met": None},
                                 {"completed": 0}, {"failed": 1}, {"latency_trend": 0.2}])
def test_a_level_does_not_hold_when_any_condition_fails(why):
    assert not holds(**{**GOOD, **why})
