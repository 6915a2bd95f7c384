"""tuner.trials.curve: a ladder's levels round-trip as JSON, and what they imply (capacity,
latency at a reference rate) comes from measured levels only."""

from __future__ import annotations

import json

import pytest

from tuner.trials.curve import Curve, Level
from tuner.trials.record import TrialRecord

pytestmark = pytest.mark.unit


def level(rate: float, p99_itl: float, held: bool, **more) -> Level:
    return Level(offered_rps=rate, achieved_rps=rate * 0.98, output_throughput=rate * 128.0,
                 p50_ttft_ms=40.0, p99_ttft_ms=90.0 + rate, p50_itl_ms=p99_itl / 2,
                 p99_itl_ms=p99_itl, slo_attainment=1.0 if held else 0.6,
                 goodput_rps=rate * (0.98 if held else 0.5), held=held, requests=100,
                 failed=0, **more)


# Measured in ladder order: up, then the bracket narrowed.
CURVE = Curve(levels=(level(10.0, 20.0, True), level(20.0, 60.0, False),
                      level(14.0, 30.0, True), level(17.0, 45.0, False)),
              saturated_rps=20.0, tolerance=0.05, verdict="budget")


def test_capacity_is_the_highest_held_level_and_its_throughput():
    assert CURVE.capacity_rps == 14.0
    assert CURVE.capacity_output_throughput == 14.0 * 128.0


def test_latency_at_a_rate_interpolates_between_the_bracketing_levels():
    assert CURVE.at("p99_itl_ms", 15.5) == pytest.approx(37.5)  # halfway from 14 to 17
    assert CURVE.at("p99_itl_ms", 14.0) == 30.0
    assert CURVE.at("p99_itl_ms", 10.0) == 20.0 and CURVE.at("p99_itl_ms", 20.0) == 60.0


def test_latency_at_a_measured_rate_is_that_levels_own_figure_to_the_last_bit():
    """The reference rate at the top of a bracket (its level failed, the ladder went
    below it): interpolating to the bracket's end, ``va + (vb - va) x 1``, rounds."""
    va, vb = 22.76206641210733, 155.5388548701741
    assert va + (vb - va) * (4.0 - 2.0) / (4.0 - 2.0) != vb  # what interpolation gives
    curve = Curve(levels=(level(4.0, vb, False), level(2.0, va, True)))
    assert curve.at("p99_itl_ms", 4.0) == vb and curve.at("p99_itl_ms", 2.0) == va


def test_latency_outside_the_measured_range_is_refused():
    assert CURVE.at("p99_itl_ms", 9.99) is None
    assert CURVE.at("p99_itl_ms", 20.01) is None
    with pytest.raises(ValueError, match="no level figure"):
        CURVE.at("p99_tpot", 12.0)


def test_no_level_held_gives_capacity_zero_and_no_level_none():
    none_held = Curve(levels=(level(5.0, 90.0, False),))
    assert none_held.capacity_rps == 0.0 and none_held.capacity_output_throughput == 0.0
    assert none_held.at("p99_itl_ms", 5.0) == 90.0
    assert Curve().capacity_rps is None and Curve().at("p99_itl_ms", 1.0) is None


def test_a_curve_round_trips_through_json_with_unknown_keys_kept():
    stored = json.loads(json.dumps(CURVE.to_json()))
    stored["levels"][0]["p999_itl_ms"] = 80.0      # a later tuner's key
    stored["warmup_seconds"] = 3.5
    back = Curve.from_json(stored)
    assert back.levels[0].extra == {"p999_itl_ms": 80.0}
    assert back.extra == {"warmup_seconds": 3.5}
    assert back.to_json() == stored
    assert back.capacity_rps == 14.0 and back.levels[1] == CURVE.levels[1]


def test_a_trial_record_keeps_its_curve():
    rec = TrialRecord(metrics={"capacity_rps": 14.0}, curve=CURVE)
    attrs = json.loads(json.dumps(rec.to_user_attrs()))
    back = TrialRecord.from_user_attrs(attrs)
    assert isinstance(back.curve, Curve) and back.curve == CURVE
    assert back.to_user_attrs() == attrs


def test_a_record_without_a_curve_still_loads():
    old = {"outcome": "measured", "metrics": {"output_throughput": 3000.0}}
    rec = TrialRecord.from_user_attrs(old)
    assert rec.curve is None and rec.to_user_attrs() == old
    assert TrialRecord.from_user_attrs({**old, "curve": None}).curve is None


def test_a_level_stopped_early_bounds_the_capacity_but_gives_no_figures():
    """A level stopped once its SLO miss was certain is a failed level (the capacity stays
    below it) whose figures are a shortened run's: ``at`` interpolates past it, and a
    rate beyond the last whole level has no figure."""
    stopped = level(17.0, 45.0, False, stopped_early=True)
    curve = Curve(levels=(*CURVE.levels[:3], stopped), saturated_rps=20.0)
    assert curve.capacity_rps == 14.0
    assert curve.at("p99_itl_ms", 15.5) == pytest.approx(30.0 + 1.5 / 6.0 * 30.0)  # 14 -> 20
    assert Curve(levels=(CURVE.levels[0], stopped)).at("p99_itl_ms", 12.0) is None
    stored = json.loads(json.dumps(curve.to_json()))
    assert stored["levels"][3]["stopped_early"] is True
    assert "stopped_early" not in stored["levels"][0]  # a whole level's JSON is as before
    assert Curve.from_json(stored) == curve
