"""Tampered trial records for tests: a stored trial's copy with some attributes rewritten.

``add_tampered(study, number, **attrs)`` adds, through Optuna's own storage, a finished
copy of trial ``number`` whose user attributes ``attrs`` replace (or add to) its own, as
someone with write access to the database could; a value ``None`` removes the attribute.
The copy keeps the trial's values, constraints and parameters, so only the rewritten
attributes differ. Returns the copy's number.
"""

from __future__ import annotations

from typing import Any

import optuna


def add_tampered(study: optuna.Study, number: int, **attrs: Any) -> int:
    t = next(t for t in study.get_trials(deepcopy=False) if t.number == number)
    user_attrs = {k: v for k, v in {**t.user_attrs, **attrs}.items() if v is not None}
    study.add_trial(optuna.trial.create_trial(
        state=t.state, values=t.values, params=t.params, distributions=t.distributions,
        user_attrs=user_attrs, constraints=dict(t.constraints or {})))
    return len(study.get_trials(deepcopy=False)) - 1
