"""The few places where tuner reaches into Optuna's private state, each because Optuna has
no public form of it (checked against Optuna 4.x). Everything else uses the public API
(``study.user_attrs``, ``study.set_user_attr``, ``trial.set_user_attr``, ``study.tell``,
``study.get_trials``...). A private name that Optuna renames breaks here, in one place;
``tests/unit/test_imports.py`` checks that no other module names one.
"""

from __future__ import annotations

from typing import Any

import optuna
from optuna.trial import FrozenTrial


def frozen_trial_id(t: FrozenTrial) -> int | None:
    """The storage's id of a stored trial. Why private: ``FrozenTrial`` exposes ``number``
    only, and the dashboard's notes and the heartbeat are keyed by the storage's id."""
    return getattr(t, "_trial_id", None)


def trial_id(trial: optuna.Trial) -> int:
    """The storage's id of a live trial. Why private: ``Trial`` exposes ``number`` only,
    and the storage's calls (heartbeat, system attributes) take the id."""
    return trial._trial_id


def stored_trial(study: optuna.Study, trial: optuna.Trial) -> FrozenTrial:
    """The trial as the storage has it now (another worker may have closed it). Why
    private: ``study.get_trials`` reads every trial; this reads one."""
    return storage_of(study).get_trial(trial_id(trial))


def storage_of(study: optuna.Study) -> optuna.storages.BaseStorage:
    """The study's storage object (to load the same study again with another sampler, on
    the same connection pool and heartbeat settings). Why private: ``Study`` keeps it as
    ``_storage`` only; ``optuna.Trial.storage`` is public but needs a trial."""
    return study._storage


def set_trial_system_attr(study: optuna.Study, trial: FrozenTrial, key: str,
                          value: Any) -> None:
    """A system attribute on the trial a sampler is proposing for. Why private: samplers
    get a ``FrozenTrial``, which cannot write, and ``Trial.set_system_attr`` is deprecated
    (Optuna's own samplers write through the storage the same way)."""
    storage_of(study).set_trial_system_attr(frozen_trial_id(trial), key, value)
