"""Telling the study: user attributes, constraints, then the state and values.

``tell`` may be called again after a database outage broke it half-way (the worker retries
it, see ``tuner.storage.outage``), so it is idempotent: attributes are set again (harmless),
constraints already set are skipped, and a trial found finished is not told twice. A trial
that someone else closed while this worker could not reach the database (the heartbeat of
another worker failed it as stale) keeps that state; the measurement is then added as a
new finished trial with the same parameters, ``recorded_for`` naming the closed one, so
nothing measured is lost.
"""

from __future__ import annotations

import dataclasses

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner import optuna_adapter
from tuner.trials.queries import read_records, readable
from tuner.trials.record import COMPLETE, TrialRecord

CONSTRAINTS_KEY = "constraints:"  # where Optuna keeps what set_constraint set


def tell(study: optuna.Study, trial: optuna.Trial, told: TrialRecord) -> None:
    """Write one trial's record. Constraints are set for every trial (the same keys), so
    constrained samplers see a consistent picture."""
    stored = optuna_adapter.stored_trial(study, trial)
    if stored.state.is_finished():
        if not _told_already(stored, told):
            _add_copy(study, stored, told)
        return
    for key, value in told.to_user_attrs().items():
        trial.set_user_attr(key, value)
    for key, value in told.constraints.items():
        if CONSTRAINTS_KEY + key not in stored.system_attrs:
            trial.set_constraint(key, value)
    if told.state == COMPLETE:
        study.tell(trial, list(told.values))
    else:
        study.tell(trial, state=TrialState.FAIL)


def _state(told: TrialRecord) -> TrialState:
    return TrialState.COMPLETE if told.state == COMPLETE else TrialState.FAIL


def _told_already(stored: FrozenTrial, told: TrialRecord) -> bool:
    """The stored trial is this record (an earlier attempt committed before its answer was
    lost), not a trial closed by someone else."""
    mine = readable(stored)
    return (mine is not None and stored.state == _state(told) and mine.outcome == told.outcome
            and mine.worker == told.worker)


def _add_copy(study: optuna.Study, closed: FrozenTrial, told: TrialRecord) -> None:
    state = _state(told)
    if _copied_already(study, closed.number, told):
        return
    attrs = dataclasses.replace(told, recorded_for=closed.number).to_user_attrs()
    study.add_trial(optuna.trial.create_trial(
        state=state, values=list(told.values) if state == TrialState.COMPLETE else None,
        params=closed.params, distributions=closed.distributions, user_attrs=attrs,
        constraints={k: float(v) for k, v in told.constraints.items()}))


def _copied_already(study: optuna.Study, number: int, told: TrialRecord) -> bool:
    return any(r.recorded_for == number and r.worker == told.worker
               for r in read_records(study.get_trials(deepcopy=False)))
