"""Baselines survive (issue 63, point 4): a baseline whose run failed by no fault of its
flags (a starved client, a lost server, a stopped or killed worker) is queued again, at
most twice; one that its flags failed, one measured or pending, is not (pure)."""

from __future__ import annotations

import pytest

from tuner.trials import record
from tuner.trials.parts import Failure, FailureKind
from tuner.trials.queued import to_queue_again
from tuner.trials.record import TrialRecord

pytestmark = pytest.mark.unit

FLAGS = {"flags": {"max_num_seqs": 256}, "launch": {}}


def run(number: int, kind: FailureKind | None = None, baseline: str | None = "default",
        state: str = record.FAIL, outcome=record.FAILED) -> TrialRecord:
    failure = None if kind is None else Failure(kind=kind, message="...")
    return TrialRecord(number=number, state=state, outcome=outcome, baseline=baseline,
                       failure=failure, **FLAGS)


def again(*runs: TrialRecord) -> list[int]:
    return [r.number for r in to_queue_again(runs)]


@pytest.mark.parametrize("last", [
    run(0, FailureKind.INVALID_MEASUREMENT),             # a starved client
    run(0, FailureKind.CRASH_DURING_BENCHMARK),          # the server was lost
    run(0, outcome=record.STOPPED),                      # the worker was stopped
    run(0, outcome=None),                                # killed: closed by the heartbeat
])
def test_a_failure_not_of_its_flags_is_queued_again(last):
    assert again(last) == [0]


def test_at_most_twice():
    first, second, third = (run(n, FailureKind.INVALID_MEASUREMENT) for n in (0, 5, 9))
    assert again(first) == [0]
    assert again(first, second) == [5]
    assert again(first, second, third) == []


@pytest.mark.parametrize("runs", [
    (run(0, FailureKind.OOM, state=record.COMPLETE, outcome=record.INFEASIBLE),),
    (run(0, FailureKind.HANG),),                         # its flags may hang the server
    (run(0, FailureKind.INVALID_MEASUREMENT), run(3, state=record.WAITING, outcome=None)),
    (run(0, FailureKind.INVALID_MEASUREMENT), run(3, state=record.RUNNING, outcome=None)),
    (run(0, FailureKind.INVALID_MEASUREMENT, baseline=None),),
    (run(0, FailureKind.INVALID_MEASUREMENT, baseline=record.REFERENCE_BASELINE),),
])
def test_no_other_run_is_queued_again(runs):
    assert again(*runs) == []


def test_each_baseline_by_itself():
    runs = (run(0, FailureKind.INVALID_MEASUREMENT), run(1, FailureKind.INVALID_MEASUREMENT,
                                                          baseline="article"),
            run(2, FailureKind.OOM, baseline="article-chunked"))
    assert again(*runs) == [0, 1]
