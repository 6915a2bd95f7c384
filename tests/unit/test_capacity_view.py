"""A capacity trial's progress line (the worker's line per trial) shows its capacity first,
with its interval, the levels it rests on, the p99s at the reference rate and the saturated
run as the warm-up's (issue 63, point 3); the runner words the capacity as the results'
``capacity_label`` does."""

from __future__ import annotations

import pytest

from tuner.results.capacity import capacity_label
from tuner.runner.progress import told_summary as _short
from tuner.testing.capacity_studies import JUDGED, REFERENCE_RATE, capacity_spec, judged_curve
from tuner.trials import record
from tuner.trials.capacity_view import capacity_text, rests_on
from tuner.trials.curve import objective_figures
from tuner.trials.record import TrialRecord

pytestmark = pytest.mark.unit

SPEC = capacity_spec("progress")
SATURATED = {"output_throughput": 1234.0, "p99_itl_ms": 600.0, "p99_ttft_ms": 8233.0}


def _measured(levels) -> TrialRecord:
    curve = judged_curve(SPEC, levels)
    metrics = {**SATURATED, **objective_figures(curve, REFERENCE_RATE)}
    return record.measured(SPEC, metrics, TrialRecord(curve=curve))


def test_the_progress_line_shows_capacity_first():
    r = _measured(JUDGED[0][2])
    assert r.metric("capacity_rps_lower") is not None
    assert _short(r, REFERENCE_RATE) == (
        f"capacity {capacity_label(r)} req/s on levels 8 and 10; at 4 req/s p99 ITL 40.0 ms, "
        "p99 TTFT 500 ms; warm-up (saturated) 1,234 tok/s, p99 ITL 600.0 ms, "
        "p99 TTFT 8,233 ms")


def test_capacity_zero_rests_on_the_lowest_level_and_holds_no_slo():
    r = _measured(JUDGED[1][2])
    assert r.metric("capacity_rps") == 0 and rests_on(r) == (4.0,)
    assert not r.capacity_held and not r.feasible
    assert _short(r, REFERENCE_RATE).startswith(f"capacity {capacity_label(r)} req/s on "
                                                "level 4; ")


def test_the_runners_words_are_the_results_label():
    every_level_held = _measured(((4.0, 10.0, 100.0, 500.0), (8.0, 20.0, 200.0, 900.0)))
    stored_before_intervals = TrialRecord(metrics={"capacity_rps": 3.6})
    for r in (_measured(JUDGED[0][2]), _measured(JUDGED[1][2]), every_level_held,
              stored_before_intervals, TrialRecord()):
        assert capacity_text(r) == capacity_label(r)
    assert capacity_text(every_level_held).endswith(" censored")
    assert rests_on(every_level_held) == (8.0,)
