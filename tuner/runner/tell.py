"""Telling the study: user attributes, constraints, then the state and values."""

from __future__ import annotations

import optuna
from optuna.trial import TrialState

from tuner import record


def tell(study: optuna.Study, trial: optuna.Trial, told: record.Told) -> None:
    """Write one trial's record. Constraints are set for every trial (the same keys), so
    constrained samplers see a consistent picture."""
    for key, value in told.attrs.items():
        trial.set_user_attr(key, value)
    for key, value in told.constraints.items():
        trial.set_constraint(key, value)
    if told.state == "complete":
        study.tell(trial, list(told.values))
    else:
        study.tell(trial, state=TrialState.FAIL)
