"""Stopping rules (pure): the deadline and convergence of the hypervolume."""

import datetime as dt

from tuner.runner.stopping import deadline_at, reason, study_reason, trials_without_gain
from tuner.testing.studies import study_spec
from tuner.trials import TrialRecord


def test_a_duration_counts_from_the_launch():
    assert deadline_at("8h", 1000.0) == 1000.0 + 8 * 3600
    assert deadline_at("90", 0.0) == 90.0 and deadline_at("15m", 0.0) == 900.0
    assert deadline_at(None, 5.0) is None and deadline_at("", 5.0) is None


def test_a_time_is_local_unless_it_has_an_offset():
    assert deadline_at("2026-12-01T08:00+00:00", 0.0) == dt.datetime(
        2026, 12, 1, 8, tzinfo=dt.timezone.utc).timestamp()
    assert deadline_at("2026-12-01T08:00", 0.0) == dt.datetime(2026, 12, 1, 8).timestamp()


def test_trials_without_gain_counts_since_the_last_growth():
    assert trials_without_gain([]) == 0
    assert trials_without_gain([(0, 0.0), (1, 0.0)]) == 2  # never grew: every trial counts
    assert trials_without_gain([(0, 0.0), (1, 5.0), (2, 5.0), (3, 5.0)]) == 2
    assert trials_without_gain([(0, 1.0), (1, 1.0), (2, 3.0)]) == 0


def test_reason_deadline_then_patience():
    hist = [(0, 1.0), (1, 1.0), (2, 1.0)]
    assert reason(100.0, None, hist, now=99.0) is None
    assert "deadline" in reason(100.0, None, hist, now=100.0)
    assert reason(None, 3, hist, now=0.0) is None  # 2 trials without gain
    assert "not improved for 3 trials" in reason(None, 3, hist + [(3, 1.0)], now=0.0)
    assert reason(None, None, hist, now=1e12) is None


def _measured(n, thr, itl, baseline=None, outcome="measured", state="complete"):
    return TrialRecord(number=n, state=state, outcome=outcome, values=(thr, itl),
                       constraints={"starts": 0.0}, baseline=baseline, flags={"n": n},
                       metrics={"output_throughput": thr, "p99_itl_ms": itl})


def test_study_reason_scores_the_whole_front_and_skips_stopped():
    spec = study_spec("s")
    spec = spec.model_copy(update={"search": spec.search.model_copy(update={"patience": 2})})
    default = _measured(0, 100.0, 50.0, baseline="default")
    better = _measured(1, 200.0, 40.0)
    worse = _measured(2, 90.0, 60.0)
    stopped = TrialRecord(number=3, state="fail", outcome="stopped")
    assert study_reason(spec, [default, better, worse, stopped], 0.0, 0.0) is None
    assert "not improved for 2" in study_reason(
        spec, [default, better, worse, stopped, _measured(4, 150.0, 45.0)], 0.0, 0.0)
    # the low-latency end counts: lower ITL for less throughput than the default is a gain
    assert study_reason(spec, [default, better, worse, _measured(4, 90.0, 20.0)],
                        0.0, 0.0) is None
