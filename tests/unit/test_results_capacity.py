"""Answers from stored curves (tuner.results.capacity), on toy curves: the most capacity
within a pair of p99 limits, the lowest p99 ITL at a rate, and no answer past what was
measured."""

from __future__ import annotations

import pytest

from tuner.results import capacity
from tuner.trials import record
from tuner.trials.curve import Curve, Level
from tuner.trials.record import TrialRecord


def lv(rate, itl, ttft, tput=None, **kw):
    return Level(offered_rps=rate, p99_itl_ms=itl, p99_ttft_ms=ttft,
                 output_throughput=tput if tput is not None else rate * 100, **kw)


def trial(number, *levels, **kw):
    return TrialRecord(number=number, outcome=record.MEASURED, state=record.COMPLETE,
                       curve=Curve(levels=levels), **kw)


# A: low latency, little capacity; B: more capacity at higher latency.
A = trial(1, lv(2, 10, 100), lv(4, 12, 150), lv(6, 30, 400))
B = trial(2, lv(4, 25, 200), lv(8, 40, 500), lv(12, 80, 3000))


@pytest.mark.parametrize("itl,ttft,number,rate", [
    (50, 1000, 2, 8),      # B carries 8 req/s within the looser pair
    (20, 1000, 1, 4),      # only A's levels to 4 req/s hold 20 ms
    (35, 300, 1, 4),       # a TTFT limit rules B's 8 req/s out; A's 6 has 400 ms
    (100, 5000, 2, 12),
    (None, None, 2, 12),   # no limits: the highest measured level
])
def test_most_capacity_within_a_pair_of_limits(itl, ttft, number, rate):
    answer = capacity.most_capacity([A, B], itl, ttft)
    assert (answer.trial.number, answer.rate) == (number, rate)
    assert answer.levels == (rate,)


def test_no_trial_holds_the_limits():
    assert capacity.most_capacity([A, B], 5, None) is None


@pytest.mark.parametrize("rate,number,itl", [
    (3, 1, 11.0),          # A, between its levels 2 and 4
    (4, 1, 12.0),          # at a measured level
    (5, 1, 21.0),          # A 21 ms beats B 32.5 ms
    (10, 2, 60.0),         # only B measured beyond 6 req/s
])
def test_lowest_p99_itl_at_a_rate_interpolates_between_measured_levels(rate, number, itl):
    answer = capacity.lowest_latency_at([A, B], rate)
    assert answer.trial.number == number and answer.p99_itl_ms == pytest.approx(itl)


def test_no_answer_past_the_highest_measured_level():
    assert capacity.lowest_latency_at([A, B], 12.5) is None
    assert capacity.highest_measured([A, B]) == 12
    assert capacity.lowest_latency_at([A, B], 1.0) is None  # below all: nothing measured


def test_limits_apply_at_the_rate():
    answer = capacity.lowest_latency_at([A, B], 5, max_ttft_p99=200)
    assert answer is None  # A reads 275 ms there, B 350 ms


def test_failed_levels_and_trials_that_fail_accuracy_do_not_answer():
    broken = trial(3, lv(20, 5, 50, failed=3), lv(2, 5, 50),
                   lv(16, 5, 50, stopped_early=True))  # a shortened run's p99s
    lossy = trial(4, lv(30, 5, 50), constraints={record.ACCURACY: 0.2})
    answer = capacity.most_capacity([A, B, broken, lossy], None, None)
    assert (answer.trial.number, answer.rate) == (2, 12)


def test_answers_read_the_p99s_each_level_was_judged_on():
    """A level holds on its steady requests' p99s (the ramp and the drain left out); an
    answer reads those, so that it agrees with the level's ``held`` (decision 0036: a GPU
    level held on its steady p99 ITL while its whole run's read above the SLO)."""
    c = trial(3, lv(8, 22, 110, steady_p99_itl_ms=23, held=True),
              lv(16, 58, 680, steady_p99_itl_ms=41, steady_p99_ttft_ms=690, held=True),
              lv(20, 48, 380, held=True))
    answer = capacity.most_capacity([c], 50, 1000)
    assert (answer.rate, answer.p99_itl_ms, answer.p99_ttft_ms) == (20, 48, 380)
    at16 = capacity.most_capacity([c], 45, 1000)
    assert at16 is not None and at16.rate == 16 and at16.p99_itl_ms == 41
    assert capacity.lowest_latency_at([c], 12).p99_itl_ms == pytest.approx(32.0)  # 23..41
