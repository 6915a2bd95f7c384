"""Queueing a configuration that is launched exactly as given (outside the rules): the
baselines, a reference run of the default, a calibration set. Its record names it
(``baseline``), holds the flags put on the command line (``launch``) and the effective
configuration (``flags``), and its Optuna parameters are those flags of the space's.

A baseline whose run failed by no fault of its flags is queued again (``to_queue_again``),
at most twice: without vLLM's defaults no gain can be told."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import optuna

from tuner.trials.parts import FailureKind
from tuner.trials.record import FAIL, REFERENCE_BASELINE, STOPPED, TrialRecord


def enqueue_as_given(study: optuna.Study, names: Iterable[str], baseline: str,
                     launch: Mapping[str, Any], flags: Mapping[str, Any]) -> None:
    """Queue ``flags`` (``names``: the space's parameters) as the trial ``baseline``."""
    asked = TrialRecord(baseline=baseline, launch=dict(launch), flags=dict(flags))
    study.enqueue_trial({n: flags[n] for n in names}, user_attrs=asked.to_user_attrs(),
                        skip_if_exists=False)


# A baseline's failure that is not its flags' doing: the client measured itself (a starved
# client), the server was lost during the benchmark, or the worker was stopped or killed
# (the heartbeat closed its trial, which then has no outcome). Every gain is measured
# against the default, so such a baseline is queued again, at most ``AGAIN`` times.
NOT_ITS_FLAGS = (FailureKind.INVALID_MEASUREMENT, FailureKind.CRASH_DURING_BENCHMARK)
AGAIN = 2


def not_its_flags(r: TrialRecord) -> bool:
    """Whether ``r`` failed by no fault of its flags (``NOT_ITS_FLAGS``)."""
    if r.state != FAIL:
        return False
    if r.outcome is None or r.outcome == STOPPED:
        return True
    return r.failure is not None and r.failure.kind in NOT_ITS_FLAGS


def to_queue_again(records: Sequence[TrialRecord]) -> list[TrialRecord]:
    """The last run of each baseline (reference runs aside) to queue again: it failed by no
    fault of its flags, no run of it is queued, running or measured, and it has run at most
    ``AGAIN`` times (a heartbeat's retry and a stopped run queued again count)."""
    runs: dict[str, list[TrialRecord]] = {}
    for r in sorted(records, key=lambda r: r.number):
        if r.baseline and r.baseline != REFERENCE_BASELINE:
            runs.setdefault(r.baseline, []).append(r)
    return [tries[-1] for tries in runs.values()
            if len(tries) <= AGAIN and not_its_flags(tries[-1])
            and all(t.told and not t.measured for t in tries)]
