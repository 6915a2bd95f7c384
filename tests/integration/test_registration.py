"""A worker's registration on real storage (SQLite and PostgreSQL): a trial is named after
its worker and has a heartbeat from the moment the worker takes it."""

from __future__ import annotations

import time

import optuna
from optuna.trial import TrialState

from tuner.runner.registry import PREFIX, Registration


def _study(url: str) -> optuna.Study:
    storage = optuna.storages.RDBStorage(url, heartbeat_interval=1, grace_period=1)
    return optuna.create_study(storage=storage, study_name="reg")


def test_a_trial_taken_by_a_worker_that_dies_at_once_is_still_closed_as_stale(storage_url):
    study = _study(storage_url)
    reg = Registration(study, (0,), interval_s=3600)  # its periodic beat never comes
    reg.beat()
    taken, untouched = study.ask(), study.ask()
    reg.running(taken)  # ... and the worker dies here
    stored = study.user_attrs[PREFIX + reg.id]
    assert stored["trial"] == taken.number and stored["phase"] == "propose"
    time.sleep(2.5)
    optuna.storages.fail_stale_trials(study)
    states = {t.number: t.state for t in study.get_trials(deepcopy=False)}
    assert states[taken.number] == TrialState.FAIL
    # Optuna leaves a trial without any heartbeat running: what `running` guards against
    assert states[untouched.number] == TrialState.RUNNING
    assert study.trials[taken.number].user_attrs["worker"] == reg.id
