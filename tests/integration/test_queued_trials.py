"""Queued trials (reference runs, the warm start, retries of stale trials) are handed out
once each, however many workers ask at the same moment, and a stale trial is retried once
however many workers close it at the same moment. On SQLite, Optuna's pop of a
WAITING trial was a read then a write in no transaction: four processes ran 10 to 16 of 60
queued trials twice (optuna issue 4002), and a killed worker's trial looked closed by
another (CI, test_launch_status_kill_stop_and_resume). Real processes, real storage."""

from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor

import optuna
from optuna.trial import TrialState

from tuner import optuna_adapter
from tuner.storage.database import open_storage

QUEUED, WORKERS, STALE = 60, 4, 40


def _take_queued(url: str) -> list[int]:
    """A worker's loop: ask until Optuna makes a new trial (nothing queued is left)."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.load_study(study_name="queue", storage=open_storage(url))
    taken = []
    while True:
        trial = study.ask()
        queued = "fixed_params" in optuna_adapter.stored_trial(study, trial).system_attrs
        if not queued:  # a new trial: the queue is empty
            study.tell(trial, state=TrialState.FAIL)
            break
        taken.append(trial.number)
        study.tell(trial, [float(trial.suggest_int("x", 0, QUEUED))])
    return taken


def test_each_queued_trial_is_handed_to_one_worker(storage_url):
    study = optuna.create_study(study_name="queue", storage=open_storage(storage_url))
    for x in range(QUEUED):
        study.enqueue_trial({"x": x}, skip_if_exists=False)
    with ProcessPoolExecutor(WORKERS, mp_context=multiprocessing.get_context("spawn")) as pool:
        taken = [f.result() for f in [pool.submit(_take_queued, storage_url)
                                      for _ in range(WORKERS)]]
    every = sorted(sum(taken, []))
    twice = sorted(n for n in set(every) if every.count(n) > 1)
    assert every == list(range(QUEUED)), f"handed out twice: {twice}"
    done = [t for t in study.get_trials(deepcopy=False) if t.state == TrialState.COMPLETE]
    assert sorted(t.number for t in done) == list(range(QUEUED))


def _close_stale(url: str, at: float) -> None:
    """A worker's heartbeat thread: close the stale trials (each one closed is retried)."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.load_study(study_name="stale", storage=open_storage(url, heartbeat=True))
    time.sleep(max(0.0, at - time.time()))  # all sweep at once
    optuna.storages.fail_stale_trials(study)


def test_each_stale_trial_is_retried_once(storage_url, monkeypatch):
    """Closing a stale trial is a read (RUNNING, beat too old) then a write (FAIL, and a
    retry queued). On SQLite four workers sweeping at once queued 1 to 5 of 40 retries
    twice, so the same flags ran twice and the budget counted them."""
    monkeypatch.setenv("TUNER_HEARTBEAT_S", "1")  # the workers' grace: 2 s
    study = optuna.create_study(study_name="stale", storage=open_storage(storage_url))
    for _ in range(STALE):
        trial = study.ask()
        trial.suggest_int("x", 0, 9)
        optuna_adapter.record_heartbeat(study, optuna_adapter.trial_id(trial))
    with ProcessPoolExecutor(WORKERS, mp_context=multiprocessing.get_context("spawn")) as pool:
        at = time.time() + 8  # every beat is past the grace then; the workers have started
        for sweep in [pool.submit(_close_stale, storage_url, at) for _ in range(WORKERS)]:
            sweep.result()
    trials = study.get_trials(deepcopy=False)
    retries = [t.system_attrs["failed_trial"] for t in trials if "failed_trial" in t.system_attrs]
    assert sorted(retries) == list(range(STALE))
    assert all(t.state == TrialState.FAIL for t in trials[:STALE])
