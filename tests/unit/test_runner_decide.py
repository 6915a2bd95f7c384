"""The trial loop's pure decisions (``tuner.runner.decide``) and its phase accounting
(``measure.with_overhead``): no storage, no engine, no clock."""

import pytest

from tuner.runner.decide import (MAX_DUPLICATES_IN_A_ROW, MAX_INVALID_IN_A_ROW, Run, decide,
                                 reason_to_stop)
from tuner.runner.measure import with_overhead
from tuner.runner.proposal import Proposal
from tuner.storage import load_study_file
from tuner.trials import record
from tuner.trials.record import TrialRecord

STUDY = '[model]\npath = "models/llama3-8b"\n[search]\nn_trials = 3\n'


@pytest.fixture
def spec(study_file):
    return load_study_file(study_file(STUDY))


def stop(spec, records=(), run=Run(), **kw):
    args = dict(n_trials=None, timeout_s=None, stop_asked=False, launched_at=0.0, now=1.0)
    return reason_to_stop(spec, list(records), run, **{**args, **kw})


def test_the_ladder_is_a_phase_of_its_own_not_overhead():
    phases = {"start": 2.0, "benchmark": 3.0, "warmup": 1.0, "ladder": 4.0, "stop": 0.5}
    out = with_overhead(phases, total=10.0)
    assert out["total"] == 10.0
    assert out["overhead"] == pytest.approx(0.5)  # warmup is within benchmark: once
    assert with_overhead({"start": 5.0}, total=4.0)["overhead"] == 0.0


def test_a_worker_goes_on_until_a_limit_is_reached(spec):
    assert stop(spec) is None
    assert "spent its 2 trials" in stop(spec, run=Run(spent=2), n_trials=2)
    assert "time (60 s) is up" in stop(spec, run=Run(elapsed_s=60.0), timeout_s=60.0)
    assert stop(spec, run=Run(elapsed_s=59.9), timeout_s=60.0) is None
    assert "in a row repeated" in stop(spec, run=Run(duplicates=MAX_DUPLICATES_IN_A_ROW))
    assert "measured the client" in stop(spec, run=Run(invalid=MAX_INVALID_IN_A_ROW))
    assert "stop was requested" in stop(spec, stop_asked=True)


def test_the_runs_counts_follow_the_outcomes(spec):
    measured = record.measured(spec, {m: 1.0 for m in spec_metrics(spec)}, TrialRecord())
    dup = record.duplicate(measured, TrialRecord())
    run = Run().after(dup).after(dup)
    assert (run.duplicates, run.spent) == (2, 0)
    assert Run(duplicates=3).after(measured).duplicates == 0
    assert Run().after(measured).spent == 1


def spec_metrics(spec):
    from tuner.runner.plans import compile_trial
    return compile_trial(spec, {}, 1, (0,)).scoring.metrics


def test_decide_tells_without_an_engine_only_what_needs_none(spec):
    base = TrialRecord(flags={"max_num_seqs": 64})
    assert decide(spec, Proposal({}, {}, refused="no"), base, [], 0).outcome == record.FAILED
    told = decide(spec, Proposal({}, {}, infeasible="rule"), base, [], 0)
    assert told.outcome == record.INFEASIBLE
    assert decide(spec, Proposal({"max_num_seqs": 64}, {}), base, [], 0) is None
