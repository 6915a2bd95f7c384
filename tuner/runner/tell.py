"""Telling the study: user attributes, constraints, then the state and values.

``tell`` may be called again after a database outage broke it half-way (the worker retries
it, see ``tuner.study.outage``), so it is idempotent: attributes are set again (harmless),
constraints already set are skipped, and a trial found finished is not told twice. A trial
that someone else closed while this worker could not reach the database (the heartbeat of
another worker failed it as stale) keeps that state; the measurement is then added as a
new finished trial with the same parameters, ``recorded_for`` naming the closed one, so
nothing measured is lost.
"""

from __future__ import annotations

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner import record

CONSTRAINTS_KEY = "constraints:"  # where Optuna keeps what set_constraint set


def tell(study: optuna.Study, trial: optuna.Trial, told: record.Told) -> None:
    """Write one trial's record. Constraints are set for every trial (the same keys), so
    constrained samplers see a consistent picture."""
    stored = study._storage.get_trial(trial._trial_id)
    if stored.state.is_finished():
        if not _told_already(stored, told):
            _add_copy(study, stored, told)
        return
    for key, value in told.attrs.items():
        trial.set_user_attr(key, value)
    for key, value in told.constraints.items():
        if CONSTRAINTS_KEY + key not in stored.system_attrs:
            trial.set_constraint(key, value)
    if told.state == "complete":
        study.tell(trial, list(told.values))
    else:
        study.tell(trial, state=TrialState.FAIL)


def _told_already(stored: FrozenTrial, told: record.Told) -> bool:
    """The stored trial is this record (an earlier attempt committed before its answer was
    lost), not a trial closed by someone else."""
    state = TrialState.COMPLETE if told.state == "complete" else TrialState.FAIL
    return (stored.state == state
            and stored.user_attrs.get("outcome") == told.attrs.get("outcome")
            and stored.user_attrs.get("worker") == told.attrs.get("worker"))


def _add_copy(study: optuna.Study, closed: FrozenTrial, told: record.Told) -> None:
    state = TrialState.COMPLETE if told.state == "complete" else TrialState.FAIL
    attrs = {**told.attrs, "recorded_for": closed.number}
    if _copied_already(study, closed.number, told):
        return
    study.add_trial(optuna.trial.create_trial(
        state=state, values=list(told.values) if state == TrialState.COMPLETE else None,
        params=closed.params, distributions=closed.distributions, user_attrs=attrs,
        constraints={k: float(v) for k, v in told.constraints.items()}))


def _copied_already(study: optuna.Study, number: int, told: record.Told) -> bool:
    return any(t.user_attrs.get("recorded_for") == number
               and t.user_attrs.get("worker") == told.attrs.get("worker")
               for t in study.get_trials(deepcopy=False))
