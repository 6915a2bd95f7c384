"""Which default a starting worker repeats, and each reference run against it (pure)."""

import pytest

from tuner.trials import drift
from tuner.trials.record import (COMPLETE, DEFAULT_BASELINE, MEASURED, REFERENCE_BASELINE,
                                 WAITING, TrialRecord)


def _measured(number, baseline, tput, itl, host="a"):
    return TrialRecord(number=number, state=COMPLETE, outcome=MEASURED, baseline=baseline,
                       host=host, worker=f"{host}-1",
                       metrics={"output_throughput": tput, "p99_itl_ms": itl})


def test_the_measured_default_is_repeated_unless_a_reference_is_already_queued():
    default = _measured(0, DEFAULT_BASELINE, 3891.0, 204.8)
    assert drift.to_repeat([]) is None  # nothing measured: the default is the reference
    assert drift.to_repeat([TrialRecord(number=0, state=WAITING, baseline=DEFAULT_BASELINE)]) \
        is None
    assert drift.to_repeat([default, _measured(1, None, 1.0, 1.0)]) is default
    queued = TrialRecord(number=2, state=WAITING, baseline=REFERENCE_BASELINE)
    assert drift.to_repeat([default, queued]) is None
    assert drift.to_repeat([default, _measured(2, REFERENCE_BASELINE, 1.0, 1.0)]) is default


def test_each_reference_run_is_its_change_against_the_default():
    records = [_measured(0, DEFAULT_BASELINE, 3891.0, 204.8),
               _measured(17, None, 3789.0, 161.4, host="b"),
               _measured(21, REFERENCE_BASELINE, 3711.0, 205.4, host="b"),
               TrialRecord(number=22, state=WAITING, baseline=REFERENCE_BASELINE)]
    (run,) = drift.reference_runs(records, ["output_throughput", "p99_itl_ms"])
    assert (run.trial, run.host, run.default_trial) == (21, "b", 0)
    assert run.change["output_throughput"] == pytest.approx(-4.626, abs=1e-3)
    assert run.change["p99_itl_ms"] == pytest.approx(100 * 0.6 / 204.8)
    assert drift.reference_runs(records[1:], ["output_throughput"]) == []  # no default
