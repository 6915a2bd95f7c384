"""Answers from stored curves (tuner.results.capacity), on toy curves: the most capacity
within an SLO (the fitted crossing of the levels' margins, interpolated between the
measured levels around it), the lowest p99 ITL at a rate among the trials whose capacity
reaches it, and no answer past what was measured.

The curves A and B below are old ones (no stored SLO, no intervals): every margin is
exact, so each capacity is a crossing that can be worked out by hand."""

from __future__ import annotations

import pytest

from tuner.results import capacity
from tuner.results.answer import interval_text
from tuner.slo import Slo
from tuner.trials import record
from tuner.trials.curve import Curve, Level
from tuner.trials.record import TrialRecord

pytestmark = pytest.mark.unit


def lv(rate, itl, ttft, tput=None, **kw):
    return Level(offered_rps=rate, p99_itl_ms=itl, p99_ttft_ms=ttft,
                 output_throughput=tput if tput is not None else rate * 100, **kw)


# The SLO the curves were judged at when stored (a curve stored with none is an old one).
OWN = {"p99_itl_ms": 50.0, "p99_ttft_ms": 1000.0}


def trial(number, *levels, slo=OWN, **kw):
    return TrialRecord(number=number, outcome=record.MEASURED, state=record.COMPLETE,
                       curve=Curve(levels=levels, slo=slo), **kw)


def limits(itl, ttft):
    return capacity.slo_at({"p99_itl_ms": itl, "p99_ttft_ms": ttft}, None)


# A: low latency, little capacity; B: more capacity at higher latency.
A = trial(1, lv(2, 10, 100), lv(4, 20, 200), lv(6, 60, 400))
B = trial(2, lv(4, 25, 300), lv(8, 40, 500), lv(12, 80, 1400))


@pytest.mark.parametrize("itl,ttft,number,rate,levels,at", [
    # B's ITL margin 0.8 at 8 req/s, 1.6 at 12: it crosses 1 a quarter of the way, at 9,
    # where its ITL reads 40 + 40 / 4 = 50 ms, the limit (its TTFT 500 + 900 / 4)
    (50, 1000, 2, 9.0, (8, 12), (50.0, 725.0)),
    # A's 4 req/s reads 20 ms, on the limit, which holds; B's lowest level misses it
    (20, 1000, 1, 4.0, (4,), (20.0, 200.0)),
    # a TTFT limit: B's lowest level reads 300 ms; A's TTFT crosses 250 ms at 4.5
    (100, 250, 1, 4.5, (4, 6), (30.0, 250.0)),
    # every level of both held: at least B's highest level, and nothing past it
    (100, 5000, 2, 12.0, (12,), (80.0, 1400.0)),
])
def test_most_capacity_is_where_the_limits_are_crossed(itl, ttft, number, rate, levels, at):
    answer = capacity.most_capacity([A, B], limits(itl, ttft))
    assert (answer.trial.number, answer.rate, answer.levels) == (number, pytest.approx(rate),
                                                                 levels)
    assert (answer.p99_itl_ms, answer.p99_ttft_ms) == (pytest.approx(at[0]),
                                                       pytest.approx(at[1]))
    assert answer.p99_itl_ms <= itl * (1 + 1e-9) and answer.p99_ttft_ms <= ttft * (1 + 1e-9)
    assert answer.estimate.censored == (rate == 12.0)


def test_no_trial_holds_the_limits():
    assert capacity.most_capacity([A, B], limits(5, None)) is None  # A's 2 req/s: 10 ms
    # an SLO that limits nothing judges nothing: no level holds it
    assert capacity.most_capacity([A, B], Slo(backlog_tolerance=None)) is None


@pytest.mark.parametrize("rate,number,itl", [
    (3, 1, 15.0),          # A, between its levels 2 and 4; B measured nothing below 4
    (4, 1, 20.0),          # at a measured level: A 20 ms, B 25 ms
    (5, 2, 28.75),         # B 25..40 ms beats A 20..60 ms
    (6, 2, 32.5),          # A measured 6 req/s, but its capacity at 50 ms is 5.5
])
def test_lowest_p99_itl_at_a_rate_interpolates_between_measured_levels(rate, number, itl):
    answer = capacity.lowest_latency_at([A, B], rate, limits(50, 1000))
    assert answer.trial.number == number and answer.p99_itl_ms == pytest.approx(itl)
    assert answer.rate == rate and answer.estimate.point >= rate


def test_only_trials_whose_capacity_reaches_the_rate_answer_there():
    """B measured 10 req/s between its levels 8 and 12, but its capacity at 50 ms is 9:
    there is no answer at 10 within those limits, and one (60 ms) within looser ones."""
    assert capacity.lowest_latency_at([A, B], 10, limits(50, 1000)) is None
    loose = capacity.lowest_latency_at([A, B], 10, limits(100, 5000))
    assert loose.trial.number == 2 and loose.p99_itl_ms == pytest.approx(60.0)


def test_no_answer_past_the_highest_measured_level():
    loose = limits(1000, 100000)
    assert capacity.lowest_latency_at([A, B], 12.5, loose) is None
    assert capacity.highest_measured([A, B]) == 12
    assert capacity.lowest_latency_at([A, B], 1.0, loose) is None  # below all: nothing measured
    assert capacity.most_capacity([A, B], loose).rate == 12


def test_limits_apply_at_the_rate():
    """A TTFT limit of 200 ms: A's TTFT reaches it at 4 req/s, B's lowest level reads 300."""
    assert capacity.lowest_latency_at([A, B], 5, limits(50, 200)) is None
    answer = capacity.lowest_latency_at([A, B], 4, limits(50, 200))
    assert answer.trial.number == 1 and answer.p99_ttft_ms == 200


def test_failed_levels_and_trials_that_fail_accuracy_do_not_answer():
    loose = limits(100, 5000)
    broken = trial(3, lv(20, 5, 50, failed=3), lv(2, 5, 50),
                   lv(16, 5, 50, stopped_early=True))  # a shortened run's p99s
    lossy = trial(4, lv(30, 5, 50), constraints={record.ACCURACY: 0.2})
    answer = capacity.most_capacity([A, B, broken, lossy], loose)
    assert (answer.trial.number, answer.rate) == (2, 12)
    assert capacity.most_capacity([lossy], loose) is None
    assert capacity.lowest_latency_at([A, B, broken, lossy], 18, loose) is None
    assert capacity.highest_measured([A, B, broken, lossy]) == 12


def test_answers_read_the_p99s_each_level_was_judged_on():
    """A level is judged on its steady requests' p99s (the ramp and the drain left out); an
    answer reads those (decision 0036: a GPU level held on its steady p99 ITL while its
    whole run's read above the SLO)."""
    c = trial(3, lv(8, 22, 110, steady_p99_itl_ms=23, held=True),
              lv(16, 58, 680, steady_p99_itl_ms=41, steady_p99_ttft_ms=690, held=True),
              lv(20, 48, 380, held=True))
    answer = capacity.most_capacity([c], limits(50, 1000))
    assert (answer.rate, answer.p99_itl_ms, answer.p99_ttft_ms) == (20, 48, 380)
    # at 45 ms the 16 req/s level holds on its steady 41 ms (its whole run read 58), and
    # 20 req/s misses: the ITL crosses 45 ms 4 / 7 of the way from 16 to 20
    at45 = capacity.most_capacity([c], limits(45, 1000))
    assert at45.levels == (16, 20) and at45.rate == pytest.approx(16 + 16 / 7)
    assert at45.p99_itl_ms == pytest.approx(45.0)
    assert capacity.lowest_latency_at([c], 12, limits(50, 1000)).p99_itl_ms == pytest.approx(32.0)


# Old curves (stored before curves kept their SLO and levels their intervals).

def test_an_old_curve_answers_with_no_interval_and_says_so():
    old = trial(5, lv(4, 20, 200, held=True), lv(8, 40, 500, held=True),
                lv(12, 80, 1400, held=False), slo=None)
    assert old.curve.slo is None and old.curve.capacity_rps == 8  # the highest held level
    assert old.curve.estimate().lower is None
    # at the study's SLO as at others, it answers as it was read then: a measured level
    answer = capacity.most_capacity([old], limits(50, 1000))
    assert answer.trial.number == 5 and answer.rate == 8.0
    assert capacity.most_capacity([old], limits(30, 1000)).rate == 4.0
    assert answer.estimate.lower is None and answer.estimate.upper is None
    assert not answer.at_the_limit
    assert interval_text(answer) == "(no interval: the trial was stored before capacity " \
                                    "intervals)"
    at = capacity.lowest_latency_at([old], 7.0, limits(50, 1000))
    assert at.p99_itl_ms == pytest.approx(35.0) and not at.at_the_limit
    assert capacity.lowest_latency_at([old], 8.5, limits(50, 1000)) is None
