"""Drift between hosts and windows: the default configuration measured again.

A study that runs over several windows or hosts compares trials measured on different
machines as equals, while the same configuration can read several percent apart there
(the H200's default on two boxes: `results/h200/round2/`). With
``search.reference_runs`` each worker that starts on a study whose default is already
measured first runs the default again (baseline ``reference``, launched as the default was),
so the study records each host's speed beside the default's (queued when the worker starts,
it runs after any trials already queued). Pure: which default to repeat, and each reference
run's change against it. Not done: correcting the other trials by it (one run per window is
no estimate of a factor; the figures stay as measured).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Mapping

from tuner.trials.queries import default_baseline
from tuner.trials.record import REFERENCE_BASELINE, WAITING, TrialRecord


@dataclass(frozen=True)
class ReferenceRun:
    trial: int
    worker: str | None
    host: str | None
    default_trial: int
    change: Mapping[str, float | None]  # per metric: % above (+) or below (-) the default's


def to_repeat(records: Sequence[TrialRecord]) -> TrialRecord | None:
    """The measured default to run again for a worker that starts now; None while the
    default is not measured (it is then this window's reference itself) or while a
    reference run is already queued."""
    if any(r.baseline == REFERENCE_BASELINE and r.state == WAITING for r in records):
        return None
    return default_baseline(records)


def reference_runs(records: Sequence[TrialRecord], metrics: Sequence[str]
                   ) -> list[ReferenceRun]:
    """Every measured reference run against the default: each metric's change in %."""
    default = default_baseline(records)
    if default is None:
        return []
    out = []
    for r in records:
        if r.baseline != REFERENCE_BASELINE or not r.measured:
            continue
        change: dict[str, float | None] = {}
        for m in metrics:
            mine, theirs = r.metric(m), default.metric(m)
            change[m] = (None if mine is None or not theirs
                         else 100.0 * (mine - theirs) / theirs)
        out.append(ReferenceRun(r.number, r.worker, r.host, default.number, change))
    return out
