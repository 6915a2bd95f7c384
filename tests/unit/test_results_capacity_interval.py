"""Answers from curves that kept their SLO and their levels' intervals (tuner.results.
capacity over tuner.trials.curve and tuner.slo.fit): an answer at the study's own SLO is
the trial's stored capacity, it names its interval, a rate inside that interval is at
the limit, and no answer at any limits says more than the trial's own curve supports."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tuner.results import capacity
from tuner.results.answer import interval_text
from tuner.slo import Slo
from tuner.trials import record
from tuner.trials.curve import Curve, Level, objective_figures
from tuner.trials.record import TrialRecord

pytestmark = pytest.mark.unit

OWN_MS = {"p99_itl_ms": 50.0, "p99_ttft_ms": 1000.0}
TOLERANCE = 0.05
OWN = capacity.slo_at(OWN_MS, TOLERANCE)


def ilv(rate, itl, ttft, half=0.05, **kw):
    """A level whose p99s came with intervals of +- ``half`` of them (None: none)."""
    est = None if half is None else {
        f: {"value": v, "lower": v * (1 - half), "upper": v * (1 + half)}
        for f, v in (("p99_itl_ms", itl), ("p99_ttft_ms", ttft))}
    return Level(offered_rps=rate, p99_itl_ms=itl, p99_ttft_ms=ttft,
                 output_throughput=rate * 100, estimates=est, requests=100,
                 failed=kw.pop("failed", 0), **kw)


def judged(*levels, slo=OWN_MS):
    """The curve a ladder stores: each level's held and margins from the verdict at its
    SLO, the SLO kept; as read back from storage."""
    own = Slo.of(slo, TOLERANCE)
    levels = [dataclasses.replace(lv, held=lv.verdict(own).held and not lv.stopped_early
                                  and not lv.failed, margins=lv.verdict(own).to_json())
              for lv in levels]
    curve = Curve(levels=tuple(levels), saturated_rps=None, tolerance=TOLERANCE, slo=dict(slo))
    return Curve.of(curve.to_json())


def stored(number, curve):
    """A measured trial with the figures the runner tells from its curve."""
    return TrialRecord(number=number, outcome=record.MEASURED, state=record.COMPLETE,
                       curve=curve, metrics=objective_figures(curve, None))


# ITL margin r / 10.5 (+- 5 %): the capacity at 50 ms is 10.5 req/s.
LINEAR = stored(1, judged(*(ilv(r, 50 * r / 10.5, 300) for r in (8, 9, 10, 11, 12))))
# Half of its latencies: twice the capacity on rates up to 12, censored there.
ROOMY = stored(2, judged(*(ilv(r, 25 * r / 10.5, 150) for r in (4, 8, 12))))
# A lower capacity, 6 req/s.
SMALL = stored(3, judged(*(ilv(r, 50 * r / 6, 300) for r in (4, 5, 6, 7, 8))))


def test_an_answer_at_the_studys_own_slo_is_the_trials_stored_capacity():
    answer = capacity.most_capacity([LINEAR, SMALL], OWN)
    m = LINEAR.metrics
    assert answer.trial.number == 1
    assert answer.rate == m["capacity_rps"] == LINEAR.curve.capacity_rps
    assert answer.rate == pytest.approx(10.5)
    assert (answer.estimate.lower, answer.estimate.upper) == (m["capacity_rps_lower"],
                                                              m["capacity_rps_upper"])
    assert answer.estimate.lower < answer.rate < answer.estimate.upper
    assert m["capacity_censored"] == 0.0 and not answer.estimate.censored
    assert answer.levels == (10, 11) and answer.p99_itl_ms == pytest.approx(50.0)
    assert interval_text(answer) == (f"(capacity 95 % interval {answer.estimate.lower:.3g}-"
                                     f"{answer.estimate.upper:.3g} req/s)")
    # its rate is the fit's point: inside its own interval, so at the limit
    assert answer.at_the_limit


def test_a_censored_capacity_is_the_highest_level_and_says_at_least():
    answer = capacity.most_capacity([LINEAR, ROOMY, SMALL], OWN)
    assert answer.trial.number == 2 and answer.rate == 12 == ROOMY.metrics["capacity_rps"]
    assert answer.estimate.censored and ROOMY.metrics["capacity_censored"] == 1.0
    assert "censored: at least 12" in interval_text(answer)


def test_a_rate_inside_the_interval_is_at_the_limit():
    est = LINEAR.curve.estimate()
    assert est.lower < 10.4 < est.point < 10.6 < est.upper and 10.0 < est.lower
    inside = capacity.lowest_latency_at([LINEAR], 10.4, OWN)
    assert inside.at_the_limit and inside.estimate.straddles(10.4)
    assert interval_text(inside).endswith("; at the limit)")
    assert inside.p99_itl_ms == pytest.approx(50 * 10.4 / 10.5)
    below = capacity.lowest_latency_at([LINEAR], 10.0, OWN)  # held with confidence
    assert not below.at_the_limit and "at the limit" not in interval_text(below)
    # above the point: the fit does not carry it, whatever the interval's upper end
    assert capacity.lowest_latency_at([LINEAR], 10.6, OWN) is None


def test_an_answer_at_looser_limits_judges_the_levels_again():
    """The stored held flags are the study's; an answer at 100 ms reads twice the room."""
    answer = capacity.most_capacity([LINEAR], capacity.slo_at({"p99_itl_ms": 100.0}, TOLERANCE))
    assert answer.rate == 12 and answer.estimate.censored
    assert not LINEAR.curve.levels[-1].held  # at the study's 50 ms, 12 req/s missed


# Property: random curves (latencies rising with the rate, some with a higher level that
# measured nothing usable: its requests failed, its client lagged, or it stopped once it
# certainly missed the study's SLO, its figures those of a shortened run), random limits.

BAD = {"failed": ("failed", 2, 1.0, 10.0),
       "invalid_reason": ("invalid_reason", "client lagged", 1.0, 10.0),
       # a shortened run's figures bound the whole run's from below: over the own SLO
       "stopped_early": ("stopped_early", True, 1.2 * OWN_MS["p99_itl_ms"],
                         1.2 * OWN_MS["p99_ttft_ms"])}


@st.composite
def curves(draw, bad=tuple(BAD)):
    n = draw(st.integers(2, 7))
    rate = draw(st.floats(0.5, 5.0))
    itl, ttft = draw(st.floats(5.0, 100.0)), draw(st.floats(50.0, 1000.0))
    half = draw(st.none() | st.floats(0.01, 0.3))
    levels = []
    for _ in range(n):
        levels.append(ilv(rate, itl, ttft, half))
        rate *= draw(st.floats(1.1, 2.0))
        itl *= draw(st.floats(1.0, 2.5))
        ttft *= draw(st.floats(1.0, 3.0))
    kind = draw(st.sampled_from((None, *bad)))
    if kind is not None:  # a higher level that must not count
        key, value, bad_itl, bad_ttft = BAD[kind]
        levels.append(ilv(rate, bad_itl, bad_ttft, half, **{key: value}))
    return judged(*levels)


def usable_top(curve):
    return max(lv.offered_rps for lv in curve.levels
               if not lv.failed and not lv.stopped_early and lv.invalid_reason is None)


slo_limits = st.tuples(st.floats(1.0, 2000.0), st.floats(10.0, 50000.0))


@settings(max_examples=300, deadline=None)
@given(st.lists(curves(), min_size=1, max_size=4), slo_limits,
       st.floats(0.1, 1.0), st.floats(0.1, 1.0))
def test_no_answer_says_more_than_the_trials_own_curve(cs, lim, tighter_itl, tighter_ttft):
    """At any limits: the answer is the chosen trial's capacity there, at most its highest
    usable level, and at least any other trial's that answers; tighter limits never give
    a trial more capacity. Where the margins were exact and no level stopped early, the
    answer's figures read within the limits (a stopped level: below)."""
    records = [stored(i, c) for i, c in enumerate(cs)]
    slo = capacity.slo_at({"p99_itl_ms": lim[0], "p99_ttft_ms": lim[1]}, TOLERANCE)
    answer = capacity.most_capacity(records, slo)
    if answer is not None:
        curve = answer.trial.curve
        assert 0 < answer.rate <= usable_top(curve)
        assert answer.rate == answer.estimate.point == curve.estimate(slo).point
        for r in records:
            other = capacity.capacity_of(r.curve, slo)
            if capacity.at_rate(r.curve, other.point) is not None:
                assert answer.rate >= other.point
        if answer.estimate.lower is None and not any(lv.stopped_early for lv in curve.levels):
            assert answer.p99_itl_ms <= lim[0] * (1 + 1e-9)
            assert answer.p99_ttft_ms <= lim[1] * (1 + 1e-9)
    tight = capacity.slo_at({"p99_itl_ms": lim[0] * tighter_itl,
                             "p99_ttft_ms": lim[1] * tighter_ttft}, TOLERANCE)
    for r in records:
        assert (capacity.capacity_of(r.curve, tight).point
                <= capacity.capacity_of(r.curve, slo).point), r.curve


@settings(max_examples=200, deadline=None)
@given(st.lists(curves(bad=("invalid_reason",)), min_size=1, max_size=4))
def test_an_answer_at_the_own_slo_is_the_highest_stored_capacity(cs):
    """(Levels that failed or stopped early above the crossing: below.)"""
    records = [stored(i, c) for i, c in enumerate(cs)]
    answer = capacity.most_capacity(records, OWN)
    told = [r.metrics["capacity_rps"] for r in records]
    if answer is None:
        assert all(c == 0 for c in told), told
    else:
        assert answer.rate == answer.trial.metrics["capacity_rps"] == max(told)


@pytest.mark.parametrize("above", [{"stopped_early": True}, {"failed": 3}])
def test_a_crossing_below_a_level_that_stopped_early_or_failed_answers(above):
    """A level that failed requests or stopped early misses by an unknown amount: the
    capacity is the last whole level below it (never a rate inside a level that was not
    measured whole), and the answer rests on that level's own figures."""
    t = stored(7, judged(ilv(2, 10, 100), ilv(4, 40, 200), ilv(8, 75, 500, **above)))
    assert t.metrics["capacity_rps"] == 4
    answer = capacity.most_capacity([t], OWN)
    assert answer is not None and answer.rate == t.metrics["capacity_rps"]
    assert answer.levels == (4,) and answer.p99_itl_ms == 40


def test_a_level_that_stopped_early_never_counts_as_held():
    """At 100 ms (looser than the study's 50), the stopped level's shortened run reads
    within: the capacity must still lie below it, where the trial answers."""
    t = stored(8, judged(ilv(2, 10, 100), ilv(4, 20, 200), ilv(8, 60, 1200, stopped_early=True)))
    loose = capacity.slo_at({"p99_itl_ms": 100.0, "p99_ttft_ms": 5000.0}, TOLERANCE)
    est = t.curve.estimate(loose)
    assert est.point < 8 and not est.censored
