"""The score's reference point (tuner.trials.reference): the whole front the SLOs allow."""

import pytest

from tuner.spec.study import DEFAULT_OBJECTIVES, SLOSection
from tuner.testing.studies import study_spec
from tuner.trials import TrialRecord, history, hypervolume, reference_point
from tuner.trials.pareto import minimised
from tuner.trials.reference import FLOOR_SHARE, LATENCY_MULTIPLE, rule_for, study_rule

GOALS = DEFAULT_OBJECTIVES


def _rec(n, thr, itl, baseline=None):
    return TrialRecord(number=n, state="complete", outcome="measured", values=(thr, itl),
                       constraints={"starts": 0.0}, baseline=baseline, flags={"n": n},
                       metrics={"output_throughput": thr, "p99_itl_ms": itl})


def _spec(**slo):
    spec = study_spec("s")
    return spec.model_copy(update={"slo": SLOSection(**slo)})


def test_without_bounds_the_reference_is_a_share_and_a_multiple_of_the_default():
    rule = study_rule(_spec())
    assert rule.point((4000.0, 200.0)) == (4000.0 * FLOOR_SHARE, 200.0 * LATENCY_MULTIPLE)
    assert rule.point(None) == (0.0, 1000.0)  # the worst values without a default


def test_the_study_bounds_win_over_the_default():
    rule = study_rule(_spec(p99_itl_ms=250, min_output_throughput=1500))
    assert rule.point((4000.0, 200.0)) == (1500.0, 250.0)
    assert "SLO limit" in rule.label(0) and "floor" in rule.label(0)


def test_half_the_default_latency_at_ninety_percent_throughput_adds_volume():
    default = _rec(0, 4000.0, 200.0, baseline="default")
    faster = _rec(1, 0.9 * 4000.0, 100.0)
    for spec in (_spec(), _spec(p99_itl_ms=250)):
        ref, _ = reference_point(default, GOALS, study_rule(spec))
        hv = history([default, faster], GOALS, ref)
        assert hv[1][1] > hv[0][1] > 0  # the default counts too, and the faster point adds


def test_a_floor_cuts_what_lies_below_it():
    rule = rule_for(GOALS, {}, {"output_throughput": 3000.0}, [0.0, 1000.0])
    ref = minimised(rule.point((4000.0, 200.0)), GOALS)
    slow = minimised((2500.0, 10.0), GOALS)
    assert hypervolume([slow], ref) == 0.0
    assert hypervolume([minimised((3500.0, 10.0), GOALS)], ref) == pytest.approx(500 * 390)


def test_min_output_throughput_is_a_floor_not_an_upper_limit():
    slo = SLOSection(p99_itl_ms=50, min_output_throughput=100)
    assert slo.limits() == {"p99_itl_ms": 50}
    assert slo.floors() == {"output_throughput": 100}
