"""What the trial loop does next, from what it knows (pure): ``reason_to_stop`` before
a trial is asked, ``decide`` once it is proposed. Neither reads a clock, a storage or a
process: the worker passes the records, the times and its counts in
(``tuner.runner.worker``), as Optuna's ``_run_trial`` leaves its decisions to the
objective and the study.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from tuner.runner.proposal import Proposal
from tuner.runner.stopping import study_reason
from tuner.spec.study import StudySpec
from tuner.trials import queries, record
from tuner.trials.record import TrialRecord

# A sampler that proposes only measured configurations this many times in a row has
# converged (or is stuck): each costs no trial, so without a cap the worker would spin.
MAX_DUPLICATES_IN_A_ROW = 25
# Invalid measurements (the client, not the server, was measured) spend no budget; this
# many in a row means the host is too loaded to measure at all, and the worker stops.
MAX_INVALID_IN_A_ROW = 5


@dataclass(frozen=True)
class Run:
    """What one worker has done so far: the trials it spent of the budget, the
    duplicates and invalid measurements in a row, and how long it has run (seconds)."""

    spent: int = 0
    duplicates: int = 0
    invalid: int = 0
    elapsed_s: float = 0.0

    def after(self, told: TrialRecord) -> Run:
        """This run once ``told`` is recorded (``elapsed_s`` unchanged)."""
        return Run(self.spent + queries.spends_budget(told),
                   self.duplicates + 1 if told.outcome == record.DUPLICATE else 0,
                   self.invalid + 1 if queries.measured_the_client(told) else 0,
                   self.elapsed_s)


def reason_to_stop(spec: StudySpec, records: Sequence[TrialRecord], run: Run, *,
                   n_trials: int | None, timeout_s: float | None, stop_asked: bool,
                   launched_at: float, now: float) -> str | None:
    """Why a worker that has done ``run`` on a study whose trials are ``records`` stops
    now (a sentence), else None. ``n_trials`` and ``timeout_s`` are the worker's own
    limits, ``stop_asked`` whether `tuner stop` asked, ``launched_at`` and ``now`` epoch
    seconds for the study's deadline (``tuner.runner.stopping``)."""
    if n_trials is not None and run.spent >= n_trials:
        return f"this worker spent its {n_trials} trials of the budget"
    if queries.counted(records) >= spec.search.n_trials:
        return f"the study's budget of {spec.search.n_trials} trials is spent"
    if timeout_s is not None and run.elapsed_s >= timeout_s:
        return f"the worker's time ({timeout_s:.0f} s) is up"
    if run.duplicates >= MAX_DUPLICATES_IN_A_ROW:
        return f"{run.duplicates} proposals in a row repeated measured configurations"
    if run.invalid >= MAX_INVALID_IN_A_ROW:
        return (f"{run.invalid} trials in a row measured the client, not the server "
                "(this host is too loaded; see workload.max_client_lag_ms)")
    if stop_asked:
        return "a stop was requested (tuner stop)"
    if spec.search.deadline or spec.search.patience:
        return study_reason(spec, records, launched_at, now)
    return None


def decide(spec: StudySpec, prop: Proposal, base: TrialRecord,
           records: Sequence[TrialRecord], number: int) -> TrialRecord | None:
    """The record to tell for trial ``number``'s proposal without starting an engine: a
    refused or infeasible configuration, or a repeat of one already measured among
    ``records`` (unless it is a baseline or the study repeats); None when it is to be
    measured."""
    if prop.refused:
        return record.failed({"class": "refused", "message": prop.refused,
                              "log_tail": ""}, base)
    if prop.infeasible:
        return record.infeasible(spec, {"class": "rules", "message": prop.infeasible,
                                        "log_tail": ""}, base)
    if not prop.baseline and not spec.search.repeats:
        seen = queries.already_measured(records, prop.flags, number)
        if seen is not None:
            return record.duplicate(seen, base)
    return None
