"""The capacity an SLO leaves a server, with its interval, from the margins of a ladder's
levels (tuner.slo.fit), on synthetic servers whose capacity is known."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tuner.slo import Capacity, Point, Slo, capacity
from tuner.slo.fit import crossing, pooled

pytestmark = pytest.mark.unit


def server(c: float, k: float = 1.0, half: float | None = 0.05):
    """A level at rate r reads margin (r / c) ** k, +- ``half`` (None: exact)."""
    def at(r: float) -> Point:
        v = (r / c) ** k
        if half is None:
            return Point(r, v, v, v, exact=True)
        return Point(r, v, v - half, v + half)
    return at


def test_linear_margins_give_their_crossing_and_the_crossings_of_their_ends():
    """Margins r / c +- h cross 1 at c; their upper ends at c (1 - h), lower at c (1 + h)."""
    at = server(35.0, half=0.05)
    cap = capacity([at(r) for r in (10.0, 20.0, 30.0, 40.0, 50.0)])
    assert cap.point == pytest.approx(35.0)
    assert (cap.lower, cap.upper) == (pytest.approx(33.25), pytest.approx(36.75))
    assert not cap.censored and cap.rates == (10.0, 20.0, 30.0, 40.0, 50.0)
    assert cap.width == pytest.approx(0.1)
    assert cap.straddles(35.0) and not cap.straddles(37.0)


@pytest.mark.parametrize("k", [1.5, 2.0, 4.0])
@pytest.mark.parametrize("c", [13.0, 27.5, 36.0])
def test_curved_margins_are_recovered_within_the_levels_around_the_crossing(c, k):
    rates = [5.0 * i for i in range(1, 10)]
    cap = capacity([server(c, k, half=None)(r) for r in rates])
    below, above = max(r for r in rates if r <= c), min(r for r in rates if r > c)
    assert below <= cap.point <= above
    assert abs(cap.point - c) <= 0.1 * c  # linear interpolation of a convex curve


def test_exact_points_have_no_interval():
    cap = capacity([server(35.0, half=None)(r) for r in (20.0, 30.0, 40.0)])
    assert cap.point == pytest.approx(35.0)
    assert cap.lower is None and cap.upper is None and cap.width is None
    assert not cap.straddles(35.0)


def test_every_level_held_is_censored_at_the_highest_level():
    at = server(100.0, half=0.05)
    cap = capacity([at(r) for r in (10.0, 20.0, 40.0)])
    assert cap.censored and cap.point == 40.0 and cap.upper == 40.0
    assert cap.lower <= cap.point
    exact = capacity([server(100.0, half=None)(r) for r in (10.0, 40.0)])
    assert exact.censored and exact.point == 40.0


def test_a_crossing_of_the_intervals_past_the_highest_level_is_read_at_it():
    """The lower ends never reach 1 below the top: nothing says where they would."""
    at = server(40.0, half=0.2)
    cap = capacity([at(r) for r in (20.0, 30.0, 42.0)])
    assert not cap.censored and cap.point == pytest.approx(40.0)
    assert cap.upper == 42.0


def test_the_lowest_level_missing_gives_capacity_zero():
    at = server(5.0, half=0.05)
    cap = capacity([at(r) for r in (10.0, 20.0)])
    assert cap.point == 0.0 and cap.lower == 0.0 and not cap.censored


def test_a_missed_level_below_a_held_one_is_fitted_monotone():
    """Margins 0.5, 1.2, 0.9, 1.5 at 1, 2, 3, 4: the fit pools 1.2 and 0.9 to 1.05 and
    crosses 1 between 1 (0.5) and 2 (1.05), at 1 + 0.5 / 0.55."""
    pts = [Point(r, v, v, v, exact=True) for r, v in ((1.0, 0.5), (2.0, 1.2), (3.0, 0.9),
                                                      (4.0, 1.5))]
    cap = capacity(pts)
    assert cap.point == pytest.approx(1.0 + 0.5 / 0.55)
    assert capacity(list(reversed(pts))).point == cap.point  # order of measuring is no matter


@pytest.mark.parametrize("rates", [(30.0, 40.0), (25.0, 30.0, 35.0, 40.0, 45.0)])
def test_repeats_at_each_rate_narrow_the_interval_by_the_root_of_their_number(rates):
    at = server(35.0, half=0.1)
    once = capacity([at(r) for r in rates])
    four = capacity([at(r) for r in rates for _ in range(4)])
    assert four.point == pytest.approx(once.point)
    assert four.upper - four.lower == pytest.approx((once.upper - once.lower) / 2, rel=0.05)
    assert four.rates == once.rates


def test_repeats_are_pooled_the_mean_of_their_margins_and_shrunk_half_widths():
    ps = pooled([Point(2.0, 1.0, 0.8, 1.2), Point(1.0, 0.5, 0.4, 0.6),
                 Point(2.0, 0.8, 0.6, 1.0)])
    assert [p.rate for p in ps] == [1.0, 2.0]
    assert ps[1].value == pytest.approx(0.9)
    assert ps[1].value - ps[1].lower == pytest.approx(0.2 / math.sqrt(2))
    assert ps[1].upper - ps[1].value == pytest.approx(0.2 / math.sqrt(2))


def test_an_unbounded_margin_still_fits():
    """A level whose figure was missing (margin inf) or stopped early (no upper end)."""
    pts = [Point(10.0, 0.5, 0.45, 0.55), Point(20.0, 0.9, 0.85, 0.95),
           Point(30.0, math.inf, math.inf, math.inf), Point(25.0, 1.5, 1.2, math.inf)]
    cap = capacity(pts)
    assert 20.0 <= cap.point <= 25.0 and cap.lower <= cap.point <= cap.upper
    assert all(math.isfinite(x) for x in (cap.point, cap.lower, cap.upper))


def test_no_point_no_capacity():
    assert capacity([]) is None


def test_crossing_interpolates_between_the_levels_around_it():
    rates = np.array([1.0, 2.0, 4.0])
    assert crossing(rates, np.array([0.5, 0.9, 1.3])) == pytest.approx(2.5)
    assert crossing(rates, np.array([1.1, 1.2, 1.3])) == 0.0
    assert crossing(rates, np.array([0.5, 1.0, 1.0])) is None  # on the limit is within it


SLO = Slo.of({"p99_ttft_ms": 500.0, "p99_itl_ms": 50.0}, backlog_tolerance=0.05)


def test_a_point_is_a_levels_worst_margin_with_its_interval():
    v = SLO.verdict({"p99_ttft_ms": 400.0, "p99_itl_ms": 45.0},
                    {"p99_ttft_ms": (300.0, 480.0), "p99_itl_ms": (40.0, 55.0)})
    p = Point.of(3.0, v)
    assert (p.rate, p.value, p.lower, p.upper) == (3.0, 0.9, 0.8, 1.1) and not p.exact
    assert Point.of(3.0, SLO.verdict({"p99_ttft_ms": 400.0, "p99_itl_ms": 45.0})).exact


def test_a_level_stopped_on_a_miss_counts_at_least_1_with_no_upper_end():
    v = SLO.verdict({"p99_ttft_ms": 400.0, "p99_itl_ms": 45.0})  # its short run read within
    p = Point.of(3.0, v, stopped_early=True)
    assert p.value >= 1.0 and p.lower >= 1.0 and p.upper == math.inf


def test_a_verdict_that_judged_nothing_is_a_miss():
    p = Point.of(3.0, Slo(backlog_tolerance=None).verdict({}))
    assert p.value > 1.0
    assert capacity([p]).point == 0.0


margins = st.floats(min_value=0.01, max_value=5.0)
halves = st.floats(min_value=0.0, max_value=1.0)
levels = st.lists(st.tuples(st.floats(min_value=0.1, max_value=100.0), margins, halves,
                            halves), min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)
@given(levels)
def test_the_interval_holds_its_point_and_never_leaves_the_measured_range(spec):
    """Whatever the levels read (noisy, non-monotone, repeated rates)."""
    cap = capacity([Point(r, v, v - lo, v + hi) for r, v, lo, hi in spec])
    top = max(r for r, *_ in spec)
    assert isinstance(cap, Capacity)
    assert 0.0 <= cap.lower <= cap.point <= cap.upper <= top
    if all(v <= 1.0 for _, v, *_ in spec):
        assert cap.censored and cap.point == top
    at_top = [v for r, v, *_ in spec if r == top]
    if sum(at_top) / len(at_top) > 1.0:  # the fit ends at least at the top level's margin
        assert not cap.censored


def test_a_level_whose_requests_failed_bounds_the_capacity_but_not_to_a_point():
    """Failed requests miss by an unknown amount: the capacity is the level below, and
    its interval's upper end reaches towards the failed level, never collapses onto the
    level below (the fit knows only that the failed level missed)."""
    from tuner.trials.curve import Curve, Level
    slo = {"p99_itl_ms": 50.0, "p99_ttft_ms": 1000.0}
    good = dict(p99_itl_ms=20.0, p99_ttft_ms=200.0, requests=100, failed=0,
                estimates={"p99_itl_ms": {"lower": 18.0, "upper": 22.0},
                           "p99_ttft_ms": {"lower": 180.0, "upper": 220.0}})
    curve = Curve(levels=(Level(offered_rps=1.0, **good), Level(offered_rps=2.0, **good),
                          Level(offered_rps=4.0, p99_itl_ms=20.0, p99_ttft_ms=200.0,
                                requests=100, failed=7)), slo=slo)
    est = curve.estimate()
    assert est.point == 2.0 and est.lower <= 2.0
    assert 2.0 < est.upper <= 4.0


def test_a_repeat_that_missed_for_certain_makes_its_rate_a_miss_not_a_point():
    """A rate measured twice, once held (with a wide interval) and once stopped on a
    certain miss: the rate misses, the capacity lies at or above the level below, and
    its interval keeps a width (it collapsed to a point when the two were averaged)."""
    held = Point(1.0, 0.9, 0.85, 0.95)
    shaky = Point(2.0, 0.95, 0.93, 2.6)
    missed = Point(2.0, math.inf, 1.3, math.inf)
    est = capacity([held, shaky, missed])
    assert est.point == 1.0 and est.lower == 1.0
    assert 1.0 < est.upper < 2.0
